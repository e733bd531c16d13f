"""The bundled model on real video it never saw: PETS 2009 S2.L1 (768 x 576, 795 frames, an elevated
surveillance camera, people 40-130 px tall, many crossing paths), judged against the ground plane.

Nothing is fitted on PETS: this is a check only. Two runs of the streaming :class:`Pipeline` (the same code
as ``pairedge run``) over the whole video, with the model's own flow settings:

1. ground-truth tracks ``mot15/gt/gt.txt`` (ids given);
2. raw ACF detections ``mot15/det/det.txt`` (ids -1: the built-in tracker assigns them). Every kept
   detection is matched to a ground-truth person of the same frame (Hungarian assignment on IoU,
   IoU >= 0.5) so its linked pairs can be judged; a linked pair with an unmatched member counts as
   not together.

**"Together" (ground truth, documented definition).** ``gt.txt`` carries each person's ground-plane position
in metres (columns 8-9). For two people present at frame t, take the centred window t +- ``--window`` frames
(default 10 = +-1 s at the file's 10 fps) and the frames of it where both are present (at least
``--min-common`` = 5). The pair is *together* at t when, over those frames,

* **near**: median distance <= ``--near`` m (1.5) and maximum distance <= ``--near-max`` m (2.5), and
* **moving alike or both still**: both mean speeds (least-squares slope of the position) below ``--still``
  m/s (0.3), or the difference of their velocity vectors at most ``--vel-diff`` m/s (0.5) with the cosine of
  the two velocities at least 0.8.

Two people who cross, pass or meet briefly are near for a moment but move differently: not together.

**Walking vs standing (ground truth, documented definition).** A person's ground speed at t is the
least-squares slope of their position over the same +- ``--window`` frames. A correctly linked (together)
pair-frame is *walking* when both speeds are at least ``--walking`` m/s (0.5: a slow walk is 1 m/s, standing
people sway well under 0.3), *standing* when both are below ``--still`` m/s (0.3), otherwise in between (not
judged). Label agreement: the share of judged pair-frames labelled ``walking_together`` when walking and
``standing_together`` when standing (any other label, e.g. ``sitting_together``, disagrees).

Reported per run: the share of each predicted label among the interacting (linked) pair-frames; the
distance of the linked pairs, median per label, in body heights (box-centre distance / mean box height)
and in metres (ground plane); precision (linked pair-frames that are together), recall (together
pair-frames that are linked; for raw detections, over all ground-truth together pair-frames) and F1; for
raw detections also the detector's own ceiling (:func:`detector_coverage`: the share of together pair-frames
whose two people the detector found in that frame, or within the K frames before).
Writes ``benchmarks/results/bench_real_video.json`` / ``.md`` and, with ``--png``, one frame with the pair
links drawn (``docs/images/pets_pairs.png``). Run from the repository root::

    python benchmarks/bench_real_video.py                      # ../shared/data, about 1 minute
    python benchmarks/bench_real_video.py /path/to/pets09_s2l1 --model runs/candidate --out /tmp/r
"""

from __future__ import annotations

import argparse
import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from _matching import match_to_truth
from _train_bench import write
from pairedge.core.bundled import default_model_dir
from pairedge.core.errors import ModelError, PairedgeError
from pairedge.core.io.mot import read_mot
from pairedge.runtime import Deployment, PipelineConfig
from pairedge.runtime.runner.inputs import FrameSource, read_detections
from pairedge.runtime.tracker import TrackerConfig

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "pets09_s2l1"
PNG = HERE.parent / "docs" / "images" / "pets_pairs.png"


#: Acceptance targets of the real-world issue (both runs).
TARGETS = {"precision": 0.70, "recall": 0.80, "sitting_share": 0.02}


@dataclass(frozen=True)
class Together:
    """The ground-plane definition of "together" (see the module docstring); units metres, seconds."""

    window: int = 10
    min_common: int = 5
    near: float = 1.5
    near_max: float = 2.5
    still: float = 0.3
    vel_diff: float = 0.5
    min_cos: float = 0.8
    walking: float = 0.5


def ground_positions(gt: Path) -> tuple[np.ndarray, np.ndarray]:
    """Ground-plane positions from a MOT15 ``gt.txt``.

    Returns:
        pos: (F, T, 2) float64 metres indexed by [video frame (0-based), track id], NaN where absent.
        present: (F, T) bool.
    """
    table = read_mot(gt)
    frames, ids = table.frame - 1, table.track_id
    pos = np.full((int(frames.max()) + 1, int(ids.max()) + 1, 2), np.nan)
    pos[frames, ids] = table.extra[:, :2]
    return pos, np.isfinite(pos).all(axis=2)


