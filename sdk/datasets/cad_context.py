"""Collective Activity benchmark only: long-horizon and group-context pair features, and label-preserving
scene augmentations (mirror, time reversal). Not part of any feature spec; no model that ships uses them.

The ``pairedge`` spec sees a short track history and a handful of scene counts. Three CAD classes depend on
more than that: approaching / leaving (how the distance changed over *seconds*), and a queue
(``standing_in_a_row``: several people on a line, a pair anywhere along it). :func:`context_features`
computes, **causally** (from frame ``f`` and earlier frames only, as a stream would), for each labelled row
``(frame, A, B)`` of a sequence, the values :data:`CONTEXT_NAMES`; all are symmetric in A and B, so they are
appended to the pair block of the ``[a, b, pair]`` layout. Distances are in mean body heights (box-height
units), between the boxes' bottom centres (the ground contact point), so the values do not depend on the
image size.

* ``dist_change_{L}s`` (L in :data:`LAGS_S`): ``(d(f) - d(f - L)) / L`` in heights per second, 0 when either
  was absent L seconds ago; ``lag_{L}s_known`` the mask;
* ``comp_speed_mean``, ``comp_speed_min``, ``comp_cosine``: each person's displacement over
  :data:`MOTION_S` seconds with the frame's median displacement removed (hand-held cameras move everyone),
  per second: the mean / smaller speed of the two and the cosine of their directions (0 when either is
  still);
* ``group_size``, ``group_linearity``, ``axis_alignment``, ``between_fraction``, ``same_group``: the people
  chained to each other within :data:`CHAIN` heights form groups; for a pair in the same group, its size
  (/ 10), how line-like it is (``1 - l2 / l1`` of its bottom centres' scatter), ``|cos|`` of AB with the
  group's main axis, and the share of the other members lying between A and B along that axis (a queue:
  high linearity, aligned pairs, members between); 0 when A and B are in different groups.

Augmentations (:func:`mirror_sequence`, :func:`reverse_sequence`) change a :class:`CadSequence` so that its
labels stay true: a horizontal mirror (x -> W - x, orientation bins mirrored) keeps every class; a time
reversal swaps approaching and leaving and keeps the others. Benchmarks apply them to training folds only.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
from pairedge.datasets.arrays import FeatureData
from pairedge.errors import InputError
from pairedge.io.cad import ACTIONS, CadSequence
from pairedge.labels import CAD8

#: Look-back horizons (seconds) of the distance change.
LAGS_S: tuple[float, ...] = (1.0, 2.0, 4.0)
#: Horizon (seconds) of the camera-compensated displacement.
MOTION_S = 1.0
#: Two people within this many mean box heights (bottom centres) are chained into one group.
CHAIN = 1.6
#: Speed (heights per second) below which a displacement has no direction.
STILL = 0.1
EPS = 1e-6

CONTEXT_NAMES: tuple[str, ...] = (
    *(f"dist_change_{int(s)}s" for s in LAGS_S),
    *(f"lag_{int(s)}s_known" for s in LAGS_S),
    "comp_speed_mean",
    "comp_speed_min",
    "comp_cosine",
    "group_size",
    "group_linearity",
    "axis_alignment",
    "between_fraction",
    "same_group",
)
#: CAD 8-way orientation bin after a horizontal mirror; index = bin (0 = unknown stays 0).
MIRROR_BIN = np.array([0, 5, 4, 3, 2, 1, 8, 7, 6], np.int64)


def _feet(boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(..., 2) bottom centres and (...,) heights of ``x y w h`` boxes (..., 4)."""
    return np.stack([boxes[..., 0] + boxes[..., 2] / 2, boxes[..., 1] + boxes[..., 3]], -1), boxes[..., 3]


def _groups(points: np.ndarray, heights: np.ndarray) -> np.ndarray:
    """(n,) component id of each person: chained within ``CHAIN`` mean heights (union-find, n small)."""
    n = len(points)
    parent = np.arange(n)
    if n < 2:
        return parent
    d = np.linalg.norm(points[:, None] - points[None], axis=-1)
    near = d < CHAIN * (heights[:, None] + heights[None]) / 2

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = int(parent[i])
        return i

    for i, j in zip(*np.nonzero(np.triu(near, 1)), strict=True):
        ri, rj = root(int(i)), root(int(j))
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    return np.array([root(i) for i in range(n)])


