"""Evaluation sources: one stream (a simulator scene, a video with its detections, a CAD sequence) each.

:func:`parse_sources` turns the ``--data`` text of ``pairedge eval`` (and the clip options of ``pairedge
parity pack``) into a list of :class:`StreamSource` — one per scene / log / sequence, so a caller can evaluate
them in parallel and pool the reports. A source opens to an iterator of :class:`SourceFrame` with the truth
where it is known:

* ``sim:PRESET[+PRESET...][:seeds=A-B][:frames=N][:boxes=truth|detections]`` — simulator scenes (one source
  per preset and seed; the simulator's exact pair labels and groups);
* a folder of Collective Activity ``annoNN.mat`` files, or one such file — box-only sequences (no frames),
  every labelled pair with its CAD8 label (``no_interaction`` pairs are the non-interacting ones);
* a video (or image folder) with a detection file and optionally a ground-truth pairwise file
  (``--gold``, the ``pairedge score`` schema; without it, no truth);
* a ROS 2 log (rosbag2 folder, ``.mcap`` or ``.db3``; topics picked as ``pairedge run`` does), or a folder
  holding several logs at any depth (one source per log, e.g. a fleet's recordings). A log's truth is
  ``--gold`` (one log only) or a ``gold.jsonl`` / ``pairs_gt_paper3.jsonl`` file beside it (what
  ``pairedge simulate --bag`` writes); its frame numbers count the paired frames of the log from 0.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.apps.ros.bag import LOG_SUFFIXES, is_log, log_frames, open_log, pick_topic
from pairedge.apps.ros.runner import FrameDecoder
from pairedge.core import limits
from pairedge.core.errors import InputError
from pairedge.core.io.cad import read_cad_dir, read_cad_mat
from pairedge.core.io.ros.msgdefs import COMPRESSED_IMAGE, DETECTION_ARRAY, IMAGE, make_typestore
from pairedge.core.labels import CAD8, PAPER3, SIM7
from pairedge.core.types import Detections
from pairedge.measure.metrics.pairwise import read_pairwise_file, resolve_labels
from pairedge.measure.sim import Scene, get_preset
from pairedge.runtime.runner.inputs import FrameSource, read_detections

NO_INTERACTION = "no_interaction"


@dataclass(frozen=True)
class FrameTruth:
    """The truth of one frame.

    Attributes:
        pairs: (K, 2) int64 track ids ``a < b`` of the labelled pairs.
        labels: (K,) label names.
        interacting: (K,) bool; the other pairs of the frame are not interacting.
        groups: ``(members, activity)`` of each true group of >= 2 people.
    """

    pairs: np.ndarray
    labels: tuple[str, ...]
    interacting: np.ndarray
    groups: tuple[tuple[tuple[int, ...], str], ...] = ()

    def record(self, frame: int, model_labels: Sequence[str]) -> dict[str, Any]:
        """One ground-truth line of the pairwise schema; labels outside ``model_labels`` count as not
        interacting."""
        inter = []
        for (a, b), name, yes in zip(
            self.pairs.tolist(), self.labels, self.interacting.tolist(), strict=True
        ):
            if name in model_labels:
                inter.append({"ids": [a, b], "label": name, "p_interact": 1.0 if yes else 0.0})
        groups = [{"members": list(m), "activity": act} for m, act in self.groups if act in model_labels]
        return {"frame": frame, "interactions": inter, "groups": groups}


@dataclass(frozen=True)
class SourceFrame:
    """One frame of a source: index, image ((H, W, 3) uint8 BGR, or None for box-only data), detections,
    timestamp in seconds, and the truth (None when unknown)."""

    index: int
    image: np.ndarray | None
    detections: Detections
    timestamp: float
    truth: FrameTruth | None


@dataclass(frozen=True)
class StreamSource:
    """One stream to evaluate.

    Attributes:
        kind: "sim", "cad", "video" or "log" (a ROS 2 log).
        name: a short unique name ("sim:static:1000", "cad:seq01", "video:clip.mp4").
        params: what :meth:`open` needs (preset and seed; a .mat path; video, detections, gold paths).
        image_size: ``(W, H)`` for box-only sources (CAD), else None (taken from the frames).
    """

    kind: str
    name: str
    params: dict[str, Any] = field(default_factory=dict)
    image_size: tuple[int, int] | None = None

    @property
    def box_only(self) -> bool:
        return self.kind == "cad"

    def open(
        self, model_labels: Sequence[str] = (), max_frames: int | None = None, notes: list[str] | None = None
    ) -> Iterator[SourceFrame]:
        """The frames in order (at most ``max_frames``); ``notes`` collects what a source dropped (logs)."""
        if self.kind == "log":
            frames = _log_frames(self.params, model_labels, notes if notes is not None else [])
        else:
            frames = {"sim": _sim_frames, "cad": _cad_frames, "video": _video_frames}[self.kind](
                self.params, model_labels
            )
        for k, frame in enumerate(frames):
            if max_frames is not None and k >= max_frames:
                return
            yield frame


def parse_sources(
    data: str,
    *,
    detections: str | Path | None = None,
    gold: str | Path | None = None,
    frames: int | None = None,
) -> list[StreamSource]:
    """The sources described by ``data`` (see the module docstring).

    Args:
        data: ``sim:...``, a CAD folder or ``.mat`` file, or a video / image folder (then ``detections``).
        frames: frames per simulator scene (overrides ``frames=`` in the text); None = the text's or 300.

    Raises:
        InputError: unknown form, missing detections for a video, detections or ground truth given for a
            source that brings its own, nothing found.
    """
    if data.startswith("sim:"):
        _refuse_files(
            data, "simulator scenes bring their own boxes and truth", detections=detections, gold=gold
        )
        from pairedge.export.datasets.training_data import parse_sim_scenes

        ds = parse_sim_scenes(data, frames)  # presets x seeds x frames bounded before any rendering
        for preset in ds.presets:
            get_preset(preset)
        n = ds.frames
        return [
            StreamSource("sim", f"sim:{p}:{s}", {"preset": p, "seed": s, "frames": n, "boxes": ds.boxes})
            for p in ds.presets
            for s in ds.seeds
        ]
    path = Path(data).expanduser()
    if not path.exists():
        raise InputError(
            f"--data {data}: not found; expected sim:PRESET..., a CAD folder / annoNN.mat, a ROS 2 log or a "
            "folder of logs, or a video"
        )

    if is_log(path):
        _refuse_files(data, "a ROS 2 log brings its own detections topic", detections=detections)
        return [_log_source(path, gold)]
    if path.suffix.lower() == ".mat" or (path.is_dir() and any(path.glob("anno*.mat"))):
        _refuse_files(
            data, "CAD sequences bring their own boxes and labels", detections=detections, gold=gold
        )
        return _cad_sources(path)
    logs = _find_logs(path) if path.is_dir() else []
    if logs:
        _refuse_files(data, "ROS 2 logs bring their own detections topic", detections=detections)
        if gold is not None:
            raise InputError(
                f"--data {data}: {len(logs)} logs; --gold is for one log (put a gold.jsonl beside each)"
            )
        return [_log_source(log, None, name=f"log:{log.relative_to(path)}") for log in logs]
    if detections is None:
        raise InputError(
            f"--data {data}: a video or image folder needs --detections (MOT, JRDB or CVML file)"
        )
    params = {"video": str(path), "detections": str(detections), "gold": str(gold) if gold else None}
    return [StreamSource("video", f"video:{path.name}", params)]


def _refuse_files(data: str, why: str, **given: str | Path | None) -> None:
    """An InputError when an option that this kind of source would ignore was given."""
    named = [f"--{name}" for name, value in given.items() if value is not None]
    if named:
        raise InputError(
            f"--data {data}: {' and '.join(named)} cannot be used here ({why}); drop {' and '.join(named)}"
        )


def parse_scene(text: str, frames: int, boxes: str = "truth") -> StreamSource:
    """``PRESET:SEED`` (``static:0``) -> one simulator source."""
    preset, sep, seed = text.partition(":")
    try:
        seed_value = int(seed) if sep else 0
    except ValueError:
        raise InputError(f"--scene: expected PRESET:SEED such as static:0, got {text!r}") from None

    get_preset(preset)
    if boxes not in ("truth", "detections"):
        raise InputError(f"boxes: expected 'truth' or 'detections', got {boxes!r}")
    if frames < 1:
        raise InputError(f"--frames: expected at least 1 frame per scene, got {frames}")

    limits.check_sim_work(1, frames, "--frames")
    return StreamSource(
        "sim",
        f"sim:{preset}:{seed_value}",
        {"preset": preset, "seed": seed_value, "frames": frames, "boxes": boxes},
    )


# -- openers ---------------------------------------------------------------------------------------------
def _sim_frames(params: dict[str, Any], model_labels: Sequence[str]) -> Iterator[SourceFrame]:

    together = set(PAPER3.classes)
    for f in Scene(params["preset"], int(params["seed"])).frames(int(params["frames"])):
        names = tuple(SIM7.classes[int(k)] for k in f.pair_labels)
        truth = FrameTruth(
            np.asarray(f.pairs, np.int64).reshape(-1, 2),
            names,
            np.array([n in together for n in names], bool),
            tuple((tuple(int(m) for m in g.members), g.activity) for g in f.groups),
        )
        dets = f.truth if params["boxes"] == "truth" else f.detections
        yield SourceFrame(f.index, f.image, dets, f.timestamp, truth)


def _cad_sources(path: Path) -> list[StreamSource]:

    seqs = read_cad_dir(path) if path.is_dir() else [read_cad_mat(path)]
    if not seqs:
        raise InputError(f"{path}: no Collective Activity annoNN.mat files")
    return [
        StreamSource("cad", f"cad:{s.path.stem}", {"path": str(s.path), "fps": s.fps}, s.frame_size)
        for s in seqs
    ]


def _cad_frames(params: dict[str, Any], model_labels: Sequence[str]) -> Iterator[SourceFrame]:

    seq = read_cad_mat(params["path"], fps=float(params["fps"]))
    for frame, timestamp, dets in seq.frames():
        pairs, labels = seq.pair_labels(frame)
        names = tuple(CAD8.classes[int(k)] for k in labels)
        truth = FrameTruth(pairs, names, np.array([n != NO_INTERACTION for n in names], bool))
        yield SourceFrame(frame - 1, None, dets, timestamp, truth)


def _video_frames(params: dict[str, Any], model_labels: Sequence[str]) -> Iterator[SourceFrame]:

    dets = read_detections(params["detections"])
    truth = _gold_by_frame(params["gold"], model_labels) if params.get("gold") else None
    source = FrameSource(params["video"])
    try:
        for index, image in source:
            t = truth.get(index, _EMPTY) if truth is not None else None
            yield SourceFrame(index, image, dets.get(index), index / source.fps, t)
    finally:
        source.close()


_EMPTY = FrameTruth(np.zeros((0, 2), np.int64), (), np.zeros(0, bool))


GOLD_NAMES = ("gold.jsonl", "pairs_gt_paper3.jsonl")


def _find_logs(folder: Path) -> list[Path]:
    """Every ROS 2 log below ``folder`` (rosbag2 folders, bare .mcap / .db3 files), sorted; not inside a
    log."""

    folders = sorted(p.parent for p in folder.rglob("metadata.yaml"))
    # not p.is_file(): a FIFO or device named like a log is listed, then refused with its reason when opened
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.suffix.lower() in LOG_SUFFIXES and not p.is_dir() and not any(f in p.parents for f in folders)
    )
    return sorted([*folders, *files])


def _log_source(log: Path, gold: str | Path | None, name: str | None = None) -> StreamSource:
    if gold is None:
        gold = next((log.parent / g for g in GOLD_NAMES if (log.parent / g).is_file()), None)
    params = {"log": str(log), "gold": str(gold) if gold else None}
    return StreamSource("log", name or f"log:{log.name}", params)


def _log_frames(
    params: dict[str, Any], model_labels: Sequence[str], notes: list[str]
) -> Iterator[SourceFrame]:

    truth = _gold_by_frame(params["gold"], model_labels) if params.get("gold") else None
    with open_log(params["log"]) as reader:
        images = pick_topic(reader, None, (IMAGE, COMPRESSED_IMAGE), "image", "one image topic per log")
        dets = pick_topic(reader, None, (DETECTION_ARRAY,), "detections", "one detections topic per log")
        store = make_typestore(reader.connections)
        decoder = FrameDecoder()
        try:
            for _, frame in log_frames(reader, store, decoder, images, dets):
                # frame.index: the image's position on its topic (a dropped message leaves a gap, so the
                # frames after it still meet their truth); frame.time_s: an exact duration from integer ns
                t = truth.get(frame.index, _EMPTY) if truth is not None else None
                yield SourceFrame(frame.index, frame.image, frame.detections, frame.time_s, t)
        finally:  # also when the caller stops early (max_frames)
            dropped = decoder.finish()
            if dropped:
                what = ", ".join(f"{n} x {reason}" for reason, n in sorted(dropped.items()))
                notes.append(f"{Path(params['log']).name}: messages dropped while pairing: {what}")


def _gold_by_frame(gold: str, model_labels: Sequence[str]) -> dict[int, FrameTruth]:
    """Per-frame truth from a pairwise ground-truth file (JSON Lines or CSV) in the model's labels."""

    names = resolve_labels(gold, gold, tuple(model_labels) or None)
    parsed = read_pairwise_file(gold, names)
    table = parsed.pairs
    out: dict[int, FrameTruth] = {}
    groups: dict[int, list[tuple[tuple[int, ...], str]]] = {}
    if parsed.groups is not None:
        g = parsed.groups
        order = np.argsort(g.member_group, kind="stable")  # members of each group, in file order
        bounds = np.searchsorted(g.member_group[order], np.arange(len(g.frame) + 1))
        for k in range(len(g.frame)):
            members = tuple(int(m) for m in g.member_id[order[bounds[k] : bounds[k + 1]]])
            if int(g.activity[k]) >= 0:
                groups.setdefault(int(g.frame[k]), []).append((members, names[int(g.activity[k])]))
    by_frame = np.argsort(table.frame, kind="stable")  # one pass over the file, not one scan per frame
    frames = parsed.frames
    starts = np.searchsorted(table.frame[by_frame], frames, side="left")
    ends = np.searchsorted(table.frame[by_frame], frames, side="right")
    for frame, lo, hi in zip(frames.tolist(), starts.tolist(), ends.tolist(), strict=True):
        rows = by_frame[lo:hi]
        labels = tuple(names[int(v)] if v >= 0 else NO_INTERACTION for v in table.label[rows])
        out[int(frame)] = FrameTruth(
            np.stack([table.id_a[rows], table.id_b[rows]], axis=1).astype(np.int64),
            labels,
            table.p_interact[rows] >= 0.5,
            tuple(groups.get(int(frame), ())),
        )
    return out
