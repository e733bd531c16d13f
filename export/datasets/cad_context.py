"""Collective Activity: the offline reference of the ``pairedge`` spec v3 context columns, and
label-preserving scene augmentations (mirror, time reversal).

:func:`context_features` computes :data:`~pairedge.core.features.context.CONTEXT_NAMES` for given rows
``(frame, A, B)`` of a whole CAD sequence at once, vectorised over frames, **causally** (frame ``f`` and
earlier frames only). The streaming extractor (:class:`pairedge.core.features.context.ContextHistory`, spec
version 3) computes the same values frame by frame; the tests hold the two to each other. The definitions:

* ``dist_change_{L}s`` (L in :data:`LAGS_S`): ``(d(f) - d(f - L)) / L`` in heights per second, 0 when either
  was absent L seconds ago; ``lag_{L}s_known`` the mask;
* ``comp_speed_mean``, ``comp_speed_min``, ``comp_cosine``: each person's displacement over
  :data:`MOTION_S` seconds with the frame's median displacement removed (hand-held cameras move everyone),
  per second: the mean / smaller speed of the two and the cosine of their directions (0 when either is
  still);
* ``group_size``, ``group_linearity``, ``axis_alignment``, ``between_fraction``, ``same_group``: the people
  chained to each other within ``CHAIN`` heights form groups; for a pair in the same group, its size
  (/ 10), how line-like it is (``1 - l2 / l1`` of its bottom centres' scatter), ``|cos|`` of AB with the
  group's main axis, and the share of the other members lying between A and B along that axis (a queue:
  high linearity, aligned pairs, members between); 0 when A and B are in different groups.

Augmentations (:func:`mirror_sequence`, :func:`reverse_sequence`) change a :class:`CadSequence` so that its
labels stay true: a horizontal mirror (x -> W - x, orientation bins mirrored) keeps every class; a time
reversal swaps approaching and leaving and keeps the others. Benchmarks apply them to training folds only.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from pairedge.core.errors import InputError
from pairedge.core.features.context import CONTEXT_NAMES, EPS, LAGS_S, MOTION_S, STILL, feet, group_values
from pairedge.core.io.cad import ACTIONS, CadSequence
from pairedge.core.labels import CAD8

#: CAD 8-way orientation bin after a horizontal mirror; index = bin (0 = unknown stays 0).
MIRROR_BIN = np.array([0, 5, 4, 3, 2, 1, 8, 7, 6], np.int64)


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
    foot, height = feet(seq.boxes.astype(np.float64))  # (F, P, 2), (F, P); NaN where absent
    a, b = pairs[:, 0] - 1, pairs[:, 1] - 1
    r = frames - 1
    hm = np.maximum((height[r, a] + height[r, b]) / 2, EPS)
    d_now = np.linalg.norm(foot[r, a] - foot[r, b], axis=1) / hm
    nl = len(LAGS_S)
    for k, lag_s in enumerate(LAGS_S):
        lag = max(int(round(lag_s * seq.fps)), 1)
        rp = r - lag
        ok = rp >= 0
        rp = np.maximum(rp, 0)
        known = ok & seq.present[rp, a] & seq.present[rp, b]
        hp = np.maximum((height[rp, a] + height[rp, b]) / 2, EPS)
        d_then = np.linalg.norm(foot[rp, a] - foot[rp, b], axis=1) / hp
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
        out[rows, 2 * nl + 3 :] = group_values(
            foot[fr, present], height[fr, present], index[a[rows]], index[b[rows]]
        )
        both = seq.present[fr] & seq.present[max(fp, 0)]
        if fp < 0 or not both.any():
            continue
        disp = (foot[fr] - foot[fp]) / np.maximum(height[fr], EPS)[:, None] / MOTION_S  # (P, 2)
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


#: Label-preserving copies of a sequence, by name (``pairedge train --augment``, ``bench_cad``): ``mirror``,
#: ``reverse`` (time reversal; approaching <-> leaving), ``reverse_turned`` (time reversal with every person
#: annotated *walking* turned by 180 degrees, for data with body orientation).
AUGMENTATIONS = {
    "mirror": mirror_sequence,
    "reverse": reverse_sequence,
    "reverse_turned": functools.partial(reverse_sequence, turn_walkers=True),
}