def together_matrix(pos: np.ndarray, fps: float, rule: Together = Together()) -> np.ndarray:
    """(F, T, T) bool: pair (i, j) together at frame f by ``rule`` (symmetric, False on the diagonal).

    Args:
        pos: (F, T, 2) metres, NaN where a person is absent. fps: frames per second of the file.
    """
    f_count, t_count = pos.shape[:2]
    out = np.zeros((f_count, t_count, t_count), bool)
    offsets = np.arange(-rule.window, rule.window + 1)
    times = offsets / fps
    for f in range(f_count):
        idx = np.clip(f + offsets, 0, f_count - 1)
        valid_t = (f + offsets >= 0) & (f + offsets < f_count)
        win = pos[idx]  # (K, T, 2)
        here = np.flatnonzero(np.isfinite(pos[f]).all(axis=1))
        for n, i in enumerate(here):
            for j in here[n + 1 :]:
                both = valid_t & np.isfinite(win[:, i]).all(axis=1) & np.isfinite(win[:, j]).all(axis=1)
                if both.sum() < rule.min_common:
                    continue
                a, b, t = win[both, i], win[both, j], times[both]
                d = np.hypot(*(a - b).T)
                if np.median(d) > rule.near or d.max() > rule.near_max:
                    continue
                va, vb = _slope(t, a), _slope(t, b)
                sa, sb = np.hypot(*va), np.hypot(*vb)
                still = sa < rule.still and sb < rule.still
                cos = float(va @ vb / max(sa * sb, 1e-9))
                alike = np.hypot(*(va - vb)) <= rule.vel_diff and cos >= rule.min_cos
                out[f, i, j] = out[f, j, i] = bool(still or alike)
    return out


