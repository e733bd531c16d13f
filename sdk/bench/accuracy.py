"""The accuracy side of a ``pairedge bench`` row: task metrics on the scored pairs and the comparator's gate.

Every variant is fed the features the fp32 reference pipeline computed (a :class:`PairRows` of N
pair-frames). Its stage-2 accuracy / MPCA / macro-F1 are over the true interacting pairs the pipeline
scored (``scored``); its agreement with fp32, logit errors and pass / fail come from
:mod:`pairedge.runtime.comparator` (the gate on every pair-frame, the top-1 on the pair-frames the fp32
reference gates, near-ties counted and excepted), the comparison ``calibrate`` and ``parity check`` use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pairedge.runtime.comparator import (
    AgreementTolerances,
    Comparison,
    DecisionRule,
    compare,
    judge,
    mpca_pair,
)


@dataclass(frozen=True)
class Gate:
    """The accuracy gate a precision must pass against fp32 (fractions): MPCA drop, stage-1 gate and stage-2
    top-1 agreement (near-ties excepted), as :class:`pairedge.runtime.comparator.AgreementTolerances`."""

    max_mpca_drop: float = 0.005
    min_top1_agreement: float = 0.99
    min_gate_agreement: float = 0.99

    def tolerances(self) -> AgreementTolerances:
        return AgreementTolerances(self.min_gate_agreement, self.min_top1_agreement, self.max_mpca_drop)


@dataclass(frozen=True)
class VariantAccuracy:
    """What a variant's logits give on the reference rows.

    Attributes:
        accuracy: ``accuracy_scored``, ``mpca``, ``macro_f1`` of stage 2 on the scored pairs.
        agreement: the comparator's figures, flat (see :func:`agreement_summary`).
        comparison: the comparator's full result (``Comparison.to_dict()``).
        reference_mpca: the fp32 reference's MPCA on the same pairs; mpca_drop: reference minus variant.
        passed, problems: the gate's verdict and, when it fails, one line per failed tolerance.
    """

    accuracy: dict[str, float]
    agreement: dict[str, Any]
    comparison: dict[str, Any]
    reference_mpca: float
    mpca_drop: float
    passed: bool
    problems: tuple[str, ...] = field(default_factory=tuple)


def agreement_summary(c: Comparison) -> dict[str, Any]:
    """The comparator's figures as the bench row's flat ``agreement`` dict (``gate`` / ``top1``: the plain
    shares; ``*_excl_near_ties``: the figures the gate judges)."""
    g, t = c.gate.decision, c.top1.decision
    return {
        "gate": g.agreement, "top1": t.agreement,
        "gate_excl_near_ties": g.agreement_excl_near_ties, "top1_excl_near_ties": t.agreement_excl_near_ties,
        "gate_near_ties": g.near_ties, "top1_near_ties": t.near_ties,
        "gate_near_tie_disagreements": g.near_tie_disagreements,
        "top1_near_tie_disagreements": t.near_tie_disagreements,
        "gate_rows": g.rows, "top1_rows": t.rows, "top1_scope": t.scope,
        "max_abs_logit_error_stage1": c.gate.logits.max, "max_abs_logit_error_stage2": c.top1.logits.max,
    }  # fmt: skip


def score_variant(
    ref: Any,
    scored: np.ndarray,
    truth_label: np.ndarray,
    logits: tuple[np.ndarray, np.ndarray],
    tau: float,
    gate: Gate | None = None,
) -> VariantAccuracy:
    """Score one variant's (stage-1, stage-2) logits on the reference rows.

    Args:
        ref: the fp32 reference's :class:`pairedge.runtime.parity.pack.PairRows` (N pair-frames).
        scored: (N,) bool, the true interacting pair-frames with a label of this model.
        truth_label: (N,) int64 true stage-2 class (-1 unknown).
        logits: the variant's (N, 2) stage-1 and (N, C) stage-2 logits on ``ref``'s features.
        tau: the model's gate threshold.
    """
    from pairedge.metrics.pairwise import classification_metrics
    from pairedge.metrics.pairwise_report import scored_accuracy

    gate = gate or Gate()
    comp = compare((ref.stage1_logits, ref.stage2_logits), logits, DecisionRule(tau=tau))
    top = comp.rule.top1(logits[1])[scored]
    num_classes = logits[1].shape[1]
    m = classification_metrics(truth_label[scored], top, num_classes)
    accuracy = {"accuracy_scored": scored_accuracy(m.confusion), "mpca": m.mpca, "macro_f1": m.macro_f1}
    ref_mpca, cand_mpca = mpca_pair(truth_label[scored], comp.rule.top1(ref.stage2_logits)[scored], top,
                                    num_classes)  # fmt: skip
    verdict = judge(comp, gate.tolerances(), (ref_mpca, cand_mpca))
    return VariantAccuracy(accuracy, agreement_summary(comp), comp.to_dict(), ref_mpca, ref_mpca - cand_mpca,
                           verdict.passed, verdict.problems)  # fmt: skip
