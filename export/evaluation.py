"""Classification metrics for model selection and training reports (numpy only, no torch).

Definitions follow the ``pairwise`` protocol (SPEC §7): accuracy; MPCA = mean over classes present in the
ground truth of TP_c / N_c; macro-F1 = mean over all C classes of ``2 P R / (P + R)`` with P = TP / (TP + FP)
and R = TP / (TP + FN), 0 where undefined.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pairedge.errors import InputError


def confusion_matrix(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int) -> np.ndarray:
    """(C, C) int64 counts, rows = truth, columns = prediction. Inputs: (N,) integer class ids."""
    t = np.asarray(y_true, dtype=np.int64).reshape(-1)
    p = np.asarray(y_pred, dtype=np.int64).reshape(-1)
    if len(t) != len(p):
        raise InputError(f"metrics: expected as many predictions as labels, got {len(p)} and {len(t)}")
    for name, arr in (("labels", t), ("predictions", p)):
        if len(arr) and (arr.min() < 0 or arr.max() >= num_classes):
            raise InputError(
                f"metrics: {name} must be class ids in [0, {num_classes}), got {arr.min()}..{arr.max()}"
            )
    return np.bincount(t * num_classes + p, minlength=num_classes * num_classes).reshape(
        num_classes, num_classes
    )


def classification_metrics(
    y_true: np.ndarray, y_pred: np.ndarray, labels: tuple[str, ...] | list[str]
) -> dict[str, Any]:
    """Accuracy, MPCA (present classes), macro-F1, per-class P/R/F1/support and the confusion matrix."""
    c = len(labels)
    cm = confusion_matrix(y_true, y_pred, c).astype(np.float64)
    tp = np.diag(cm)
    support = cm.sum(axis=1)
    predicted = cm.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = np.where(support > 0, tp / support, 0.0)
        precision = np.where(predicted > 0, tp / predicted, 0.0)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
    n = cm.sum()
    present = support > 0
    return {
        "n": int(n),
        "accuracy": float(tp.sum() / n) if n else float("nan"),
        "mpca": float(recall[present].mean()) if present.any() else float("nan"),
        "mpca_all_classes": float(recall.mean()),
        "macro_f1": float(f1.mean()),
        "per_class": {
            name: {
                "precision": float(precision[i]),
                "recall": float(recall[i]),
                "f1": float(f1[i]),
                "support": int(support[i]),
            }
            for i, name in enumerate(labels)
        },
        "labels": list(labels),
        "confusion": cm.astype(np.int64).tolist(),
    }