def _group_values(points: np.ndarray, heights: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """(M, 5) group values of the pairs (ia, ib) (indices into the n present people); see module doc."""
    comp = _groups(points, heights)
    out = np.zeros((len(ia), 5))
    for c in np.unique(comp):
        members = np.flatnonzero(comp == c)
        rows = np.flatnonzero((comp[ia] == c) & (comp[ib] == c))
        if len(rows) == 0:
            continue
        p = points[members] / max(float(np.mean(heights[members])), EPS)
        centred = p - p.mean(0)
        evals, evecs = np.linalg.eigh(centred.T @ centred / len(p))
        axis = evecs[:, 1]
        linear = 1.0 - evals[0] / max(evals[1], EPS)
        proj = points @ axis
        pa, pb = proj[ia[rows]], proj[ib[rows]]
        ab = points[ib[rows]] - points[ia[rows]]
        align = np.abs(ab @ axis) / np.maximum(np.linalg.norm(ab, axis=1), EPS)
        lo, hi = np.minimum(pa, pb), np.maximum(pa, pb)
        mp = proj[members]
        between = ((mp[None] > lo[:, None]) & (mp[None] < hi[:, None])).sum(1)
        others = max(len(members) - 2, 1)
        out[rows] = np.stack(
            [np.full(len(rows), len(members) / 10.0), np.full(len(rows), linear), align, between / others,
             np.ones(len(rows))], 1
        )  # fmt: skip
    return out


def context_features(seq: CadSequence, frames: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Context values (M, len(CONTEXT_NAMES)) float32 of the rows ``(frames[i], pairs[i])`` of ``seq``.

    Args:
        seq: the sequence. frames: (M,) 1-based frame numbers. pairs: (M, 2) track ids (1-based person
            index), both present in their frame.

    Uses frame ``f`` and earlier frames only. Values are clamped to [-10, 10].
    """
    frames = np.asarray(frames, np.int64).reshape(-1)
    pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
    if len(frames) != len(pairs):
        raise InputError(f"context_features: {len(frames)} frames but {len(pairs)} pairs; expected one each")
    if len(frames) and (
        frames.min() < 1 or frames.max() > seq.num_frames or pairs.min() < 1 or pairs.max() > len(seq.people)
    ):
        raise InputError(
            f"context_features: frames must be in 1..{seq.num_frames} and track ids in 1..{len(seq.people)}"
        )
    out = np.zeros((len(frames), len(CONTEXT_NAMES)))
    feet, height = _feet(seq.boxes.astype(np.float64))  # (F, P, 2), (F, P); NaN where absent
    a, b = pairs[:, 0] - 1, pairs[:, 1] - 1
    r = frames - 1
    hm = np.maximum((height[r, a] + height[r, b]) / 2, EPS)
    d_now = np.linalg.norm(feet[r, a] - feet[r, b], axis=1) / hm
    nl = len(LAGS_S)
    for k, lag_s in enumerate(LAGS_S):
        lag = max(int(round(lag_s * seq.fps)), 1)
        rp = r - lag
        ok = rp >= 0
        rp = np.maximum(rp, 0)
        known = ok & seq.present[rp, a] & seq.present[rp, b]
        hp = np.maximum((height[rp, a] + height[rp, b]) / 2, EPS)
        d_then = np.linalg.norm(feet[rp, a] - feet[rp, b], axis=1) / hp
        out[:, k] = np.where(known, (d_now - d_then) / lag_s, 0.0)
        out[:, nl + k] = known
    # camera-compensated displacement over MOTION_S seconds, per frame
    lag = max(int(round(MOTION_S * seq.fps)), 1)
    comp = np.zeros((len(frames), 2, 2))
    for f in np.unique(frames):
        rows = np.flatnonzero(frames == f)
        fr, fp = f - 1, f - 1 - lag
        # groups among the people present now
        present = np.flatnonzero(seq.present[fr])
        index = np.full(len(seq.people), -1)
        index[present] = np.arange(len(present))
        out[rows, 2 * nl + 3 :] = _group_values(
            feet[fr, present], height[fr, present], index[a[rows]], index[b[rows]]
        )
        both = seq.present[fr] & seq.present[max(fp, 0)]
        if fp < 0 or not both.any():
            continue
        disp = (feet[fr] - feet[fp]) / np.maximum(height[fr], EPS)[:, None] / MOTION_S  # (P, 2)
        disp = disp - np.median(disp[both], axis=0)
        disp[~both] = 0.0
        comp[rows, 0], comp[rows, 1] = disp[a[rows]], disp[b[rows]]
    sa, sb = np.linalg.norm(comp[:, 0], axis=1), np.linalg.norm(comp[:, 1], axis=1)
    moving = (sa > STILL) & (sb > STILL)
    cos = (comp[:, 0] * comp[:, 1]).sum(1) / np.maximum(sa * sb, EPS)
    out[:, 2 * nl] = (sa + sb) / 2
    out[:, 2 * nl + 1] = np.minimum(sa, sb)
    out[:, 2 * nl + 2] = np.where(moving, cos, 0.0)
    out = np.nan_to_num(out, nan=0.0, posinf=10.0, neginf=-10.0)
    return np.clip(out, -10.0, 10.0).astype(np.float32)


def mirror_sequence(seq: CadSequence) -> CadSequence:
    """``seq`` mirrored left-right: every box ``x -> W - x - w``, orientation bins mirrored (right <-> left,
    front / back unchanged); labels unchanged (every CAD class is mirror-symmetric)."""
    width = seq.frame_size[0]
    boxes = seq.boxes.copy()
    boxes[..., 0] = width - boxes[..., 0] - boxes[..., 2]
    people = []
    for p in seq.people:
        pb = np.asarray(p.boxes).copy()
        pb[:, 0] = width - pb[:, 0] - pb[:, 2]
        raw = np.asarray(p.raw_boxes).copy()
        annotated = raw[:, 2] > 0
        raw[annotated, 0] = width - raw[annotated, 0] - raw[annotated, 2]
        pose = np.asarray(p.pose, np.int64).copy()
        ok = (pose >= 1) & (pose <= 8)
        pose[ok] = MIRROR_BIN[pose[ok]]
        people.append(dataclasses.replace(p, boxes=pb, raw_boxes=raw, pose=pose))
    return dataclasses.replace(seq, boxes=boxes, people=tuple(people))


def reverse_sequence(seq: CadSequence, turn_walkers: bool = False) -> CadSequence:
    """``seq`` played backwards: frame ``f -> F + 1 - f``; approaching and leaving swap, the other classes
    keep their label. Orientation is kept as annotated, so a reversed walker faces backwards (fine for
    box-only training); ``turn_walkers`` turns the orientation of every frame annotated *walking* by 180
    degrees (bin + 4), so reversed walkers face where they go while standing people (a queue, a face-to-face
    pair) keep theirs."""
    n = seq.num_frames
    labels = seq.labels[::-1].copy()
    approaching, leaving = CAD8.index("approaching"), CAD8.index("leaving")
    was_a, was_l = labels == approaching, labels == leaving
    labels[was_a], labels[was_l] = leaving, approaching
    people = []
    for p in seq.people:
        frames = n + 1 - np.asarray(p.frames, np.int64)
        order = np.argsort(frames, kind="stable")
        pose = np.asarray(p.pose, np.int64).copy()
        if turn_walkers:
            walking = (np.asarray(p.action) == ACTIONS.index("walking")) & (pose >= 1) & (pose <= 8)
            pose[walking] = (pose[walking] + 3) % 8 + 1  # 1..8 around the circle: + 180 degrees
        people.append(
            dataclasses.replace(
                p,
                frames=frames[order],
                boxes=np.asarray(p.boxes)[order],
                raw_boxes=np.asarray(p.raw_boxes)[order],
                pose=pose[order],
                action=np.asarray(p.action)[order],
            )
        )
    return dataclasses.replace(
        seq,
        boxes=seq.boxes[::-1].copy(),
        present=seq.present[::-1].copy(),
        labels=labels,
        collective=seq.collective[::-1].copy(),
        people=tuple(people),
    )


def with_context(
    sequences: list[CadSequence],
    *,
    stride: int = 5,
    feature_config: dict[str, object] | None = None,
    orientation: bool = True,
    spec_version: str | None = None,
) -> FeatureData:
    """Stage-2 CAD rows (as :func:`pairedge.datasets.cad.cad_features`) with :data:`CONTEXT_NAMES` appended
    to the pair block: ``[a (Fp), b (Fp), pair (Fq + len(CONTEXT_NAMES))]``, ``groups`` = ``"cadNN"``."""
    from pairedge.datasets.cad import extractor_config, sequence_pair_rows
    from pairedge.features import spec_layout

    if stride < 1:
        raise InputError(f"expected stride >= 1, got {stride}")
    config = extractor_config("pairedge", feature_config)
    spec = spec_layout("pairedge", spec_version)
    xs, ys, gs = [], [], []
    for seq in sequences:
        rows = sequence_pair_rows(seq, "pairedge", 2, stride, config, orientation=orientation,
                                  spec_version=spec.version)  # fmt: skip
        xs.append(np.concatenate([rows.X, context_features(seq, rows.frame, rows.pairs)], 1))
        ys.append(rows.y)
        gs.append(np.full(len(rows.y), f"cad{seq.sequence or 0:02d}"))
    if not sum(len(y) for y in ys):
        raise InputError("no labelled pairs in the given CAD sequences")
    return FeatureData.from_arrays(
        np.concatenate(xs),
        np.concatenate(ys),
        np.concatenate(gs),
        CAD8.classes,
        feature_spec="pairedge",
        feature_spec_version=f"{spec.version}+cad_context",
        feature_names=tuple(spec.stage2_names) + tuple(f"pair_{n}" for n in CONTEXT_NAMES),
        stage=2,
        label_set=CAD8.name,
        feature_config=json.dumps(config, sort_keys=True),
        person_features=spec.person_dim,
        pair_features=spec.pair_dim + len(CONTEXT_NAMES),
    )
