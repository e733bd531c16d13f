"""ONNX Runtime CPU inference and fp32-vs-candidate agreement, as calibration measures it.

Stage 1 is compared through the gate (``p_interact >= tau``), stage 2 through the top-1 class, both on the
same raw feature rows (no temporal smoothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.modelmeta import INPUT_NAME, OUTPUT_NAME


def session(model: str | Path | bytes | Any, threads: int = 1) -> Any:
    """An ONNX Runtime CPU session of a path, serialized bytes or a ModelProto (``threads`` intra-op threads)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    source = model.SerializeToString() if hasattr(model, "SerializeToString") else model
    return ort.InferenceSession(
        source if isinstance(source, bytes) else str(source), opts, providers=["CPUExecutionProvider"]
    )


def logits(sess: Any, X: np.ndarray, batch: int = 8192) -> np.ndarray:
    """(N, C) float32 logits of (N, F) raw features, in batches of ``batch`` rows."""
    X = np.ascontiguousarray(X, np.float32)
    if not len(X):
        width = sess.get_outputs()[0].shape[-1]
        return np.zeros((0, width if isinstance(width, int) else 0), np.float32)
    out = [sess.run([OUTPUT_NAME], {INPUT_NAME: X[i : i + batch]})[0] for i in range(0, len(X), batch)]
    return np.concatenate(out).astype(np.float32)


def decisions(stage: int, z: np.ndarray, tau: float = 0.5) -> np.ndarray:
    """(N,) int64 decisions of (N, C) logits: stage 1 the gate ``p_interact >= tau``, stage 2 the argmax."""
    if stage == 2:
        return z.argmax(axis=1).astype(np.int64)
    from pairedge.runtime.pipeline import interact_probability

    return (interact_probability(z) >= tau).astype(np.int64)


@dataclass(frozen=True)
class Agreement:
    """How a candidate's outputs compare with the fp32 model's on the same rows.

    Attributes:
        n: rows compared. agreement: share of equal decisions (gate or top-1).
        max_abs, mean_abs, p99_abs: absolute logit error statistics.
    """

    n: int
    agreement: float
    max_abs: float
    mean_abs: float
    p99_abs: float

    def to_dict(self) -> dict[str, float]:
        return {
            "n": self.n,
            "agreement": self.agreement,
            "max_abs_logit_error": self.max_abs,
            "mean_abs_logit_error": self.mean_abs,
            "p99_abs_logit_error": self.p99_abs,
        }


def agreement(stage: int, reference: np.ndarray, candidate: np.ndarray, tau: float = 0.5) -> Agreement:
    """Compare (N, C) logits of the fp32 model and a candidate."""
    if not len(reference):
        return Agreement(0, float("nan"), float("nan"), float("nan"), float("nan"))
    err = np.abs(reference.astype(np.float64) - candidate.astype(np.float64))
    same = decisions(stage, reference, tau) == decisions(stage, candidate, tau)
    return Agreement(
        int(len(reference)),
        float(same.mean()),
        float(err.max()),
        float(err.mean()),
        float(np.percentile(err.max(axis=1), 99)),
    )
