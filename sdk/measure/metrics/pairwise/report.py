"""Turn the pairwise protocol's results into a :class:`~pairedge.measure.metrics.result.ScoreReport`."""

from __future__ import annotations

from typing import Any

import numpy as np
from pairedge.measure.metrics.pairwise.classification import PairwiseMetrics
from pairedge.measure.metrics.pairwise.groups import (
    SIZE_BUCKETS,
    DetectionScore,
    GroupActivityScore,
    GroupDetectionScore,
)
from pairedge.measure.metrics.result import ScoreReport, Table

NAN = float("nan")

#: The two accuracies pairedge reports, one definition each, as tables and Markdown name them.
#: ``accuracy`` (``pairedge score`` / ``eval``; SPEC 7's Accuracy = correct / N) counts every true
#: interacting pair, a pair the pipeline never labelled (a miss) as wrong; ``accuracy_scored``
#: (``pairedge bench``, and beside ``accuracy`` in ``score`` / ``eval``) leaves the misses out.
ACCURACY_LABELS: dict[str, str] = {
    "accuracy": "accuracy over true pairs (misses count as wrong)",
    "accuracy_scored": "accuracy of scored pairs (misses excluded)",
}

#: What each summary key means, copied into the report's details.
DEFINITIONS: dict[str, str] = {
    "accuracy": "correct / N over the interacting ground-truth pairs (missing predictions are wrong)",
    "accuracy_scored": "correct / (N - missing): over the interacting ground-truth pairs that got a "
    "predicted label, missing predictions left out (pairedge bench runs stage 2 on every true pair the "
    "pipeline tracked, whatever stage 1 decided)",
    "mpca": "mean of TP_c / N_c over the classes present in the ground truth",
    "mpca_over_all_classes": "sum of TP_c / N_c over present classes divided by C (published snippet)",
    "macro_f1": "mean over all C classes of 2PR/(P+R), P = TP/(TP+FP), R = TP/(TP+FN), 0 when undefined",
    "macro_f1_present": "the same mean over the classes in the ground truth or the predictions only",
    "pair_*": "stage 1: predicted pairs with p_interact >= tau vs ground-truth interacting pairs",
    "group_activity_accuracy": "majority vote of predicted pair labels inside each true group of >= 2",
    "group_*": "group detection at member-set IoU > 0.5 (TP/FN by true size, FP by predicted size)",
}


def build_report(
    cls: PairwiseMetrics,
    stage1: DetectionScore,
    activity: GroupActivityScore | None,
    detection: GroupDetectionScore | None,
    *,
    tau: float,
    counts: dict[str, int],
    notes: list[str],
) -> ScoreReport:
    """Assemble summary, tables, details and notes of one pairwise scoring run."""
    summary = {
        "accuracy": cls.accuracy,
        "accuracy_scored": scored_accuracy(cls.confusion),
        "mpca": cls.mpca,
        "mpca_over_all_classes": cls.mpca_over_all_classes,
        "macro_f1": cls.macro_f1,
        "macro_f1_present": cls.macro_f1_present,
        "pair_precision": stage1.precision,
        "pair_recall": stage1.recall,
        "pair_f1": stage1.f1,
        "group_activity_accuracy": activity.accuracy if activity else NAN,
        "group_vote_share": activity.mean_vote_share if activity else NAN,
        "group_precision": detection.overall.precision if detection else NAN,
        "group_recall": detection.overall.recall if detection else NAN,
        "group_f1": detection.overall.f1 if detection else NAN,
    }
    tables = [_per_class_table(cls), _confusion_table(cls)]
    if detection is not None:
        tables.append(_group_size_table(detection))
    details: dict[str, Any] = {
        "labels": list(cls.labels),
        "tau": float(tau),
        "counts": {**counts, "scored_pairs": cls.n, "missing_predictions": cls.n_missing},
        "confusion": cls.confusion,
        "missing": cls.missing,
        "per_class": {
            name: {
                "support": int(cls.support[i]),
                "predicted": int(cls.predicted[i]),
                "precision": float(cls.precision[i]),
                "recall": float(cls.recall[i]),
                "f1": float(cls.f1[i]),
            }
            for i, name in enumerate(cls.labels)
        },
        "stage1": _counts(stage1),
        "definitions": DEFINITIONS,
    }
    if activity is not None:
        details["group_activity"] = {
            "scored": activity.n_scored,
            "correct": activity.n_correct,
            "no_votes": activity.n_no_votes,
        }
    if detection is not None:
        details["group_detection"] = {
            "overall": _counts(detection.overall),
            "by_size": {b: _counts(s) for b, s in zip(SIZE_BUCKETS, detection.by_size, strict=True)},
        }
    return ScoreReport(
        protocol="pairwise",
        summary=summary,
        tables=tuple(tables),
        details=details,
        notes=tuple(notes + _notes(cls, stage1, activity)),
    )


