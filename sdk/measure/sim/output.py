"""Write a simulated scene to a folder in the real dataset formats (what ``pairedge simulate`` does).

Layout (see docs/formats.md, "Scene simulator output")::

    video.mp4                                 frames (mp4v), or frames/000000.png when the codec is missing
    frames/000000.png ...                     lossless frames (with --png)
    labels_2d_activity_social_stitched.json   JRDB social / activity annotations (keys 000000.jpg ...)
    gt/gt.txt, det/det.txt, det/tracked.txt   MOT Challenge boxes (1-based frames)
    stickmen.txt                              Buffy stickmen, official layout, one image per frame
    par_labels.jsonl                          JRDB-PAR style per-frame labels
    pairs_gt.jsonl                            the pairwise protocol's ground truth (SIM7 labels)
    pairs_gt_paper3.jsonl                     the same, "together" pairs only, PAPER3 labels
    scene.json                                preset, seed, size, fps, label sets, conventions
    preview/preview_000000.png ...            boxes, ids and pair links (with --preview K)
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from pairedge.core.errors import InputError
from pairedge.core.io.jrdb import JrdbFrame, write_jrdb
from pairedge.core.io.mot import write_mot
from pairedge.core.io.par import N_ACTIONS, N_GLOBAL, N_SOCIAL, ParFrame, write_par
from pairedge.core.io.stickmen import write_stickmen_images
from pairedge.core.labels import PAPER3, SIM7
from pairedge.core.version import __version__
from pairedge.measure.sim.config import SimConfig, get_preset
from pairedge.measure.sim.labels import MODE_LABELS, SIM_ACTIONS, SIM_GLOBAL
from pairedge.measure.sim.preview import draw_preview
from pairedge.measure.sim.scene import STICK_JOINTS, Scene, SimFrame

JRDB_FILE = "labels_2d_activity_social_stitched.json"
TOGETHER = frozenset(MODE_LABELS)


@dataclass(frozen=True)
class SceneFiles:
    """What :func:`write_scene` wrote.

    Attributes:
        out: the output folder. frames: number of frames. files: written paths relative to ``out``.
        video: "video.mp4" or "frames/" (PNG fallback). notes: remarks (e.g. the codec fallback).
        label_counts: pairs per SIM7 label over all frames. mean_people: visible people per frame.
        seconds: wall time.
    """

    out: Path
    frames: int
    files: tuple[str, ...]
    video: str
    notes: tuple[str, ...]
    label_counts: dict[str, int] = field(default_factory=dict)
    mean_people: float = 0.0
    seconds: float = 0.0


def occlusion_category(visible: float) -> str:
    """JRDB occlusion category of a visible share."""
    if visible >= 0.95:
        return "Fully_visible"
    if visible >= 0.5:
        return "Mostly_visible"
    return "Severely_occluded"


def _posture(activity: str) -> str:
    return activity.split("_")[0]


def jrdb_frame(f: SimFrame) -> JrdbFrame:
    """The JRDB annotation of a simulated frame (pairs with a label other than no_interaction)."""
    tids = f.truth.track_ids.tolist()
    social = [
        SIM_ACTIONS[int(np.argmax(f.actions[k, :3]))] if len(f.actions) else "" for k in range(len(tids))
    ]
    for g in f.groups:
        for m in g.members.tolist():
            social[tids.index(m)] = _posture(g.activity)
    attrs = [
        {
            "occlusion": occlusion_category(float(v)),
            "truncated": "true" if t else "false",
            "area": int(b[2] * b[3]),
            "interpolated": False,
            "no_eval": False,
        }
        for v, t, b in zip(f.visibility.tolist(), f.truncated.tolist(), f.truth.boxes.tolist(), strict=True)
    ]
    keep = f.pair_labels != SIM7.index("no_interaction")
    return JrdbFrame(
        frame=f.index,
        image=f"{f.index:06d}.jpg",
        people=f.truth,
        occlusion=tuple(a["occlusion"] for a in attrs),
        attributes=tuple(attrs),
        actions=tuple({SIM_ACTIONS[a]: 1.0 for a in np.flatnonzero(row)} for row in f.actions),
        social_activity=tuple({s: 1.0} for s in social),
        group_ids=f.group_ids.astype(np.int64),
        pairs=f.pairs[keep],
        pair_labels=tuple({SIM7.classes[k].replace("_", " "): 1.0} for k in f.pair_labels[keep]),
    )


def par_frame(f: SimFrame) -> ParFrame:
    """JRDB-PAR style labels: action ids index SIM_ACTIONS, social ids the same action ids (the group's
    posture), global ids index SIM_GLOBAL."""
    n = len(f.truth)
    actions = np.zeros((n, N_ACTIONS), bool)
    actions[:, : len(SIM_ACTIONS)] = f.actions
    social = np.zeros((n, N_SOCIAL), bool)
    social[np.arange(n), np.argmax(f.actions[:, :3], 1) if n else []] = True
    tids = f.truth.track_ids.tolist()
    group_activity = np.zeros((len(f.groups), N_SOCIAL), bool)
    for g, grp in enumerate(f.groups):
        sid = SIM_ACTIONS.index(_posture(grp.activity))
        group_activity[g, sid] = True
        rows = [tids.index(m) for m in grp.members.tolist()]
        social[rows] = False
        social[rows, sid] = True
    glob = np.zeros(N_GLOBAL, bool)
    glob[[SIM_GLOBAL.index(a) for a in f.global_activity]] = True
    return ParFrame(
        f.index,
        f.truth.track_ids.copy(),
        actions,
        tuple(g.members.copy() for g in f.groups),
        group_activity,
        glob,
        social,
    )


def pairs_record(f: SimFrame) -> dict[str, Any]:
    """One line of ``pairs_gt.jsonl``: labelled pairs (``no_interaction`` pairs are left out) and groups."""
    inter = []
    for (a, b), k in zip(f.pairs.tolist(), f.pair_labels.tolist(), strict=True):
        name = SIM7.classes[k]
        if name != "no_interaction":
            inter.append({"ids": [a, b], "label": name, "p_interact": 1.0 if name in TOGETHER else 0.0})
    groups = [{"members": g.members.tolist(), "activity": g.activity} for g in f.groups]
    return {"frame": f.index, "interactions": inter, "groups": groups}


class _Writer:
    """Accumulates one scene's annotations while frames stream through; ``finish`` writes the files."""

    def __init__(self, scene: Scene, out: Path, frames: int, png: bool, preview: int) -> None:
        self.scene, self.out, self.png = scene, out, png
        self.preview_at = (
            set(np.unique(np.linspace(0, frames - 1, preview).round().astype(int)).tolist())
            if preview > 0 and frames > 0
            else set()
        )
        self.notes: list[str] = []
        self.files: list[str] = []
        self.video: cv2.VideoWriter | None = None
        self.video_name = "video.mp4"
        w, h = scene.size
        writer = cv2.VideoWriter(str(out / "video.mp4"), cv2.VideoWriter.fourcc(*"mp4v"), scene.fps, (w, h))
        if writer.isOpened():
            self.video = writer
        else:
            self.video_name, self.png = "frames/", True
            self.notes.append(
                "the mp4v codec is unavailable in this OpenCV build: frames written as PNG instead"
            )
        if self.png:
            (out / "frames").mkdir(exist_ok=True)
        if self.preview_at:
            (out / "preview").mkdir(exist_ok=True)
        self.gt: list[np.ndarray] = []
        self.det: list[np.ndarray] = []
        self.jrdb: list[JrdbFrame] = []
        self.sticks: list[tuple[str, np.ndarray]] = []
        self.par: list[ParFrame] = []
        self.pairs: list[str] = [json.dumps({"labels": list(SIM7.classes)})]
        self.pairs3: list[str] = [json.dumps({"labels": list(PAPER3.classes)})]
        self.counts = np.zeros(len(SIM7), np.int64)
        self.people = 0

    def add(self, f: SimFrame) -> None:
        if self.video is not None:
            self.video.write(f.image)
        if self.png:
            cv2.imwrite(str(self.out / "frames" / f"{f.index:06d}.png"), f.image)
        if f.index in self.preview_at:
            path = self.out / "preview" / f"preview_{f.index:06d}.png"
            cv2.imwrite(str(path), draw_preview(f, wrap=self.scene.proj.cylinder))
        n, d = len(f.truth), len(f.detections)
        self.gt.append(
            np.column_stack([np.full(n, f.index + 1), f.truth.track_ids, f.truth.boxes, np.ones(n)])
        )
        self.det.append(
            np.column_stack(
                [np.full(d, f.index + 1), f.detections.track_ids, f.detections.boxes, f.detections.scores]
            )
        )
        self.jrdb.append(jrdb_frame(f))
        self.sticks.append((f"{f.index:06d}", f.stickmen))
        self.par.append(par_frame(f))
        record = pairs_record(f)
        self.pairs.append(json.dumps(record, separators=(",", ":")))
        record["interactions"] = [i for i in record["interactions"] if i["label"] in TOGETHER]
        self.pairs3.append(json.dumps(record, separators=(",", ":")))
        self.counts += np.bincount(f.pair_labels, minlength=len(SIM7))
        self.people += n

    def finish(self, seed: int, frames: int) -> list[str]:
        if self.video is not None:
            self.video.release()
        out = self.out
        for sub in ("gt", "det"):
            (out / sub).mkdir(exist_ok=True)
        gt = np.concatenate(self.gt) if self.gt else np.zeros((0, 7))
        det = np.concatenate(self.det) if self.det else np.zeros((0, 7))
        write_mot(out / "gt/gt.txt", gt[:, 0], gt[:, 1], gt[:, 2:6], gt[:, 6])
        write_mot(out / "det/det.txt", det[:, 0], np.full(len(det), -1), det[:, 2:6], det[:, 6])
        write_mot(out / "det/tracked.txt", det[:, 0], det[:, 1], det[:, 2:6], det[:, 6])
        write_jrdb(out / JRDB_FILE, self.jrdb)
        write_stickmen_images(out / "stickmen.txt", self.sticks)
        write_par(out / "par_labels.jsonl", self.par)
        (out / "pairs_gt.jsonl").write_text("\n".join(self.pairs) + "\n")
        (out / "pairs_gt_paper3.jsonl").write_text("\n".join(self.pairs3) + "\n")
        (out / "scene.json").write_text(json.dumps(self.scene_info(seed, frames), indent=2))
        files = [
            "gt/gt.txt",
            "det/det.txt",
            "det/tracked.txt",
            JRDB_FILE,
            "stickmen.txt",
            "par_labels.jsonl",
            "pairs_gt.jsonl",
            "pairs_gt_paper3.jsonl",
            "scene.json",
        ]
        files.insert(0, self.video_name)
        if self.preview_at:
            files.append("preview/")
        return files

    def scene_info(self, seed: int, frames: int) -> dict[str, Any]:
        cfg = self.scene.config
        w, h = self.scene.size

        return {
            "preset": cfg.name,
            "seed": seed,
            "frames": frames,
            "width": w,
            "height": h,
            "fps": cfg.camera.fps,
            "camera": cfg.camera.kind,
            "wrap_around": self.scene.proj.cylinder,
            "label_set": SIM7.name,
            "labels": list(SIM7.classes),
            "together_labels": list(MODE_LABELS),
            "actions": list(SIM_ACTIONS),
            "global_activities": list(SIM_GLOBAL),
            "par_ids": {
                "actions": "index into actions",
                "social": "index into actions (the group's posture)",
                "global": "index into global_activities",
            },
            "stick_parts": [
                "torso",
                "left_upper_arm",
                "right_upper_arm",
                "left_lower_arm",
                "right_lower_arm",
                "head",
            ],
            "stick_joints": [list(p) for p in STICK_JOINTS],
            "conventions": {
                "frame_index": "0-based in JSON / JSONL files and image keys; MOT files are 1-based (index + "
                "1)",
                "box": "x y w h in pixels; pixel (c, r) is inside when x <= c < x + w and y <= r < y + h",
                "panorama_box": "x in [0, W); x + w may exceed W: the box wraps around the seam",
                "detection_ids": "det/tracked.txt: simulated tracker ids; ids >= 100000 follow an identity "
                "switch",
            },
            "video": self.video_name,
            "notes": self.notes,
            "pairedge_version": __version__,
            "config": dataclasses.asdict(cfg),
        }


