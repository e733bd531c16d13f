"""JRDB-PAR panoramic activity recognition protocol, scored as the official code (RuizeHan/PAR) does.

Individual F_i and global F_g are sample-averaged multi-label scores; social F_p sums pair scores over
predicted groups matched to true groups by the Half criterion and divides by the number of predicted
groups; F_a = (F_i + F_p + F_g) / 3. Group detection P/R/F1 come from TP/FP/FN summed over frames.
See ``docs/protocols.md`` for the official quirks and the ``corrected`` variant.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pairedge.errors import FormatError, InputError
from pairedge.io.par import ParFrame, read_par
from pairedge.metrics.par_core import half_matches, safe_div, sample_prf, social_sums
from pairedge.metrics.report import ScoreReport, Table

VARIANTS = ("official", "corrected")


@dataclass(frozen=True)
class ParThresholds:
    """Raw-logit thresholds (a label is on when ``score > threshold``); the released values by default."""

    actions: float = 0.6
    social: float = 0.6
    global_activity: float = 0.5


@dataclass(frozen=True)
class _Aligned:
    """Everything flattened: persons in ground-truth order, groups with >= 2 members."""

    pred_actions: np.ndarray  # (N, 27) bool
    true_actions: np.ndarray  # (N, 27) bool
    pred_global: np.ndarray  # (F, 7) bool
    true_global: np.ndarray  # (F, 7) bool
    gold_group: np.ndarray  # (N,) int64 group index or -1
    pred_group: np.ndarray  # (N,) int64
    gold_size: np.ndarray  # (G,)
    pred_size: np.ndarray  # (P,)
    true_social: np.ndarray  # (G, 32) bool
    pred_social: np.ndarray  # (P, 32) bool
    notes: list[str] = field(default_factory=list)


def _labels(arr: np.ndarray, threshold: float) -> np.ndarray:
    return arr if arr.dtype == bool else arr > threshold


def _group_truth(frame: ParFrame) -> np.ndarray:
    """(G, 32) true group labels: the lowest-index member's social labels when persons carry them."""
    if frame.person_social is None or not frame.groups:
        return frame.group_activity
    order = np.argsort(frame.person_ids, kind="stable")
    position = [order[np.searchsorted(frame.person_ids[order], m)].min() for m in frame.groups]
    return frame.person_social[np.array(position, dtype=np.int64)]


def _check_frames(
    pred: Sequence[ParFrame], gold: Sequence[ParFrame], pred_label: str, gold_label: str
) -> list[ParFrame]:
    """Predicted frames in ground-truth order; same frames, same person ids."""
    by_frame = {f.frame: f for f in pred}
    if len(by_frame) != len(pred):
        raise FormatError(pred_label, "duplicate frame numbers")
    gold_frames = {f.frame for f in gold}
    extra = sorted(set(by_frame) - gold_frames)
    if extra:
        raise FormatError(pred_label, f"frame {extra[0]} is not in the ground truth", f"frame {extra[0]}")
    out = []
    for g in gold:
        if g.actions.dtype != bool or g.group_activity.dtype != bool or g.global_activity.dtype != bool:
            raise FormatError(
                gold_label, "ground truth must hold label ids, not *_scores", f"frame {g.frame}"
            )
        p = by_frame.get(g.frame)
        if p is None:
            raise FormatError(pred_label, "no prediction for this ground-truth frame", f"frame {g.frame}")
        if len(p.person_ids) != len(g.person_ids) or not np.array_equal(
            np.sort(p.person_ids), np.sort(g.person_ids)
        ):
            missing = np.setdiff1d(g.person_ids, p.person_ids)[:3].tolist()
            unknown = np.setdiff1d(p.person_ids, g.person_ids)[:3].tolist()
            raise FormatError(
                pred_label,
                f"person ids differ from the ground truth (missing {missing}, not in ground truth {unknown}); "
                "predict every ground-truth person, and only those",
                f"frame {g.frame}",
            )
        out.append(p)
    return out


