"""JRDB-PAR panoramic activity recognition protocol, scored as the official code (RuizeHan/PAR) does.

Individual F_i and global F_g are sample-averaged multi-label scores; social F_p sums pair scores over
predicted groups matched to true groups by the Half criterion and divides by the number of predicted
groups; F_a = (F_i + F_p + F_g) / 3. Group detection P/R/F1 come from TP/FP/FN summed over frames.
See ``docs/protocols.md`` for the official quirks and the ``corrected`` variant.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.par import N_ACTIONS, ParFrame, read_par
from pairedge.measure.metrics.par.core import half_matches, safe_div, sample_prf, social_sums
from pairedge.measure.metrics.par.flat import (
    ParThresholds,
    PersonIndex,
    check_persons,
    flatten,
    group_index,
    order_predictions,
    true_group_labels,
)
from pairedge.measure.metrics.result import ScoreReport, Table

VARIANTS = ("official", "corrected")
__all__ = ["VARIANTS", "ParThresholds", "score_files", "score_frames"]


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


def _align(
    pred: Sequence[ParFrame], gold: Sequence[ParFrame], th: ParThresholds, pred_label: str, gold_label: str
) -> _Aligned:
    ordered = order_predictions(pred, gold, pred_label, gold_label)
    g, p = flatten(gold, th), flatten(ordered, th)
    index = PersonIndex(g.person_frame, g.person_ids)
    rows = check_persons(index, g, p, gold, pred_label)
    n = len(g.person_ids)
    pred_actions = np.zeros((n, N_ACTIONS), dtype=bool)
    pred_actions[rows] = p.actions
    gold_group, gold_size, gold_kept = group_index(index, g, n)
    pred_group, pred_size, pred_kept = group_index(index, p, n)
    return _Aligned(
        pred_actions=pred_actions,
        true_actions=g.actions,
        pred_global=p.global_labels,
        true_global=g.global_labels,
        gold_group=gold_group,
        pred_group=pred_group,
        gold_size=gold_size,
        pred_size=pred_size,
        true_social=true_group_labels(index, g)[gold_kept],
        pred_social=p.group_labels[pred_kept],
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


def _check_not_empty(gold: Sequence[ParFrame], gold_label: str) -> None:
    """Nothing to score (no frame, or no person in any frame: F_i and F_a undefined) is an error."""
    if not gold:
        raise FormatError(
            gold_label, "no frame to score (the ground truth is empty); expected at least one frame record"
        )
    if not any(len(f.person_ids) for f in gold):
        raise FormatError(
            gold_label,
            f"no person in any of its {len(gold)} frames: nothing to score (F_i and F_a would be "
            "undefined); expected ground truth with at least one person",
        )


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

    Raises:
        FormatError: a ground truth with no frame or no person (nothing to score), or predictions that do
            not cover it.
    """
    if variant not in VARIANTS:
        raise InputError(f"unknown PAR variant {variant!r}; expected one of {list(VARIANTS)}")
    th = thresholds or ParThresholds()
    _check_not_empty(gold, gold_label)
    aligned = _align(pred, gold, th, pred_label, gold_label)
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
        "F_a": f_a,
        "F_i": f_i,
        "P_i": p_i,
        "R_i": r_i,
        **social,
        "F_g": f_g,
        "P_g": p_g,
        "R_g": r_g,
        "group_P": gp,
        "group_R": gr,
        "group_F1": group_f1,
    }
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