def write_scene(
    config: SimConfig | str,
    seed: int,
    frames: int,
    out: str | Path,
    *,
    png: bool = False,
    preview: int = 0,
    on_frame: Callable[[int], None] | None = None,
) -> SceneFiles:
    """Simulate ``frames`` frames of ``config`` + ``seed`` and write them to the folder ``out``.

    Args:
        config: a :class:`SimConfig` or preset name.
        seed: the scene seed.
        frames: number of frames (>= 1).
        out: output folder (created; existing files of the same names are overwritten).
        png: also write every frame as a lossless PNG under ``frames/``.
        preview: write this many preview PNGs (evenly spaced frames) under ``preview/``.
        on_frame: called with the frame index after each frame (progress reporting).

    Raises:
        InputError: bad arguments (unknown preset, frames < 1, preview < 0, ``out`` is a file).
    """
    cfg = get_preset(config, seed) if isinstance(config, str) else config
    if frames < 1 or preview < 0:
        raise InputError(f"expected frames >= 1 and preview >= 0, got frames={frames}, preview={preview}")
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"output: expected a folder, got the existing file {folder}; choose another --out")
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    scene = Scene(cfg, seed)
    writer = _Writer(scene, folder, frames, png, preview)
    for f in scene.frames(frames):
        writer.add(f)
        if on_frame is not None:
            on_frame(f.index)
    files = writer.finish(seed, frames)
    counts = {name: int(c) for name, c in zip(SIM7.classes, writer.counts.tolist(), strict=True)}
    return SceneFiles(
        folder,
        frames,
        tuple(files),
        writer.video_name,
        tuple(writer.notes),
        counts,
        writer.people / frames,
        time.perf_counter() - start,
    )
