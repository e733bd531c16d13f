"""Classification metrics for model selection and training reports: the ``pairwise`` protocol's numbers.

A thin adapter over :func:`pairedge.measure.metrics.pairwise.classification_metrics` (SPEC §7) that returns a
JSON-serialisable dict: accuracy; MPCA = mean over classes present in the ground truth of TP_c / N_c (also
``mpca_all_classes``, divided by C); macro-F1 with P = TP / (TP + FP); per-class table; confusion matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pairedge.measure.metrics.pairwise import classification_metrics as _pairwise


def classification_metrics(y_true: np.ndarray, y_pred: np.ndarray, labels: Sequence[str]) -> dict[str, Any]:
    """Metrics of predicted class ids (N,) int against true class ids (N,) int, as a plain dict."""
    m = _pairwise(np.asarray(y_true), np.asarray(y_pred), len(labels), labels=tuple(labels))
    return {
        "n": int(m.n),
        "accuracy": float(m.accuracy),
        "mpca": float(m.mpca),
        "mpca_all_classes": float(m.mpca_over_all_classes),
        "macro_f1": float(m.macro_f1),
        "per_class": {
            name: {
                "precision": float(m.precision[i]),
                "recall": float(m.recall[i]),
                "f1": float(m.f1[i]),
                "support": int(m.support[i]),
            }
            for i, name in enumerate(m.labels)
        },
        "labels": list(m.labels),
        "confusion": np.asarray(m.confusion, dtype=np.int64).tolist(),
    }
