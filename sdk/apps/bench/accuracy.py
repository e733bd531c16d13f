"""The accuracy side of a ``pairedge bench`` row: task metrics on the scored pairs and the comparator's gate.

Every variant is fed the features the fp32 reference pipeline computed (a :class:`PairRows` of N
pair-frames). Its stage-2 accuracy / MPCA / macro-F1 are over the true interacting pairs the pipeline
scored (``scored``); its agreement with fp32, logit errors and pass / fail come from
:mod:`pairedge.compare.comparator` (the gate on every pair-frame, the top-1 on the pair-frames the fp32
reference gates, near-ties counted and excepted), the comparison ``calibrate`` and ``parity check`` use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.compare.comparator import (
    AgreementTolerances,
    Comparison,
    DecisionRule,
    compare,
    judge,
    mpca_pair,
)
from pairedge.compare.parity.build import pair_truth
from pairedge.compare.parity.pack import PairRows
from pairedge.compare.parity.replay import replay
from pairedge.measure.metrics.pairwise import classification_metrics
from pairedge.measure.metrics.pairwise.report import scored_accuracy
from pairedge.runtime.deployment import Deployment


@dataclass(frozen=True)
class Gate:
    """The accuracy gate a precision must pass against fp32 (fractions): MPCA drop, stage-1 gate and stage-2
    top-1 agreement (near-ties excepted), as :class:`pairedge.compare.comparator.AgreementTolerances`."""

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
        "gate": g.agreement,
        "top1": t.agreement,
        "gate_excl_near_ties": g.agreement_excl_near_ties,
        "top1_excl_near_ties": t.agreement_excl_near_ties,
        "gate_near_ties": g.near_ties,
        "top1_near_ties": t.near_ties,
        "gate_near_tie_disagreements": g.near_tie_disagreements,
        "top1_near_tie_disagreements": t.near_tie_disagreements,
        "gate_rows": g.rows,
        "top1_rows": t.rows,
        "top1_scope": t.scope,
        "max_abs_logit_error_stage1": c.gate.logits.max,
        "max_abs_logit_error_stage2": c.top1.logits.max,
    }


def score_variant(
    ref: Any,
    scored: np.ndarray,
    truth_label: np.ndarray,
    logits: tuple[np.ndarray, np.ndarray],
    tau: float | np.ndarray,
    gate: Gate | None = None,
) -> VariantAccuracy:
    """Score one variant's (stage-1, stage-2) logits on the reference rows.

    Args:
        ref: the fp32 reference's :class:`pairedge.compare.parity.pack.PairRows` (N pair-frames).
        scored: (N,) bool, the true interacting pair-frames with a label of this model.
        truth_label: (N,) int64 true stage-2 class (-1 unknown).
        logits: the variant's (N, 2) stage-1 and (N, C) stage-2 logits on ``ref``'s features.
        tau: the gate threshold: one number, or (N,) per row (see :class:`Reference`).
    """

    gate = gate or Gate()
    comp = compare((ref.stage1_logits, ref.stage2_logits), logits, DecisionRule(tau=tau))
    top = comp.rule.top1(logits[1])[scored]
    num_classes = logits[1].shape[1]
    m = classification_metrics(truth_label[scored], top, num_classes)
    accuracy = {"accuracy_scored": scored_accuracy(m.confusion), "mpca": m.mpca, "macro_f1": m.macro_f1}
    ref_mpca, cand_mpca = mpca_pair(
        truth_label[scored], comp.rule.top1(ref.stage2_logits)[scored], top, num_classes
    )
    verdict = judge(comp, gate.tolerances(), (ref_mpca, cand_mpca))
    return VariantAccuracy(
        accuracy,
        agreement_summary(comp),
        comp.to_dict(),
        ref_mpca,
        ref_mpca - cand_mpca,
        verdict.passed,
        verdict.problems,
    )


@dataclass(frozen=True)
class Reference:
    """The fp32 reference's replay of the held-out sources.

    Attributes:
        rows: :class:`pairedge.compare.parity.pack.PairRows` of N pair-frames (features, fp32 logits).
        truth_interacting, truth_label: (N,) int64 truth (-1 unknown). sources: their names.
        tau: the gate threshold in force at each row's frame, (N,) float64 (an automatic operating point may
            switch it within a source), or one number when it never changed.
    """

    rows: Any
    truth_interacting: np.ndarray
    truth_label: np.ndarray
    tau: float | np.ndarray
    sources: list[str]

    @property
    def scored(self) -> np.ndarray:
        """(N,) bool: the true interacting pair-frames with a label of this model."""
        return (self.truth_interacting == 1) & (self.truth_label >= 0)

    def score(self, logits: tuple[np.ndarray, np.ndarray], gate: Gate | None = None) -> VariantAccuracy:
        """:func:`score_variant` of a variant's logits on these rows."""
        return score_variant(self.rows, self.scored, self.truth_label, logits, self.tau, gate)


def reference_rows(
    model: Path, sources: Sequence[Any], frames: int | None, progress: Callable[[str], None]
) -> Reference:
    """fp32 ONNX Runtime CPU replay of every source through the streaming pipeline (``frames`` per source)."""

    parts, inter, label, taus, names = [], [], [], [], []
    with Deployment(model, backend="onnxruntime").load() as pipe:
        for src in sources:
            progress(f"reference: fp32 pipeline on {src.name}")
            truths: list[Any] = []

            def items(src: Any = src, truths: list[Any] = truths) -> Any:
                for k, f in enumerate(src.open(pipe.labels, frames)):
                    truths.append(f.truth)
                    yield k, f.image, f.detections, f.timestamp

            run = replay(pipe, items(), image_size=src.image_size)
            ti, tl = pair_truth(run.rows, truths, pipe.labels)
            per_frame = np.array([s.tau_interact for s in run.states], np.float64)
            taus.append(
                per_frame[run.rows.frame] if len(per_frame) else np.full(len(run.rows), pipe.tau_interact)
            )
            parts.append(run.rows)
            inter.append(ti)
            label.append(tl)
            names.append(src.name)
    cols = [np.concatenate([getattr(p, f) for p in parts]) for f in PairRows.__dataclass_fields__]
    tau = np.concatenate(taus)
    one = float(tau[0]) if len(tau) and (tau == tau[0]).all() else tau
    return Reference(PairRows(*cols), np.concatenate(inter), np.concatenate(label), one, names)


def tau_summary(tau: float | np.ndarray) -> float | dict[str, Any]:
    """The gate threshold of the reference rows: one number, or the values an automatic operating point
    took."""
    if np.ndim(tau) == 0:
        return float(tau)
    return {"per_row": True, "values": sorted(set(np.asarray(tau, np.float64).tolist()))}