class _RowLookup:
    """Person id -> row in the flattened ground-truth person arrays, for one frame."""

    def __init__(self, person_ids: np.ndarray, base: int) -> None:
        self._order = np.argsort(person_ids, kind="stable")
        self._sorted = person_ids[self._order]
        self._base = base

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        return self._base + self._order[np.searchsorted(self._sorted, ids)]


def _align(pred: list[ParFrame], gold: Sequence[ParFrame], th: ParThresholds) -> _Aligned:
    counts = np.array([len(g.person_ids) for g in gold], dtype=np.int64)
    start = np.cumsum(counts) - counts
    n = int(counts.sum())
    pred_actions = np.zeros((n, 27), dtype=bool)
    gold_group = np.full(n, -1, dtype=np.int64)
    pred_group = np.full(n, -1, dtype=np.int64)
    gold_sizes: list[int] = []
    pred_sizes: list[int] = []
    true_social: list[np.ndarray] = []
    pred_social: list[np.ndarray] = []
    for k, (g, p) in enumerate(zip(gold, pred, strict=True)):
        rows = _RowLookup(g.person_ids, int(start[k]))
        pred_actions[rows(p.person_ids)] = _labels(p.actions, th.actions)
        truth = _group_truth(g)
        for members, label in zip(g.groups, truth, strict=True):
            if len(members) >= 2:
                gold_group[rows(members)] = len(gold_sizes)
                gold_sizes.append(len(members))
                true_social.append(label)
        labels = _labels(p.group_activity, th.social)
        for members, label in zip(p.groups, labels, strict=True):
            if len(members) >= 2:
                pred_group[rows(members)] = len(pred_sizes)
                pred_sizes.append(len(members))
                pred_social.append(label)
    return _Aligned(
        pred_actions=pred_actions,
        true_actions=np.concatenate([g.actions for g in gold]) if gold else np.zeros((0, 27), bool),
        pred_global=np.array([_labels(p.global_activity, th.global_activity) for p in pred]).reshape(-1, 7),
        true_global=np.array([g.global_activity for g in gold]).reshape(-1, 7),
        gold_group=gold_group,
        pred_group=pred_group,
        gold_size=np.array(gold_sizes, dtype=np.int64),
        pred_size=np.array(pred_sizes, dtype=np.int64),
        true_social=np.array(true_social, dtype=bool).reshape(-1, 32),
        pred_social=np.array(pred_social, dtype=bool).reshape(-1, 32),
    )


def _prf_or_nan(
    pred: np.ndarray, true: np.ndarray, what: str, notes: list[str]
) -> tuple[float, float, float]:
    if len(true) == 0:
        notes.append(f"no {what} sample: {what} P/R/F1 undefined (NaN)")
        return math.nan, math.nan, math.nan
    return sample_prf(pred, true)


def _social(a: _Aligned, g: np.ndarray, p: np.ndarray, variant: str, notes: list[str]) -> dict[str, float]:
    official = variant == "official"
    sums = social_sums(a.pred_social[p], a.true_social[g], empty_pair_f1=math.nan if official else 0.0)
    n_pred, n_gold = len(a.pred_size), len(a.gold_size)
    if sums.pairs_both_empty:
        notes.append(
            f"{sums.pairs_both_empty} matched group pairs have empty true and predicted label sets: "
            + (
                "the official pair F1 is 0/0 = NaN, so social F1 is NaN"
                if official
                else "pair F1 counted as 0"
            )
        )
    if official:
        if n_pred == 0:
            notes.append(
                "no predicted group (>= 2 members): the official code divides by zero; social P/R/F1 NaN"
            )
            return {"P_p": math.nan, "R_p": math.nan, "F_p": math.nan}
        return {"P_p": sums.precision / n_pred, "R_p": sums.recall / n_pred, "F_p": sums.f1 / n_pred}
    prec = sums.precision / n_pred if n_pred else math.nan
    rec = sums.recall / n_gold if n_gold else math.nan
    if n_pred == 0 or n_gold == 0:
        notes.append(
            f"corrected variant: {'no predicted' if n_pred == 0 else 'no true'} group, social score NaN"
        )
    f1 = math.nan if math.isnan(prec) or math.isnan(rec) else safe_div(2 * prec * rec, prec + rec)
    return {"P_p": prec, "R_p": rec, "F_p": f1}


