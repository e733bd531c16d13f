"""ONNX Runtime CPU inference and fp32-vs-candidate agreement, as calibration measures it.

Stage 1 is compared through the gate (``p_interact >= tau``), stage 2 through the top-1 class, both on the
same raw feature rows (no temporal smoothing). The decision rule, the near-ties and the logit error
statistics are those of :mod:`pairedge.compare.comparator`, the one comparison ``bench`` and ``parity check``
use too: :func:`agreement` and :func:`decisions` delegate to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pairedge.compare.comparator import DecisionRule, compare_stage
from pairedge.core.modelmeta import INPUT_NAME, OUTPUT_NAME
from pairedge.runtime.backends.ort_session import make_session

if TYPE_CHECKING:
    from pairedge.compare.comparator import StageComparison


def session(model: str | Path | bytes | Any, threads: int = 1) -> Any:
    """An ONNX Runtime CPU session of a path, serialized bytes or a ModelProto (``threads`` intra-op threads;
    :func:`pairedge.runtime.backends.ort_session.make_session`, the one factory)."""

    return make_session(model, threads=threads)


def logits(sess: Any, X: np.ndarray, batch: int = 8192) -> np.ndarray:
    """(N, C) float32 logits of (N, F) raw features, in batches of ``batch`` rows."""
    X = np.ascontiguousarray(X, np.float32)
    if not len(X):
        width = sess.get_outputs()[0].shape[-1]
        return np.zeros((0, width if isinstance(width, int) else 0), np.float32)
    out = [sess.run([OUTPUT_NAME], {INPUT_NAME: X[i : i + batch]})[0] for i in range(0, len(X), batch)]
    return np.concatenate(out).astype(np.float32)


def decisions(stage: int, z: np.ndarray, tau: float = 0.5) -> np.ndarray:
    """(N,) int64 decisions of (N, C) logits: stage 1 the gate ``p_interact >= tau``, stage 2 the argmax.

    The rule of :class:`pairedge.compare.comparator.DecisionRule` (the runtime's).
    """

    return DecisionRule(tau=tau).decisions(stage, z)


@dataclass(frozen=True)
class Agreement:
    """How a candidate's outputs compare with the fp32 model's on the same rows (from the comparator).

    Attributes:
        n: rows compared (stage 2: the rows in ``scope``). agreement: share of equal decisions (gate or
            top-1). max_abs, mean_abs, p99_abs: absolute logit error over every logit of those rows (max is
            inf when the candidate gave NaN / inf). near_ties / near_tie_disagreements: rows whose fp32
            decision is within 1e-3 of its boundary, and the disagreements among them;
            agreement_excl_near_ties: the figure tolerances apply to. scope: which rows.
    """

    n: int
    agreement: float
    max_abs: float
    mean_abs: float
    p99_abs: float
    near_ties: int = 0
    near_tie_disagreements: int = 0
    agreement_excl_near_ties: float = float("nan")
    scope: str = "all"

    @classmethod
    def from_comparison(cls, s: StageComparison) -> Agreement:
        d, e = s.decision, s.logits
        return cls(
            d.rows,
            d.agreement,
            e.max,
            e.mean,
            e.p99,
            d.near_ties,
            d.near_tie_disagreements,
            d.agreement_excl_near_ties,
            d.scope,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "agreement": self.agreement,
            "max_abs_logit_error": self.max_abs,
            "mean_abs_logit_error": self.mean_abs,
            "p99_abs_logit_error": self.p99_abs,
            "near_ties": self.near_ties,
            "near_tie_disagreements": self.near_tie_disagreements,
            "agreement_excl_near_ties": self.agreement_excl_near_ties,
            "scope": self.scope,
        }


def agreement(
    stage: int,
    reference: np.ndarray,
    candidate: np.ndarray,
    tau: float = 0.5,
    *,
    reference_stage1: np.ndarray | None = None,
) -> Agreement:
    """Compare (N, C) logits of the fp32 model and a candidate
    (:func:`pairedge.compare.comparator.compare_stage`).

    Stage 1 is judged by the gate on every row; stage 2 by the top-1 on the rows the fp32 gate opens when
    ``reference_stage1`` ((N, 2) fp32 stage-1 logits of the same rows) is given, else on every row.
    """

    if not len(reference):
        return Agreement(0, float("nan"), float("nan"), float("nan"), float("nan"))
    s = compare_stage(stage, reference, candidate, DecisionRule(tau=tau), reference_stage1=reference_stage1)
    return Agreement.from_comparison(s)
