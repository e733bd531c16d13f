"""Stage-1 pair detection and the group metrics of the pairwise protocol, vectorised with integer keys.

- :func:`pair_detection` — P / R / F1 of the set of predicted interacting pairs ``(frame, id_a, id_b)``
  against the set of true interacting pairs.
- :func:`group_activity` — for every true group of at least 2 people, the majority vote of the predicted
  labels of the pairs inside it; accuracy of that vote against the group's true activity.
- :func:`group_detection` — group detection F1 by group size (1, 2, 3, 4, 5+): a predicted group matches a
  true group of the same frame when their member-set IoU is > 0.5. TP and FN are counted in the bucket of the
  **true** group's size, FP in the bucket of the **predicted** group's size.

Groups of one frame must be disjoint (a person in at most one group), which makes IoU > 0.5 matching
one-to-one without an assignment step: more than half of a predicted group lies in the true group it
matches, and only one disjoint true group can hold more than half of it (and vice versa).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pairedge.core.errors import InputError
from pairedge.measure.metrics.pairwise.keys import first_duplicate, lookup, row_keys

#: Group-size buckets of :func:`group_detection`; the last one holds every size >= 5.
SIZE_BUCKETS: tuple[str, ...] = ("1", "2", "3", "4", "5+")


@dataclass(frozen=True)
class DetectionScore:
    """TP / FP / FN counts and the derived precision, recall and F1 (NaN when undefined)."""

    tp: int
    fp: int
    fn: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else float("nan")

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else float("nan")

    @property
    def f1(self) -> float:
        den = 2 * self.tp + self.fp + self.fn
        return 2 * self.tp / den if den else float("nan")


@dataclass(frozen=True, eq=False)
class Groups:
    """The groups of several frames, as flat arrays.

    Attributes:
        frame: (G,) int64 frame of each group.
        activity: (G,) int64 class id of the group's activity, -1 when not given.
        member_group: (K,) int64 index into the groups for each membership row.
        member_id: (K,) int64 track id of each member.
    """

    frame: np.ndarray
    activity: np.ndarray
    member_group: np.ndarray
    member_id: np.ndarray

    @property
    def size(self) -> np.ndarray:
        """(G,) int64 number of members of each group."""
        return np.bincount(self.member_group, minlength=len(self.frame)).astype(np.int64)

    def validate(self) -> None:
        """Raise InputError unless every group has members and a person is in at most one group per frame."""
        g = len(self.frame)
        if len(self.activity) != g or len(self.member_group) != len(self.member_id):
            raise InputError("groups: frame/activity and member_group/member_id must have matching lengths")
        if len(self.member_group) and (self.member_group.min() < 0 or self.member_group.max() >= g):
            raise InputError(f"groups: member_group must index the {g} groups")
        empty = np.flatnonzero(self.size == 0)
        if len(empty):
            raise InputError(f"groups: group {int(empty[0])} has no members; expected at least one")
        dup = first_duplicate(row_keys(self.member_rows())[0])
        if dup is not None:
            i, j = dup
            raise InputError(
                f"groups: person {int(self.member_id[j])} appears twice in frame "
                f"{int(self.frame[self.member_group[j]])} (groups {int(self.member_group[i])} and "
                f"{int(self.member_group[j])}); a person belongs to at most one group per frame"
            )

    def member_rows(self) -> np.ndarray:
        """(K, 2) int64 rows ``(frame, track id)`` of the memberships."""
        return np.stack([self.frame[self.member_group], self.member_id], axis=1)

    @classmethod
    def empty(cls) -> Groups:
        z = np.zeros(0, np.int64)
        return cls(z, z, z, z)


@dataclass(frozen=True, eq=False)
class GroupActivityScore:
    """Group activity by majority vote over the predicted labels of the pairs inside each true group.

    Attributes:
        accuracy: correct / scored groups (NaN when no group was scored).
        n_scored: true groups of >= 2 people with an activity label.
        n_correct: scored groups whose vote winner equals their activity.
        n_no_votes: scored groups with no labelled predicted pair inside (counted wrong).
        mean_vote_share: mean over scored groups with votes of (winner votes / votes); NaN when none.
        winner: (G,) int64 voted class per true group (-1 when not scored or no votes).
        vote_share: (G,) float64 winner share per true group (NaN when not scored or no votes).
    """

    accuracy: float
    n_scored: int
    n_correct: int
    n_no_votes: int
    mean_vote_share: float
    winner: np.ndarray
    vote_share: np.ndarray


@dataclass(frozen=True, eq=False)
class GroupDetectionScore:
    """Group detection at member-set IoU > 0.5, overall and per size bucket (:data:`SIZE_BUCKETS`).

    Attributes:
        overall: counts over all sizes.
        by_size: one :class:`DetectionScore` per bucket (TP/FN by true size, FP by predicted size).
        n_true: (5,) int64 true groups per bucket; n_pred: (5,) int64 predicted groups per bucket.
    """

    overall: DetectionScore
    by_size: tuple[DetectionScore, ...]
    n_true: np.ndarray
    n_pred: np.ndarray


def pair_detection(pred_rows: np.ndarray, gold_rows: np.ndarray) -> DetectionScore:
    """Stage-1 P / R / F1 of predicted interacting pairs against true interacting pairs.

    Args:
        pred_rows: (M, 3) integer ``(frame, id_a, id_b)`` predicted interacting (already thresholded).
        gold_rows: (K, 3) integer true interacting pairs.

    Pairs are unordered: ``(f, 7, 3)`` is the same pair as ``(f, 3, 7)``. A pair of a person with itself, or
    the same pair twice in one table, is an InputError.
    """
    pk, gk = row_keys(_unordered(pred_rows, "predicted"), _unordered(gold_rows, "true"))
    for name, keys in (("predicted", pk), ("true", gk)):
        dup = first_duplicate(keys)
        if dup is not None:
            raise InputError(
                f"pair_detection: {name} pair rows {dup[0]} and {dup[1]} are the same pair; expected each "
                "once"
            )
    tp = len(np.intersect1d(pk, gk, assume_unique=True))
    return DetectionScore(tp=tp, fp=len(pk) - tp, fn=len(gk) - tp)


def _unordered(rows: np.ndarray, name: str) -> np.ndarray:
    """(M, 3) int64 copy with ``id_a < id_b`` in every row; rejects ``id_a == id_b``."""
    arr = np.asarray(rows)
    if arr.size and arr.dtype.kind not in "iu":
        raise InputError(
            f"pair_detection: {name} pairs must be integer (frame, id_a, id_b) rows, got {arr.dtype}"
        )
    out = arr.astype(np.int64).reshape(-1, 3)
    if out.size and (out[:, 1] == out[:, 2]).any():
        i = int(np.flatnonzero(out[:, 1] == out[:, 2])[0])
        raise InputError(f"pair_detection: {name} row {i} pairs person {out[i, 1]} with itself")
    out[:, 1:] = np.sort(out[:, 1:], axis=1)
    return out


def group_activity(
    gold: Groups,
    pair_rows: np.ndarray,
    pair_label: np.ndarray,
    num_classes: int,
    tie_weights: np.ndarray | None = None,
) -> GroupActivityScore:
    """Majority vote of predicted pair labels inside each true group, against the group's true activity.

    A predicted pair votes for a true group when both its people are members of that group in that frame
    and it has a label. Ties go to the class with the largest summed ``tie_weights`` over the voting pairs
    (then the lowest class id).

    Args:
        gold: true groups (validated; singletons and groups without activity are not scored).
        pair_rows: (M, 3) int64 predicted pairs ``(frame, id_a, id_b)``.
        pair_label: (M,) int64 predicted class id, -1 for none.
        num_classes: C.
        tie_weights: (M, C) float64 per-class weights for tie-breaking (e.g. class probabilities), or None
            for all ones (then ties go to the lowest class id).
    """
    gold.validate()
    c = num_classes
    n_groups = len(gold.frame)
    rows = np.asarray(pair_rows, np.int64).reshape(-1, 3)
    pair_label = np.asarray(pair_label, np.int64).reshape(-1)
    if len(pair_label) != len(rows) or (len(pair_label) and pair_label.max() >= c):
        raise InputError(
            f"group_activity: expected {len(rows)} pair labels in [-1, {c}), got {len(pair_label)}"
        )
    if tie_weights is not None and np.shape(tie_weights) != (len(rows), c):
        raise InputError(
            f"group_activity: tie_weights must be ({len(rows)}, {c}), got {np.shape(tie_weights)}"
        )
    mkeys, ka, kb = row_keys(gold.member_rows(), rows[:, [0, 1]], rows[:, [0, 2]])
    order = np.argsort(mkeys)
    ga = lookup(mkeys[order], gold.member_group[order], ka)
    gb = lookup(mkeys[order], gold.member_group[order], kb)
    inside = (ga >= 0) & (ga == gb) & (pair_label >= 0)
    g_in, lab_in = ga[inside], pair_label[inside]
    votes = np.bincount(g_in * c + lab_in, minlength=n_groups * c).reshape(n_groups, c)
    weight = np.zeros((n_groups, c))
    if tie_weights is not None and len(g_in):
        np.add.at(weight, g_in, np.nan_to_num(np.asarray(tie_weights, np.float64)[inside]))
    total = votes.sum(axis=1)
    tied = votes == votes.max(axis=1, keepdims=True)
    winner = np.argmax(np.where(tied, weight, -np.inf), axis=1).astype(np.int64)
    has_votes = total > 0
    winner[~has_votes] = -1
    scored = (gold.size >= 2) & (gold.activity >= 0)
    winner[~scored] = -1
    share = np.full(n_groups, np.nan)
    ok = scored & has_votes
    share[ok] = votes[ok, winner[ok]] / total[ok]
    n_scored = int(scored.sum())
    n_correct = int((scored & (winner == gold.activity)).sum())
    return GroupActivityScore(
        accuracy=n_correct / n_scored if n_scored else float("nan"),
        n_scored=n_scored,
        n_correct=n_correct,
        n_no_votes=int((scored & ~has_votes).sum()),
        mean_vote_share=float(share[ok].mean()) if ok.any() else float("nan"),
        winner=winner,
        vote_share=share,
    )


def group_detection(pred: Groups, gold: Groups) -> GroupDetectionScore:
    """Group detection by size at member-set IoU > 0.5 (groups of one frame must be disjoint; validated)."""
    pred.validate()
    gold.validate()
    psize, gsize = pred.size, gold.size
    pk, gk = row_keys(pred.member_rows(), gold.member_rows())
    _, ip, ig = np.intersect1d(pk, gk, assume_unique=True, return_indices=True)
    pg, gg = pred.member_group[ip], gold.member_group[ig]
    # intersection size of every (pred group, gold group) pair sharing at least one member
    combo, inter = np.unique(pg * max(len(gsize), 1) + gg, return_counts=True)
    cp, cg = combo // max(len(gsize), 1), combo % max(len(gsize), 1)
    iou = inter / (psize[cp] + gsize[cg] - inter)
    hit = iou > 0.5
    pred_hit = np.zeros(len(psize), bool)
    gold_hit = np.zeros(len(gsize), bool)
    pred_hit[cp[hit]] = True
    gold_hit[cg[hit]] = True
    gb = np.minimum(gsize, 5) - 1
    pb = np.minimum(psize, 5) - 1
    tp = np.bincount(gb[gold_hit], minlength=5)
    fn = np.bincount(gb[~gold_hit], minlength=5)
    fp = np.bincount(pb[~pred_hit], minlength=5)
    by_size = tuple(DetectionScore(int(tp[i]), int(fp[i]), int(fn[i])) for i in range(5))
    overall = DetectionScore(int(tp.sum()), int(fp.sum()), int(fn.sum()))
    return GroupDetectionScore(
        overall=overall,
        by_size=by_size,
        n_true=np.bincount(gb, minlength=5).astype(np.int64),
        n_pred=np.bincount(pb, minlength=5).astype(np.int64),
    )