def score_frames(
    pred: Sequence[ParFrame],
    gold: Sequence[ParFrame],
    *,
    thresholds: ParThresholds | None = None,
    variant: str = "official",
    pred_label: str = "<pred>",
    gold_label: str = "<gold>",
) -> ScoreReport:
    """Score predicted frames against ground-truth frames (matched by frame number, persons by id).

    Args:
        pred: predictions (labels or raw logits); every ground-truth frame and person must be present.
        gold: ground truth (labels only).
        thresholds: raw-logit thresholds for score rows (default 0.6 / 0.6 / 0.5).
        variant: ``"official"`` (default, comparable with published numbers) or ``"corrected"``.

    Returns:
        summary F_a, F_i/P_i/R_i, F_p/P_p/R_p, F_g/P_g/R_g, group_P/group_R/group_F1 (NaN where undefined,
        with a note).
    """
    if variant not in VARIANTS:
        raise InputError(f"unknown PAR variant {variant!r}; expected one of {list(VARIANTS)}")
    th = thresholds or ParThresholds()
    aligned = _align(_check_frames(pred, gold, pred_label, gold_label), gold, th)
    notes: list[str] = []
    p_i, r_i, f_i = _prf_or_nan(aligned.pred_actions, aligned.true_actions, "individual", notes)
    p_g, r_g, f_g = _prf_or_nan(aligned.pred_global, aligned.true_global, "global", notes)
    g, p = half_matches(aligned.gold_group, aligned.pred_group, aligned.gold_size, aligned.pred_size)
    tp, fp, fn = len(g), len(aligned.pred_size) - len(g), len(aligned.gold_size) - len(g)
    gp, gr = safe_div(tp, tp + fp), safe_div(tp, tp + fn)
    group_f1 = safe_div(2 * gp * gr, gp + gr)
    social = _social(aligned, g, p, variant, notes)
    f_a = (f_i + social["F_p"] + f_g) / 3
    summary = {
        "F_a": f_a, "F_i": f_i, "P_i": p_i, "R_i": r_i, **social,
        "F_g": f_g, "P_g": p_g, "R_g": r_g, "group_P": gp, "group_R": gr, "group_F1": group_f1,
    }  # fmt: skip
    rows = (
        ("individual", p_i, r_i, f_i),
        ("social", social["P_p"], social["R_p"], social["F_p"]),
        ("global", p_g, r_g, f_g),
        ("group detection", gp, gr, group_f1),
        ("overall F_a", math.nan, math.nan, f_a),
    )
    details = {
        "variant": variant,
        "thresholds": {"actions": th.actions, "social": th.social, "global": th.global_activity},
        "n_frames": len(gold),
        "n_persons": len(aligned.true_actions),
        "n_true_groups": len(aligned.gold_size),
        "n_pred_groups": len(aligned.pred_size),
        "group_tp": tp,
        "group_fp": fp,
        "group_fn": fn,
    }
    table = Table(f"JRDB-PAR ({variant})", ("task", "precision", "recall", "F1"), rows)
    return ScoreReport("par", {k: float(v) for k, v in summary.items()}, (table,), details, tuple(notes))


def score_files(
    pred: Path, gold: Path, *, thresholds: ParThresholds | None = None, variant: str = "official"
) -> ScoreReport:
    """Score a JRDB-PAR style JSON Lines prediction file against a ground-truth file (docs/formats.md)."""
    report = score_frames(
        read_par(pred),
        read_par(gold),
        thresholds=thresholds,
        variant=variant,
        pred_label=str(pred),
        gold_label=str(gold),
    )
    details = {**report.details, "pred": str(pred), "gold": str(gold)}
    return ScoreReport(report.protocol, report.summary, report.tables, details, report.notes)