def _slope(t: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Least-squares velocity (2,) of positions p (K, 2) at times t (K,)."""
    tc = t - t.mean()
    return (tc @ (p - p.mean(axis=0))) / max(float(tc @ tc), 1e-9)


def ground_speeds(pos: np.ndarray, fps: float, window: int) -> np.ndarray:
    """(F, T) float64 ground speed in m/s of each person at each frame: the least-squares slope of the
    position over the frames of t +- ``window`` where the person is present (at least 3), NaN otherwise."""
    f_count, t_count = pos.shape[:2]
    out = np.full((f_count, t_count), np.nan)
    for f in range(f_count):
        lo, hi = max(f - window, 0), min(f + window + 1, f_count)
        t = np.arange(lo, hi) / fps
        for i in np.flatnonzero(np.isfinite(pos[f]).all(axis=1)):
            ok = np.isfinite(pos[lo:hi, i]).all(axis=1)
            if ok.sum() >= 3:
                out[f, i] = float(np.hypot(*_slope(t[ok], pos[lo:hi, i][ok])))
    return out


def motion_class(speed_a: float, speed_b: float, rule: Together) -> str:
    """ "walking", "standing" or "" (in between, or unknown) for a pair's two ground speeds (m/s)."""
    if not (np.isfinite(speed_a) and np.isfinite(speed_b)):
        return ""
    if min(speed_a, speed_b) >= rule.walking:
        return "walking"
    return "standing" if max(speed_a, speed_b) < rule.still else ""


def run_case(
    video: Path,
    detections: Path,
    model: Path,
    truth: dict[int, Any],
    together: np.ndarray,
    pos: np.ndarray,
    png_frame: int | None = None,
    operating_point: str = "default",
    tracker: TrackerConfig | None = None,
    box_shape: str = "auto",
    speeds: np.ndarray | None = None,
    rule: Together = Together(),
    gate_all: bool = False,
) -> tuple[dict[str, Any], np.ndarray | None]:
    """One pipeline pass at one of the model's operating points (``tracker``: the built-in tracker's options,
    None = its defaults); the metrics of the linked pairs and, optionally, the annotated ``png_frame``.
    ``gate_all``: stage 1's gate open for every pair (threshold 0, no confirmation), so stage 2 labels every
    pair the boxes deliver (:func:`perfect_stage1`)."""
    dets = read_detections(detections)
    source = FrameSource(video)
    labels: list[str] = []
    # frame, label, heights, metres, together, ground motion of a together pair ("walking" / "standing" / "")
    linked_rows: list[tuple[int, str, float, float, bool, str]] = []
    recalled: set[tuple[int, int, int]] = set()
    delivered: set[tuple[int, int, int]] = set()  # together pair-frames the pipeline had both people of
    keyed: dict[tuple[int, int, int], str] = {}  # (frame, truth id, truth id) -> label of a linked pair
    scored_together = 0
    picture = None
    gate = {"tau_interact": 0.0, "confirm_s": 0.0} if gate_all else {}
    config = PipelineConfig(
        operating_point=operating_point,
        tracker_config=tracker or TrackerConfig(),
        box_shape=box_shape,
        **gate,
    )
    with Deployment(model).load(config) as pipe:
        labels = list(pipe.labels)
        switched = None
        for index, image in source:
            result = pipe.step(image, dets.get(index), index / source.fps, frame_index=index)
            if any(n.startswith("operating point ->") for n in result.diagnostics.notes):
                switched = index  # operating_point="auto" chose a point from the camera height
            t = truth.get(index + 1)
            gid_of = _ids_to_truth(result, t, dets.with_ids)
            boxes = result.boxes.astype(np.float64)
            row_of = {int(k): n for n, k in enumerate(result.track_ids.tolist())}
            for (a, b), lab in zip(result.pairs.tolist(), result.label_ids.tolist(), strict=True):
                ga, gb = gid_of.get(a, -1), gid_of.get(b, -1)
                known = ga >= 0 and gb >= 0 and ga != gb and index < len(together)
                is_together = bool(known and together[index, ga, gb])
                scored_together += is_together
                key = (index, min(ga, gb), max(ga, gb))
                if is_together:
                    delivered.add(key)
                if lab < 0:
                    continue
                if is_together:
                    recalled.add(key)
                if known:
                    keyed[key] = labels[lab]
                ba, bb = boxes[row_of[a]], boxes[row_of[b]]
                heights = float(
                    np.hypot(*((ba[:2] + ba[2:] / 2) - (bb[:2] + bb[2:] / 2))) / ((ba[3] + bb[3]) / 2)
                )
                metres = float(np.hypot(*(pos[index, ga] - pos[index, gb]))) if known else float("nan")
                motion = ""
                if is_together and speeds is not None and index < len(speeds):
                    motion = motion_class(speeds[index, ga], speeds[index, gb], rule)
                linked_rows.append((index, labels[lab], heights, metres, is_together, motion))
            if png_frame is not None and index == png_frame and image is not None:
                picture = draw_links(
                    image, result, gid_of, together[index] if index < len(together) else None
                )
        point = {
            "operating_point": pipe.describe()["operating_point"],
            "tau_interact": pipe.tau_interact,
            "confirm_s": pipe.confirm_s,
            "switched_at_frame": switched,
        }
    truth_total = int(np.triu(together, 1).sum())
    metrics = {**point, **summarise(labels, linked_rows, len(recalled), truth_total, scored_together)}
    if speeds is not None:
        metrics["by_motion"] = motion_funnel(together, speeds, rule, delivered, recalled)
    if gate_all:
        metrics["delivered_labels"] = {k: keyed[k] for k in delivered if k in keyed}
    return {**metrics, KEYED: keyed}, picture


def together_keys_by_motion(
    together: np.ndarray, speeds: np.ndarray, rule: Together
) -> dict[str, list[tuple[int, int, int]]]:
    """The ground truth's together pair-frames ``(frame, i, j)``, i < j, grouped by their ground-plane motion
    (:func:`motion_class`: ``walking``, ``standing``, ``between`` for in between or unknown)."""
    out: dict[str, list[tuple[int, int, int]]] = {"walking": [], "standing": [], "between": []}
    for f, i, j in zip(*np.nonzero(np.triu(together, 1)), strict=True):
        out[motion_class(speeds[f, i], speeds[f, j], rule) or "between"].append((int(f), int(i), int(j)))
    return out


def motion_funnel(
    together: np.ndarray,
    speeds: np.ndarray,
    rule: Together,
    delivered: set[tuple[int, int, int]],
    linked: set[tuple[int, int, int]],
) -> dict[str, Any]:
    """Per ground-plane motion class of the together pair-frames: how many there are, how many the pipeline
    had both people of (a pair it could classify: boxes matched to the two people), how many it linked."""
    return {
        c: {
            "together": len(keys),
            "delivered": sum(k in delivered for k in keys),
            "linked": sum(k in linked for k in keys),
        }
        for c, keys in together_keys_by_motion(together, speeds, rule).items()
    }


def delivery_bound(funnel: dict[str, Any]) -> float | None:
    """The walking share among the judged (walking or standing) together pair-frames that a PERFECT classifier
    would give on this box source: it links every together pair-frame delivered to it, with its true label.
    The difference between two sources' values is the share gap their boxes alone cause."""
    w, s = funnel["walking"]["delivered"], funnel["standing"]["delivered"]
    return w / (w + s) if w + s else None


def perfect_stage1(
    gt_labels: dict[tuple[int, int, int], str],
    det_labels: dict[tuple[int, int, int], str],
    judged: set[tuple[int, int, int]] | None = None,
    walking: str = "walking_together",
) -> dict[str, Any]:
    """What a PERFECT stage 1 would give with the model's own stage 2: each source links exactly the together
    pair-frames its boxes delivered, labelled as stage 2 labels them there (``run_case(gate_all=True)``'s
    ``delivered_labels``: (frame, truth id, truth id) -> label). Walking shares per source and their gap: what
    is left of the share gap once stage 1 makes no error; with ``judged`` (the walking or standing together
    pair-frames), the same on those only, comparable with :func:`delivery_bound`."""

    def share(d: dict[tuple[int, int, int], str]) -> float | None:
        return sum(v == walking for v in d.values()) / len(d) if d else None

    subsets: dict[str, set[tuple[int, int, int]] | None] = {"all": None}
    if judged is not None:
        subsets["judged"] = judged
    out: dict[str, Any] = {}
    for name, keep in subsets.items():
        runs = [
            d if keep is None else {k: v for k, v in d.items() if k in keep} for d in (gt_labels, det_labels)
        ]
        a, b = share(runs[0]), share(runs[1])
        out[name] = {
            "pair_frames": [len(r) for r in runs],
            "walking_share": [a, b],
            "gap": abs(a - b) if a is not None and b is not None else None,
        }
    return out


#: run_case's key for the labels of its linked pairs by ground-truth ids (not written to the results).
KEYED = "_labels_by_truth_pair"


def label_stability(
    first: dict[tuple[int, int, int], str], second: dict[tuple[int, int, int], str], labels: list[str]
) -> dict[str, Any]:
    """Labels of two runs (two box sources) on the pair-frames BOTH linked, keyed by ground-truth ids: each
    run's label shares there and the share of those pair-frames given the same label. Separates labelling
    from linking: the runs' overall shares also differ when one links pairs the other misses."""
    common = sorted(set(first) & set(second))
    a = np.array([first[k] for k in common]) if common else np.zeros(0, str)
    b = np.array([second[k] for k in common]) if common else np.zeros(0, str)
    share = {
        lab: [float((a == lab).mean()) if common else None, float((b == lab).mean()) if common else None]
        for lab in labels
    }
    return {
        "common_pair_frames": len(common),
        "shares": share,
        "same_label": float((a == b).mean()) if common else None,
        "max_share_gap": max(
            (abs(x - y) for x, y in share.values() if x is not None and y is not None), default=None
        ),
    }


def detector_coverage(
    detections: Path,
    truth: dict[int, Any],
    together: np.ndarray,
    lags: tuple[int, ...] = (0, 3, 8),
    speeds: np.ndarray | None = None,
    rule: Together = Together(),
) -> dict[str, Any]:
    """The detector's ceiling on recall, before any tracker: for each lag K, the share of the together
    pair-frames (f, i, j) whose two people a raw detection matched (IoU >= 0.5, Hungarian) in frame f or in
    one of the K frames before it (what a perfect K-frame coasting could keep). Keys ``"K=<k>"``; with
    ``speeds``, also ``"by_motion"``: ``{class: {"K=<k>": share}}`` per ground-plane motion class."""
    dets = read_detections(detections)
    f_count, t_count = together.shape[:2]
    found = np.zeros((f_count, t_count), bool)
    for f in range(f_count):
        d, t = dets.get(f), truth.get(f + 1)
        if d is None or t is None or not len(d) or not len(t):
            continue
        gids = match_to_truth(d.boxes, t.boxes, t.track_ids)
        gids = gids[(gids >= 0) & (gids < t_count)]
        found[f, gids] = True
    fi, ii, jj = np.nonzero(np.triu(together, 1))
    out: dict[str, Any] = {}
    by_motion: dict[str, dict[str, float | None]] = {}
    classes = together_keys_by_motion(together, speeds, rule) if speeds is not None else {}
    cum = np.vstack(
        [np.zeros((1, t_count), np.int64), np.cumsum(found, 0)]
    )  # found in frames < f, per person
    for k in lags:
        # kept[f, i]: found in f - k .. f (a running window over the frames)
        lo = np.maximum(np.arange(f_count) - k, 0)
        kept = (cum[np.arange(f_count) + 1] - cum[lo]) > 0
        out[f"K={k}"] = float((kept[fi, ii] & kept[fi, jj]).mean()) if len(fi) else 0.0
        for c, keys in classes.items():
            share = float(np.mean([kept[f, i] & kept[f, j] for f, i, j in keys])) if keys else None
            by_motion.setdefault(c, {})[f"K={k}"] = share
    if speeds is not None:
        out["by_motion"] = by_motion
    return out


def _ids_to_truth(result: Any, truth_dets: Any, with_ids: bool) -> dict[int, int]:
    """Pipeline track id -> ground-truth id for this frame (identity for ground-truth tracks)."""
    ids = result.track_ids.tolist()
    if with_ids:
        return {int(i): int(i) for i in ids}
    if truth_dets is None:
        return {}
    gids = match_to_truth(result.boxes, truth_dets.boxes, truth_dets.track_ids)
    return dict(zip((int(i) for i in ids), gids.tolist(), strict=True))


def motion_agreement(rows: list[tuple[int, str, float, float, bool, str]]) -> dict[str, Any]:
    """Walking vs standing of the correctly linked pair-frames against their ground-plane motion."""
    judged = [(r[5], r[1]) for r in rows if r[4] and r[5]]
    expect = {"walking": "walking_together", "standing": "standing_together"}
    confusion: dict[str, dict[str, int]] = {}
    for motion, label in judged:
        confusion.setdefault(motion, {}).setdefault(label, 0)
        confusion[motion][label] += 1
    agree = sum(label == expect[motion] for motion, label in judged)
    return {
        "judged": len(judged),
        "agreement": agree / len(judged) if judged else None,
        "together_linked": sum(1 for r in rows if r[4]),
        "confusion": confusion,
    }


def summarise(
    labels: list[str],
    rows: list[tuple[int, str, float, float, bool, str]],
    recalled: int,
    truth_total: int,
    scored_together: int,
) -> dict[str, Any]:
    """Label shares, distances per label, precision / recall / F1 of the linked pair-frames."""
    n = len(rows)
    lab = np.array([r[1] for r in rows]) if n else np.zeros(0, str)
    heights = np.array([r[2] for r in rows], np.float64)
    metres = np.array([r[3] for r in rows], np.float64)
    ok = np.array([r[4] for r in rows], bool)
    per_label = {}
    for name in labels:
        sel = lab == name
        per_label[name] = {
            "pair_frames": int(sel.sum()),
            "share": float(sel.mean()) if n else 0.0,
            "median_body_heights": _median(heights[sel]),
            "median_metres": _median(metres[sel]),
            "together_fraction": float(ok[sel].mean()) if sel.any() else None,
        }
    precision = float(ok.mean()) if n else 0.0
    recall = recalled / truth_total if truth_total else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "linked_pair_frames": n,
        "labels": per_label,
        "median_body_heights": _median(heights),
        "median_metres": _median(metres),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "together_pair_frames": truth_total,
        "together_pair_frames_scored": scored_together,
        # the together pair-frames whose two people were both detected and matched: recall cannot exceed it
        "detected_share": scored_together / truth_total if truth_total else 0.0,
        "recall_of_detected": recalled / scored_together if scored_together else 0.0,
        "linked_unmatched": int(np.isnan(metres).sum()),
        "motion": motion_agreement(rows),
    }