def scored_accuracy(confusion: np.ndarray) -> float:
    """Accuracy of the scored pairs, misses excluded: trace / sum of a (C, C) confusion matrix (rows =
    truth) that holds only pairs with a predicted label; NaN when it holds none."""
    conf = np.asarray(confusion)
    total = int(conf.sum())
    return float(np.trace(conf) / total) if total else NAN


def _counts(score: DetectionScore) -> dict[str, float]:
    return {
        "tp": score.tp,
        "fp": score.fp,
        "fn": score.fn,
        "precision": score.precision,
        "recall": score.recall,
        "f1": score.f1,
    }


def _per_class_table(cls: PairwiseMetrics) -> Table:
    rows = tuple(
        (
            name,
            int(cls.support[i]),
            int(cls.predicted[i]),
            int(cls.missing[i]),
            float(cls.precision[i]),
            float(cls.recall[i]),
            float(cls.f1[i]),
        )
        for i, name in enumerate(cls.labels)
    )
    columns = ("class", "support", "predicted", "missing", "precision", "recall", "f1")
    return Table("pairwise: per class", columns, rows)


def _confusion_table(cls: PairwiseMetrics) -> Table:
    rows = tuple(
        (name, *(int(v) for v in cls.confusion[i]), int(cls.missing[i])) for i, name in enumerate(cls.labels)
    )
    columns = ("gold \\ pred", *cls.labels, "missing")
    return Table("pairwise: confusion matrix (rows = ground truth, columns = prediction)", columns, rows)


def _group_size_table(det: GroupDetectionScore) -> Table:
    rows = [
        (bucket, int(det.n_true[i]), int(det.n_pred[i]), s.tp, s.fp, s.fn, s.precision, s.recall, s.f1)
        for i, (bucket, s) in enumerate(zip(SIZE_BUCKETS, det.by_size, strict=True))
    ]
    o = det.overall
    rows.append(
        ("all", int(det.n_true.sum()), int(det.n_pred.sum()), o.tp, o.fp, o.fn, o.precision, o.recall, o.f1)
    )
    columns = ("size", "true", "predicted", "tp", "fp", "fn", "precision", "recall", "f1")
    return Table("pairwise: group detection by size (IoU > 0.5)", columns, tuple(rows))


def _notes(cls: PairwiseMetrics, stage1: DetectionScore, activity: GroupActivityScore | None) -> list[str]:
    notes: list[str] = []
    if cls.n == 0:
        notes.append("no interacting ground-truth pair: classification metrics undefined (NaN)")
    absent = [name for name, s in zip(cls.labels, cls.support, strict=True) if s == 0]
    if absent and cls.n:
        notes.append(
            f"classes absent from the ground truth: {absent}; mpca averages over the "
            f"{len(cls.labels) - len(absent)} present classes, mpca_over_all_classes divides by C = "
            f"{len(cls.labels)} (the published snippet's formula)"
        )
    if cls.n_missing:
        notes.append(f"{cls.n_missing} ground-truth pairs had no predicted label: counted wrong ('missing')")
    if stage1.tp + stage1.fp == 0:
        notes.append("no predicted interacting pair: stage-1 precision undefined (NaN)")
    if activity is not None and activity.n_scored == 0:
        notes.append("no ground-truth group of >= 2 people with an activity: group activity undefined (NaN)")
    elif activity is not None and activity.n_no_votes:
        notes.append(f"{activity.n_no_votes} ground-truth groups had no predicted pair inside: counted wrong")
    return notes
