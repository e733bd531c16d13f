"""Flatten JRDB-PAR frames into whole-dataset arrays and align predictions with the ground truth.

Everything after flattening is vectorised over all frames: persons are addressed by (frame index, id)
keys, group membership by per-person group indices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pairedge.core.errors import FormatError
from pairedge.core.io.par import N_ACTIONS, N_GLOBAL, N_SOCIAL, ParFrame


@dataclass(frozen=True)
class ParThresholds:
    """Raw-logit thresholds (a label is on when ``score > threshold``); the released values by default."""

    actions: float = 0.6
    social: float = 0.6
    global_activity: float = 0.5


@dataclass(frozen=True)
class FlatFrames:
    """Frames concatenated. N persons, G groups (all sizes), M group memberships, F frames."""

    person_frame: np.ndarray  # (N,) int64 frame index
    person_ids: np.ndarray  # (N,) int64
    actions: np.ndarray  # (N, 27) bool
    global_labels: np.ndarray  # (F, 7) bool
    group_size: np.ndarray  # (G,) int64
    group_labels: np.ndarray  # (G, 32) bool
    group_has_social: np.ndarray  # (G,) bool: its frame carries per-person social labels
    member_frame: np.ndarray  # (M,) int64
    member_ids: np.ndarray  # (M,) int64
    member_group: np.ndarray  # (M,) int64
    social: np.ndarray  # (N, 32) bool per-person social labels (zeros where absent)


def _labels(arrays: list[np.ndarray], width: int, threshold: float) -> np.ndarray:
    """Concatenate bool label rows and float logit rows (thresholded ``> threshold``) -> (R, width) bool."""
    if not arrays:
        return np.zeros((0, width), dtype=bool)
    kinds = {a.dtype == bool for a in arrays}
    if kinds == {True}:
        return np.concatenate(arrays)
    if kinds == {False}:
        return np.concatenate(arrays) > threshold
    return np.concatenate([a if a.dtype == bool else a > threshold for a in arrays])


def flatten(frames: Sequence[ParFrame], th: ParThresholds) -> FlatFrames:
    """Concatenate ``frames`` (labels kept, logits thresholded)."""
    n_frames = len(frames)
    counts = np.array([len(f.person_ids) for f in frames], dtype=np.int64)
    groups = [m for f in frames for m in f.groups]
    per_frame_groups = np.array([len(f.groups) for f in frames], dtype=np.int64)
    group_size = np.array([len(m) for m in groups], dtype=np.int64)
    group_frame = np.repeat(np.arange(n_frames), per_frame_groups)
    social = [
        f.person_social if f.person_social is not None else np.zeros((len(f.person_ids), N_SOCIAL), bool)
        for f in frames
    ]
    has_social = np.array([f.person_social is not None for f in frames], dtype=bool)
    return FlatFrames(
        person_frame=np.repeat(np.arange(n_frames), counts),
        person_ids=np.concatenate([f.person_ids for f in frames]) if frames else np.zeros(0, np.int64),
        actions=_labels([f.actions for f in frames], N_ACTIONS, th.actions),
        global_labels=_labels([f.global_activity[None] for f in frames], N_GLOBAL, th.global_activity),
        group_size=group_size,
        group_labels=_labels([f.group_activity for f in frames], N_SOCIAL, th.social),
        group_has_social=has_social[group_frame] if len(group_frame) else np.zeros(0, bool),
        member_frame=np.repeat(group_frame, group_size),
        member_ids=np.concatenate(groups) if groups else np.zeros(0, np.int64),
        member_group=np.repeat(np.arange(len(groups)), group_size),
        social=np.concatenate(social) if social else np.zeros((0, N_SOCIAL), bool),
    )


class PersonIndex:
    """(frame index, person id) -> row of the ground-truth person arrays."""

    def __init__(self, person_frame: np.ndarray, person_ids: np.ndarray) -> None:
        self._uniq = np.unique(person_ids)
        self._keys, _ = self._encode(person_frame, person_ids)
        self._order = np.argsort(self._keys, kind="stable")
        self._sorted = self._keys[self._order]

    def _encode(self, frame: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if len(self._uniq) == 0:
            return np.zeros(len(ids), np.int64), np.zeros(len(ids), bool)
        code = np.minimum(np.searchsorted(self._uniq, ids), len(self._uniq) - 1)
        return frame * len(self._uniq) + code, self._uniq[code] == ids

    def rows(self, frame: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(K,) rows and (K,) bool found (row is meaningless where not found)."""
        keys, found = self._encode(frame, ids)
        if len(self._sorted) == 0:
            return np.zeros(len(ids), np.int64), np.zeros(len(ids), bool)
        pos = np.minimum(np.searchsorted(self._sorted, keys), len(self._sorted) - 1)
        return self._order[pos], found & (self._sorted[pos] == keys)