def _median(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(np.median(x)) if len(x) else None


def draw_links(
    image: np.ndarray, result: Any, gid_of: dict[int, int], together: np.ndarray | None
) -> np.ndarray:
    """The frame with boxes, linked pairs (solid, coloured by label, with the label) and ground-truth together
    pairs the model missed (dashed grey)."""
    out = image.copy()
    colours = [(60, 200, 60), (40, 160, 255), (255, 80, 200), (200, 200, 0), (0, 0, 255)]
    centre = {
        int(i): (b[:2] + b[2:] / 2).astype(int) for i, b in zip(result.track_ids, result.boxes, strict=True)
    }
    for i, b in zip(result.track_ids, result.boxes.astype(int), strict=True):
        cv2.rectangle(out, (b[0], b[1]), (b[0] + b[2], b[1] + b[3]), (230, 230, 230), 1)
        cv2.putText(out, str(int(i)), (b[0], b[1] - 3), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (230, 230, 230), 1)
    linked = set()
    for (a, b), lab in zip(result.pairs.tolist(), result.label_ids.tolist(), strict=True):
        if lab < 0:
            continue
        linked.add((a, b))
        c = colours[lab % len(colours)]
        cv2.line(out, tuple(centre[a]), tuple(centre[b]), c, 2)
        mid = (centre[a] + centre[b]) // 2
        cv2.putText(out, result.labels[lab], tuple(mid), cv2.FONT_HERSHEY_SIMPLEX, 0.45, c, 1)
    if together is not None:
        for a, b in result.pairs.tolist():
            ga, gb = gid_of.get(a, -1), gid_of.get(b, -1)
            if (a, b) not in linked and ga >= 0 and gb >= 0 and together[ga, gb]:
                p, q = centre[a].astype(float), centre[b].astype(float)
                for s in np.linspace(0, 1, 12)[::2]:
                    cv2.line(
                        out,
                        tuple((p + (q - p) * s).astype(int)),
                        tuple((p + (q - p) * (s + 1 / 11)).astype(int)),
                        (160, 160, 160),
                        1,
                    )
    return out


def markdown(res: dict[str, Any]) -> str:
    rule = res["together_rule"]
    lines = [
        "# The bundled model on real video: PETS 2009 S2.L1, judged on the ground plane",
        "",
        f"`python benchmarks/bench_real_video.py` — model `{res['model']}` ({res['model_spec']}), video "
        f"{res['frames']} frames; nothing is fitted on PETS. Together (ground truth from `gt.txt` metres): "
        f"window +-{rule['window']} frames, median distance <= {rule['near']} m and max <= "
        f"{rule['near_max']} m, and both slower than {rule['still']} m/s or velocity difference <= "
        f"{rule['vel_diff']} m/s with cosine >= {rule['min_cos']}. {res['together_pair_frames_gt']} together "
        f"pair-frames in the ground truth. Built-in tracker (raw detections): {res['tracker']}; box shape: "
        f"`{res['box_shape']}`.",
        "",
        "Operating points (all chosen on simulator validation data, none on PETS): `auto` (what `pairedge "
        "run` does) starts on the model's main point and switches to `surveillance` once the camera height "
        "estimated from the boxes reaches 1.3 body heights; rows marked `default` / `surveillance` force "
        "one point from the first frame.",
        "",
        f"Targets: precision >= {TARGETS['precision']}, recall >= {TARGETS['recall']}, `sitting_together` <= "
        f"{100 * TARGETS['sitting_share']:g} % of the linked pair-frames.",
        "",
        "| run | operating point (threshold, confirm) | linked pair-frames | precision (linked that are "
        "together) "
        "| recall (together that are linked) | recall of the together pairs both detected (their share: the "
        "most any model can reach) | F1 | sitting_together | median distance body heights / m "
        "| linked with an unmatched person | targets |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for name, r in res["runs"].items():
        m = r["median_metres"]
        sitting = sitting_share(r)
        lines.append(
            f"| {name} | {r['operating_point']} ({r['tau_interact']:.2f}, {r['confirm_s']:g} s"
            f"{'' if r.get('switched_at_frame') is None else ' from frame ' + str(r['switched_at_frame'])}) "
            "| "
            f"{r['linked_pair_frames']} | {r['precision']:.3f} | {r['recall']:.3f} | "
            f"{r['recall_of_detected']:.3f} ({r['detected_share']:.3f}) | {r['f1']:.3f} | "
            f"{100 * sitting:.1f} % | {_f(r['median_body_heights'])} / {_f(m)} | {r['linked_unmatched']} | "
            f"{'met' if meets_targets(r) else 'not met'} |"
        )
    if "detector_coverage" in res:
        cov = res["detector_coverage"]
        lines += [
            "",
            "**The detector's ceiling** (raw detections, before any tracker): both people of a together "
            "pair-frame matched by an ACF detection (IoU >= 0.5) in that frame, or in it or the K frames "
            "before (a perfect K-frame coasting): "
            + ", ".join(f"{k} {v:.3f}" for k, v in cov.items() if k.startswith("K="))
            + ". A tracker that coasts K frames can only keep a box on a person the detector found "
            "within the last K frames, so recall on raw detections is at most the share at K = "
            "`coast_frames`, and reaches it only if every such pair-frame is linked, including during "
            "the confirmation of each new link (on the ground-truth tracks, where everyone is present, "
            "the pipeline links the ground-truth run's recall of them).",
        ]
    lines += [
        "",
        f"**Walking vs standing** of the correctly linked pair-frames against the ground plane (both "
        f"people at least {rule.get('walking', 0.5)} m/s: walking; both below {rule['still']} m/s: standing; "
        "in between: not judged):",
        "",
        "| run | judged / together linked | agreement | walking: labelled | standing: labelled |",
        "|---|---:|---:|---|---|",
    ]
    for name, r in res["runs"].items():
        mo = r.get("motion")
        if not mo:
            continue
        conf = mo["confusion"]
        lines.append(
            f"| {name} | {mo['judged']} / {mo['together_linked']} | {_f(mo['agreement'])} | "
            f"{conf.get('walking', {})} | {conf.get('standing', {})} |"
        )
    if res.get("label_stability"):
        lines += [
            "",
            "**Label stability across box sources**: the pair-frames linked in BOTH runs (same frame, "
            "same two ground-truth people), each run's label shares there and the share given the same "
            "label (the overall shares above also differ by what each run links):",
            "",
            "| operating point | common pair-frames | walking share gt / det | standing share gt / det "
            "| sitting share gt / det | largest gap | same label |",
            "|---|---:|---|---|---|---:|---:|",
        ]
        for op, st in res["label_stability"].items():
            sh = st["shares"]
            cells = " | ".join(
                f"{_f(sh.get(k, [None, None])[0])} / {_f(sh.get(k, [None, None])[1])}"
                for k in ("walking_together", "standing_together", "sitting_together")
            )
            lines.append(
                f"| {op} | {st['common_pair_frames']} | {cells} | {_f(st['max_share_gap'])} | "
                f"{_f(st['same_label'])} |"
            )
    lines += funnel_lines(res)
    for name, r in res["runs"].items():
        lines += [
            "",
            f"## {name}: predicted labels",
            "",
            "| label | pair-frames | share of linked | median body heights | median m | together |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for lab, v in r["labels"].items():
            lines.append(
                f"| {lab} | {v['pair_frames']} | {100 * v['share']:.1f} % | {_f(v['median_body_heights'])} | "
                f"{_f(v['median_metres'])} | {_f(v['together_fraction'])} |"
            )
    lines += ["", f"Environment: {res['environment']}"]
    return "\n".join(lines) + "\n"


def funnel_lines(res: dict[str, Any]) -> list[str]:
    """The markdown of the label-share comparison across box sources and of what each source delivers."""
    if not res.get("share_gap"):
        return []
    cov = res.get("detector_coverage", {}).get("by_motion", {})
    lines = [
        "",
        "**Label shares across box sources** (the issue's acceptance: within 10 points): the walking "
        "share of ALL linked pair-frames per run, and what the boxes alone allow: the walking share among "
        "the judged together pair-frames a perfect classifier would give, linking every together "
        "pair-frame whose two people the run's boxes delivered (matched, IoU >= 0.5) with its true label:",
        "",
        "| operating point | walking share gt / det | gap | perfect classifier on the delivered boxes "
        "gt / det | gap from the boxes alone |",
        "|---|---|---:|---|---:|",
    ]
    for op, g in res["share_gap"].items():
        lines.append(
            f"| {op} | {_f(g['walking_share'][0])} / {_f(g['walking_share'][1])} | "
            f"{_points(g['gap'])} | {_f(g['bound'][0])} / {_f(g['bound'][1])} | {_points(g['bound_gap'])} |"
        )
    if res.get("perfect_stage1"):
        lines += [
            "",
            "With a **perfect stage 1** and the model's own stage 2 (stage 1's gate open for every pair; "
            "each run scored on exactly the together pair-frames its boxes delivered, labelled by stage 2): "
            "the part of the gap no stage-1 threshold or model can remove:",
            "",
            "| together pair-frames | delivered gt / det | walking share gt / det | gap |",
            "|---|---|---|---:|",
        ]
        for name, ps in res["perfect_stage1"].items():
            lines.append(
                f"| {'all' if name == 'all' else 'judged (walking or standing)'} | {ps['pair_frames'][0]} / "
                f"{ps['pair_frames'][1]} | {_f(ps['walking_share'][0])} / {_f(ps['walking_share'][1])} | "
                f"{_points(ps['gap'])} |"
            )
    lines += [
        "",
        "**What each box source delivers, by ground-plane motion** (together pair-frames of the "
        "ground truth; detector: both people matched by a raw detection in the frame, K=0, or within the "
        "tracker's coasting, K=3; delivered: both people in the pipeline's output, matched; linked):",
        "",
        "| run | motion | together | detector K=0 / K=3 | delivered | linked |",
        "|---|---|---:|---|---:|---:|",
    ]
    for name, r in res["runs"].items():
        for c, v in r.get("by_motion", {}).items():
            det = cov.get(c, {}) if "ACF" in name else {}
            d = f"{_f(det.get('K=0'))} / {_f(det.get('K=3'))}" if det else "-"
            n = v["together"]
            lines.append(
                f"| {name} | {c} | {n} | {d} | {_f(v['delivered'] / n if n else None)} | "
                f"{_f(v['linked'] / n if n else None)} |"
            )
    return lines


def sitting_share(r: dict[str, Any]) -> float:
    """The share of ``sitting_together`` among one run's linked pair-frames."""
    return float(r["labels"].get("sitting_together", {}).get("share", 0.0))


def meets_targets(r: dict[str, Any]) -> bool:
    """The issue's acceptance on one run: precision, recall and the share of ``sitting_together``."""
    return (
        r["precision"] >= TARGETS["precision"]
        and r["recall"] >= TARGETS["recall"]
        and (sitting_share(r) <= TARGETS["sitting_share"])
    )


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _points(v: float | None) -> str:
    """A share difference in percentage points, or ``-``."""
    return "-" if v is None else f"{100 * v:.1f}"


def run_name(source: str, op: str) -> str:
    """The results' name of one run: the box source, with the operating point unless it is ``auto``."""
    return source if op == "auto" else f"{source}, {op}"


def share_gap(gt: dict[str, Any], det: dict[str, Any]) -> dict[str, Any]:
    """The walking shares of all linked pair-frames of two runs and their gap, beside the gap the two box
    sources alone cause (:func:`delivery_bound`)."""
    shares = [r["labels"].get("walking_together", {}).get("share", 0.0) for r in (gt, det)]
    bound = [delivery_bound(r["by_motion"]) if "by_motion" in r else None for r in (gt, det)]
    b_gt, b_det = bound
    return {
        "walking_share": shares,
        "gap": abs(shares[0] - shares[1]),
        "bound": bound,
        "bound_gap": abs(b_gt - b_det) if b_gt is not None and b_det is not None else None,
    }


def main(argv: list[str] | None = None) -> int:
    """The benchmark; a bad data folder, detections file or model is one ``error:`` line (exit 1)."""
    try:
        return _main(argv)
    except PairedgeError as exc:
        raise SystemExit(f"error: {exc}") from None


def _main(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", type=Path, nargs="?", default=DEFAULT_DATA, help="the pets09_s2l1 folder")
    ap.add_argument("--model", type=Path, default=default_model_dir())
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--png", type=Path, default=None, help=f"write a frame with the pair links (e.g. {PNG})")
    ap.add_argument("--png-frame", type=int, default=400)
    ap.add_argument("--runs", default="gt,det", help="gt, det or both")
    ap.add_argument(
        "--operating-points",
        default="auto,default,surveillance",
        help="operating points to run: auto (what pairedge run does), default (the model's main "
        "one) and the model's named ones (those it lacks are skipped)",
    )
    ap.add_argument(
        "--nms-iou",
        type=float,
        default=TrackerConfig().nms_iou,
        help="the built-in tracker's duplicate suppression (raw detections)",
    )
    ap.add_argument("--coast-frames", type=int, default=TrackerConfig().coast_frames)
    ap.add_argument("--box-shape", choices=("auto", "off", "ignore"), default="auto")
    for field, default in Together().__dict__.items():
        ap.add_argument(f"--{field.replace('_', '-')}", type=type(default), default=default)
    args = ap.parse_args(argv)
    runs = [k.strip() for k in args.runs.split(",") if k.strip()]
    if not runs or set(runs) - {"gt", "det"}:
        ap.error(f"--runs {args.runs!r}: expected gt, det or both, comma-separated")
    cv2.setNumThreads(1)
    if not (args.data / "vtest.avi").is_file():
        raise SystemExit(f"error: PETS S2.L1 not found at {args.data}; pass the pets09_s2l1 folder")
    rule = Together(**{k: getattr(args, k) for k in Together().__dict__})
    tracker = TrackerConfig(nms_iou=args.nms_iou, coast_frames=args.coast_frames)
    video, mot = args.data / "vtest.avi", args.data / "mot15"
    pos, _ = ground_positions(mot / "gt" / "gt.txt")
    fps = FrameSource(video).fps or 10.0
    together = together_matrix(pos, fps, rule)
    speeds = ground_speeds(pos, fps, rule.window)
    truth = read_mot(mot / "gt" / "gt.txt").by_frame()
    from pairedge.runtime.loading import find_models

    models = find_models(args.model)
    res: dict[str, Any] = {
        "model": str(args.model),
        "model_spec": f"{models.spec.name} v{models.spec.version}",
        "frames": FrameSource(video).frame_count,
        "together_rule": rule.__dict__,
        "together_pair_frames_gt": int(np.triu(together, 1).sum()),
        "runs": {},
        "tracker": {"nms_iou": tracker.nms_iou, "coast_frames": tracker.coast_frames},
        "box_shape": args.box_shape,
        "environment": f"{platform.machine()}, Python {sys.version.split()[0]}, numpy {np.__version__}, "
        f"OpenCV {cv2.__version__}",
    }
    cases = {
        "gt": ("ground-truth tracks (gt.txt)", mot / "gt" / "gt.txt"),
        "det": ("raw ACF detections (det.txt) + built-in tracker", mot / "det" / "det.txt"),
    }
    if "det" in runs:
        res["detector_coverage"] = detector_coverage(
            mot / "det" / "det.txt", truth, together, speeds=speeds, rule=rule
        )
        print("detector coverage of the together pair-frames:", res["detector_coverage"])
    points = []
    for op in (o.strip() for o in args.operating_points.split(",") if o.strip()):
        try:
            if op not in ("auto", "default"):
                models.operating_point(op)
            points.append(op)
        except ModelError:
            print(f"skipping operating point {op!r}: the model has none by that name")
    res["label_stability"] = {}
    for op in points:
        keyed: dict[str, dict[tuple[int, int, int], str]] = {}
        for key in runs:
            name, path = cases[key]
            want_png = args.png is not None and key == "gt" and op == points[0]
            metrics, picture = run_case(
                video,
                path,
                args.model,
                truth,
                together,
                pos,
                args.png_frame if want_png else None,
                op,
                tracker,
                args.box_shape,
                speeds,
                rule,
            )
            keyed[key] = metrics.pop(KEYED)
            res["runs"][run_name(name, op)] = metrics
            print(
                f"{name} [{op}]: precision {metrics['precision']:.3f} recall {metrics['recall']:.3f} "
                f"labels { ({k: v['pair_frames'] for k, v in metrics['labels'].items()}) } "
                f"walking/standing agreement {_f(metrics['motion']['agreement'])}"
            )
            if picture is not None:
                args.png.parent.mkdir(parents=True, exist_ok=True)
                cv2.imwrite(str(args.png), picture)
        if {"gt", "det"} <= set(keyed):
            res["label_stability"][op] = label_stability(keyed["gt"], keyed["det"], list(models.labels))
            res.setdefault("share_gap", {})[op] = share_gap(
                *(res["runs"][run_name(cases[k][0], op)] for k in ("gt", "det"))
            )
    if {"gt", "det"} <= set(runs):
        delivered = {}
        for key in ("gt", "det"):
            metrics, _ = run_case(
                video,
                cases[key][1],
                args.model,
                truth,
                together,
                pos,
                None,
                "default",
                tracker,
                args.box_shape,
                speeds,
                rule,
                gate_all=True,
            )
            delivered[key] = metrics["delivered_labels"]
        by_motion = together_keys_by_motion(together, speeds, rule)
        judged = set(by_motion["walking"]) | set(by_motion["standing"])
        res["perfect_stage1"] = perfect_stage1(delivered["gt"], delivered["det"], judged)
        print(
            "perfect stage 1 (the model's stage 2 on every delivered together pair-frame):",
            res["perfect_stage1"],
        )
    text = markdown(res)
    write("bench_real_video", res, text, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