def order_predictions(
    pred: Sequence[ParFrame], gold: Sequence[ParFrame], pred_label: str, gold_label: str
) -> list[ParFrame]:
    """Predicted frames in ground-truth order (by frame number); raises FormatError on any mismatch."""
    by_frame = {f.frame: f for f in pred}
    if len(by_frame) != len(pred):
        raise FormatError(pred_label, "duplicate frame numbers")
    if len({f.frame for f in gold}) != len(gold):
        raise FormatError(gold_label, "duplicate frame numbers")
    gold_frames = {f.frame for f in gold}
    extra = sorted(set(by_frame) - gold_frames)
    if extra:
        raise FormatError(pred_label, f"frame {extra[0]} is not in the ground truth", f"frame {extra[0]}")
    missing = [g.frame for g in gold if g.frame not in by_frame]
    if missing:
        raise FormatError(pred_label, "no prediction for this ground-truth frame", f"frame {missing[0]}")
    scored = [g.frame for g in gold if _has_scores(g)]
    if scored:
        raise FormatError(gold_label, "ground truth must hold label ids, not *_scores", f"frame {scored[0]}")
    return [by_frame[g.frame] for g in gold]


def _has_scores(frame: ParFrame) -> bool:
    return bool(
        frame.actions.dtype != bool
        or frame.group_activity.dtype != bool
        or frame.global_activity.dtype != bool
    )


def check_persons(
    index: PersonIndex, gold: FlatFrames, pred: FlatFrames, frames: Sequence[ParFrame], pred_label: str
) -> np.ndarray:
    """Rows of the predicted persons in the ground truth; FormatError when a frame's id sets differ."""
    rows, found = index.rows(pred.person_frame, pred.person_ids)
    n_frames = len(frames)
    bad = np.bincount(pred.person_frame[~found], minlength=n_frames) > 0
    bad |= np.bincount(pred.person_frame, minlength=n_frames) != np.bincount(
        gold.person_frame, minlength=n_frames
    )
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        g_ids = gold.person_ids[gold.person_frame == k]
        p_ids = pred.person_ids[pred.person_frame == k]
        raise FormatError(
            pred_label,
            f"person ids differ from the ground truth (missing {np.setdiff1d(g_ids, p_ids)[:3].tolist()}, "
            f"not in ground truth {np.setdiff1d(p_ids, g_ids)[:3].tolist()}); predict every ground-truth "
            "person, and only those",
            f"frame {frames[k].frame}",
        )
    return rows


def group_index(
    index: PersonIndex, flat: FlatFrames, n_persons: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Groups with >= 2 members.

    Returns:
        (N,) int64 per ground-truth person row: its group's index among the kept groups, or -1;
        (K,) kept group sizes; (K,) int64 original group indices of the kept groups.
    """
    keep = flat.group_size >= 2
    new_index = np.cumsum(keep) - 1
    rows, _ = index.rows(flat.member_frame, flat.member_ids)  # members are persons (validated)
    per_person = np.full(n_persons, -1, dtype=np.int64)
    kept_member = keep[flat.member_group]
    per_person[rows[kept_member]] = new_index[flat.member_group[kept_member]]
    return per_person, flat.group_size[keep], np.flatnonzero(keep)


def true_group_labels(index: PersonIndex, gold: FlatFrames) -> np.ndarray:
    """(G, 32) ground-truth group labels: where persons carry social labels, the lowest-index member's
    (the official ``social_activity_in[group[0]]``); elsewhere the group's own labels."""
    if not gold.group_has_social.any():
        return gold.group_labels
    rows, _ = index.rows(gold.member_frame, gold.member_ids)
    starts = np.cumsum(gold.group_size) - gold.group_size
    first = np.minimum.reduceat(rows, starts)  # rows follow file order within a frame
    return np.where(gold.group_has_social[:, None], gold.social[first], gold.group_labels)
