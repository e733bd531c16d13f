"""Does a candidate still match fp32? The one comparison behind ``calibrate``, ``bench`` and ``parity check``.

Every tool that asks "does this fp16 / int8 model (or engine, or device) still decide like the fp32 model?"
feeds the fp32 reference's logits and the candidate's logits *of the same rows* to this module and reports
what it returns, so on the same rows they print the same numbers. (NVIDIA Polygraphy's ``comparator`` is the
model: one comparison, per-output tolerances, small result objects.)

**The decision rule** (:class:`DecisionRule`), the runtime's own on the raw logits of one frame:

- stage 1, the *gate*: open when ``p_interact >= tau``, ``p_interact`` = the float32 sigmoid of
  ``z[:, 1] - z[:, 0]`` (of ``z[:, 0]`` for a one-logit model), exactly
  :func:`pairedge.runtime.decisions.interact_probability`; ``tau`` is the model's ``tau_interact``. (The
  pipeline gates the *smoothed* probability over frames; a comparison of two models on the same rows
  compares single-frame decisions.)
- stage 2, the *top-1* class: the argmax of the logits (the first index on exact ties, as numpy).

**Scope of the stage-2 top-1**: the rows whose fp32 *reference* gate is open — what the runtime would send
to stage 2 — when the caller gives the reference's stage-1 logits for those rows and the gate opens on at
least one of them; otherwise every row (``calibrate``'s stage-2 rows, for instance, come without stage-1
logits; they are the pairs the fp32 gate passed plus the truth-labelled ones). The scope is named in every
result (:data:`SCOPE_GATED`, :data:`SCOPE_ALL`, :data:`SCOPE_ALL_NONE_GATED`).

**Near-ties**: a row whose *reference* decision lies within :data:`NEAR_TIE` (1e-3) of its boundary, in
probability: ``|p_interact - tau| < 1e-3`` for the gate, ``p_top1 - p_top2 < 1e-3`` (softmax of the
reference's logits) for the top-1. A disagreement on a near-tie is counted and reported
(``near_tie_disagreements``) and excepted from the judged figure: ``agreement`` is the plain share of equal
decisions, ``agreement_excl_near_ties`` = (agreed + near-tie disagreements) / rows, and tolerances are
applied to the latter.

**Logit error**: the absolute difference of every logit of the rows in scope (float64): max, mean and p99
over all elements. A candidate row with a NaN or inf logit is counted (``nonfinite_rows``), makes ``max``
infinite and always fails a judgement; mean and p99 are then over the finite rows.

**Tolerances** (:class:`AgreementTolerances`, :func:`judge`): gate and top-1 agreement (near-ties excepted)
at least ``min_gate_agreement`` / ``min_top1_agreement``, and a task metric (MPCA) at most ``max_mpca_drop``
below the reference's (:func:`metric_delta`, one-sided: doing better is never a failure).

Runtime code: numpy only (no torch, no onnxruntime).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from pairedge.core.errors import InputError
from pairedge.measure.metrics.pairwise import classification_metrics
from pairedge.runtime.decisions import gate_open, interact_probability, top1
from pairedge.runtime.pipeline import softmax

#: Width of the near-tie band around a decision boundary, in probability.
NEAR_TIE = 1e-3
SCOPE_ALL = "all"
SCOPE_GATED = "gated by the fp32 reference"
SCOPE_ALL_NONE_GATED = "all: the fp32 reference gates none"


@dataclass(frozen=True, eq=False)
class DecisionRule:
    """How logits become decisions.

    Attributes:
        tau: the stage-1 gate threshold: one number, or (N,) float64 per row of the stage-1 logits it is
            applied to (a clip in which an automatic operating point switched the threshold).
        near_tie: see :data:`NEAR_TIE`.
    """

    tau: float | np.ndarray = 0.5
    near_tie: float = NEAR_TIE

    def _tau(self, n: int) -> float | np.ndarray:
        if np.ndim(self.tau) == 0:
            return float(self.tau)
        tau = np.asarray(self.tau, np.float64)
        if tau.shape != (n,):
            raise InputError(
                f"gate threshold: expected one number or one per row ({n}), got shape {tau.shape}"
            )
        return tau

    def gate_probability(self, z1: np.ndarray) -> np.ndarray:
        """(N,) float32 ``p_interact`` of (N, 2) (or (N, 1)) stage-1 logits, as the pipeline computes it."""
        return interact_probability(_logits2d(z1, "stage-1"))

    def gate(self, z1: np.ndarray) -> np.ndarray:
        """(N,) bool: the gate is open (``p_interact >= tau``)."""
        p = self.gate_probability(z1)
        return gate_open(p, self._tau(len(p)))

    def top1(self, z2: np.ndarray) -> np.ndarray:
        """(N,) int64 top-1 class of (N, C) stage-2 logits."""
        return top1(_logits2d(z2, "stage-2"))

    def decisions(self, stage: int, z: np.ndarray) -> np.ndarray:
        """(N,) int64 decisions of (N, C) logits: stage 1 the gate (0 / 1), stage 2 the top-1 class."""
        if stage not in (1, 2):
            raise InputError(f"stage must be 1 (the gate) or 2 (the top-1 class), got {stage!r}")
        return self.top1(z) if stage == 2 else self.gate(z).astype(np.int64)

    def margin(self, stage: int, z: np.ndarray) -> np.ndarray:
        """(N,) float64 distance of each decision to its boundary, in probability (see the module
        docstring)."""
        if stage == 1:
            p = self.gate_probability(z).astype(np.float64)
            return np.abs(p - self._tau(len(p)))

        z = _logits2d(z, "stage-2")
        if z.shape[1] < 2:
            return np.full(len(z), np.inf)
        p = np.sort(softmax(z).astype(np.float64), axis=1)
        return p[:, -1] - p[:, -2]

    def to_dict(self) -> dict[str, Any]:
        tau = (
            float(self.tau)
            if np.ndim(self.tau) == 0
            else {"per_row": True, "min": float(np.min(self.tau)), "max": float(np.max(self.tau))}
        )
        return {"tau": tau, "near_tie": self.near_tie}


def _logits2d(z: np.ndarray, what: str) -> np.ndarray:
    z = np.asarray(z)
    if z.ndim != 2 or z.shape[1] < 1:
        raise InputError(f"{what} logits: expected an (N, C) array, got shape {z.shape}")
    return z


def top1_scope(rule: DecisionRule, n: int, reference_stage1: np.ndarray | None) -> tuple[np.ndarray, str]:
    """The rows the stage-2 top-1 is judged on and the scope's name (see the module docstring).

    Args:
        n: rows of the stage-2 logits. reference_stage1: (n, 2) fp32 stage-1 logits of the same rows, or None.
    """
    if reference_stage1 is None:
        return np.ones(n, bool), SCOPE_ALL
    if len(reference_stage1) != n:
        raise InputError(
            f"reference stage-1 logits: expected {n} rows (one per stage-2 row), got {len(reference_stage1)}"
        )
    gated = rule.gate(reference_stage1)
    return (gated, SCOPE_GATED) if gated.any() else (np.ones(n, bool), SCOPE_ALL_NONE_GATED)


@dataclass(frozen=True)
class LogitError:
    """Absolute logit error over ``rows`` rows (every element): ``max``, ``mean``, ``p99``; candidate rows
    with a NaN / inf logit in ``nonfinite_rows`` (``max`` is then inf; mean and p99 over the finite rows)."""

    rows: int
    max: float
    mean: float
    p99: float
    nonfinite_rows: int = 0

    @classmethod
    def of(cls, reference: np.ndarray, candidate: np.ndarray) -> LogitError:
        """The error of (N, C) ``candidate`` logits against (N, C) ``reference`` (zeros when N = 0)."""
        finite = np.isfinite(candidate).all(axis=1) if candidate.size else np.ones(len(candidate), bool)
        bad = int((~finite).sum())
        err = np.abs(reference[finite].astype(np.float64) - candidate[finite].astype(np.float64))
        if not err.size:
            return cls(len(reference), math.inf if bad else 0.0, 0.0, 0.0, bad)
        worst = math.inf if bad else float(err.max())
        return cls(len(reference), worst, float(err.mean()), float(np.percentile(err, 99)), bad)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DecisionAgreement:
    """How often the candidate's decisions equal the reference's on the rows in ``scope``.

    Attributes:
        output: "gate" (stage 1) or "top1" (stage 2). scope: which rows (see :func:`top1_scope`).
        rows: rows compared; agreed: equal decisions; near_ties: rows whose reference decision is within
            ``NEAR_TIE`` of its boundary; near_tie_disagreements: disagreements among those.
    """

    output: str
    scope: str
    rows: int
    agreed: int
    near_ties: int
    near_tie_disagreements: int

    @property
    def disagreements(self) -> int:
        return self.rows - self.agreed

    @property
    def agreement(self) -> float:
        """Share of equal decisions (NaN without rows)."""
        return self.agreed / self.rows if self.rows else math.nan

    @property
    def agreement_excl_near_ties(self) -> float:
        """Share of rows that agree or disagree only on a near-tie: the figure tolerances apply to."""
        return (self.agreed + self.near_tie_disagreements) / self.rows if self.rows else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "disagreements": self.disagreements,
            "agreement": self.agreement,
            "agreement_excl_near_ties": self.agreement_excl_near_ties,
        }


@dataclass(frozen=True)
class StageComparison:
    """One stage: its decisions (``decision``), the logit error on the scope's rows (``logits``) and on every
    row (``logits_all``; the same as ``logits`` when the scope is every row)."""

    stage: int
    decision: DecisionAgreement
    logits: LogitError
    logits_all: LogitError

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "decision": self.decision.to_dict(),
            "logits": self.logits.to_dict(),
            "logits_all": self.logits_all.to_dict(),
        }


def compare_stage(
    stage: int,
    reference: np.ndarray,
    candidate: np.ndarray,
    rule: DecisionRule | None = None,
    reference_stage1: np.ndarray | None = None,
) -> StageComparison:
    """Compare (N, C) candidate logits of one stage with the fp32 reference's on the same rows.

    Args:
        stage: 1 (judged by the gate, on every row) or 2 (judged by the top-1 on :func:`top1_scope`).
        reference_stage1: stage 2 only: (N, 2) fp32 stage-1 logits of the same rows (None: every row).

    Raises:
        InputError: shapes that differ, a stage other than 1 / 2.
    """
    rule = rule or DecisionRule()
    reference, candidate = np.asarray(reference), np.asarray(candidate)
    if reference.shape != candidate.shape or reference.ndim != 2:
        raise InputError(
            f"stage-{stage} logits: expected the candidate's shape to be the reference's "
            f"{reference.shape} (rows, classes), got {candidate.shape}"
        )
    n = len(reference)
    if stage == 2:
        rows, scope = top1_scope(rule, n, reference_stage1)
    else:
        rows, scope = np.ones(n, bool), SCOPE_ALL
    ref, cand = reference[rows], candidate[rows]
    same = rule.decisions(stage, ref) == rule.decisions(stage, cand)
    tie = rule.margin(stage, ref) < rule.near_tie
    decision = DecisionAgreement(
        "gate" if stage == 1 else "top1",
        scope,
        int(rows.sum()),
        int(same.sum()),
        int(tie.sum()),
        int((tie & ~same).sum()),
    )
    err = LogitError.of(ref, cand)
    return StageComparison(stage, decision, err, err if rows.all() else LogitError.of(reference, candidate))


@dataclass(frozen=True)
class Comparison:
    """Both stages of a candidate against the fp32 reference on the same rows (see :func:`compare`)."""

    rule: DecisionRule
    gate: StageComparison
    top1: StageComparison

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule.to_dict(), "gate": self.gate.to_dict(), "top1": self.top1.to_dict()}


def compare(
    reference: tuple[np.ndarray, np.ndarray],
    candidate: tuple[np.ndarray, np.ndarray],
    rule: DecisionRule | None = None,
) -> Comparison:
    """Compare a candidate's (stage-1, stage-2) logits with the reference's, every array (N, C) of the same
    N rows (pair-frames): the gate on every row, the top-1 on the rows the reference gates."""
    rule = rule or DecisionRule()
    return Comparison(
        rule,
        compare_stage(1, reference[0], candidate[0], rule),
        compare_stage(2, reference[1], candidate[1], rule, reference_stage1=reference[0]),
    )


# -- the pass / fail arithmetic ---------------------------------------------------------------------------
@dataclass(frozen=True)
class AgreementTolerances:
    """Pass thresholds (fractions): gate and top-1 agreement with near-ties excepted, and the MPCA drop."""

    min_gate_agreement: float = 0.99
    min_top1_agreement: float = 0.99
    max_mpca_drop: float = 0.005


@dataclass(frozen=True)
class Verdict:
    """``passed`` and, when not, one line per failed tolerance in ``problems``."""

    passed: bool
    problems: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "problems": list(self.problems)}


def decision_problem(d: DecisionAgreement, minimum: float) -> str | None:
    """One line when ``d`` (near-ties excepted) is below ``minimum``; None when it passes or has no rows."""
    if not d.rows or d.agreement_excl_near_ties >= minimum:
        return None
    what = "stage-1 gate" if d.output == "gate" else "stage-2 top-1"
    ties = (
        f"; {d.near_tie_disagreements} near-tie disagreement(s) excepted" if d.near_tie_disagreements else ""
    )
    return (
        f"{what} agreement {d.agreement_excl_near_ties:.4f} < {minimum:g} on {d.rows} rows ({d.scope}; "
        f"{d.disagreements} disagreement(s){ties})"
    )


def nonfinite_problem(s: StageComparison) -> str | None:
    """One line when the candidate produced NaN / inf logits on any row of the stage."""
    bad = s.logits_all.nonfinite_rows
    return f"stage{s.stage} logits are NaN or inf for {bad} of {s.logits_all.rows} rows" if bad else None


def metric_delta(
    name: str, reference: float, candidate: float, max_drop: float, who: str = "the candidate"
) -> tuple[float, str | None]:
    """``candidate - reference`` of a task metric and the problem when it drops more than ``max_drop``.

    Undefined (NaN) on both sides: delta 0, nothing to compare; on one side only: delta NaN and a problem.
    """
    ref_ok, cand_ok = math.isfinite(reference), math.isfinite(candidate)
    if ref_ok != cand_ok:
        return math.nan, f"{name} is {reference:.4f} for the reference but {candidate:.4f} for {who}"
    if not ref_ok:
        return 0.0, None
    delta = candidate - reference
    if delta < -max_drop - 1e-12:
        return delta, (
            f"{name} drops {-delta * 100:.2f} points ({reference:.4f} -> {candidate:.4f}), "
            f"tolerance {max_drop * 100:.2f}"
        )
    return delta, None


def mpca_pair(
    truth: np.ndarray, reference_top1: np.ndarray, candidate_top1: np.ndarray, num_classes: int
) -> tuple[float, float]:
    """MPCA of the reference's and of the candidate's stage-2 labels against ``truth`` (rows with truth >= 0;
    a label of -1, "not classified", counts as wrong)."""

    known = np.asarray(truth) >= 0
    t = np.asarray(truth)[known]
    return (
        classification_metrics(t, np.asarray(reference_top1)[known], num_classes).mpca,
        classification_metrics(t, np.asarray(candidate_top1)[known], num_classes).mpca,
    )


def judge(
    comparison: Comparison,
    tolerances: AgreementTolerances | None = None,
    mpca: tuple[float, float] | None = None,
) -> Verdict:
    """PASS when both stages' logits are finite, gate and top-1 agreement (near-ties excepted) reach their
    minimums and, given ``mpca`` = (reference, candidate), the MPCA drops at most ``max_mpca_drop``."""
    tol = tolerances or AgreementTolerances()
    found = [
        nonfinite_problem(comparison.gate),
        nonfinite_problem(comparison.top1),
        decision_problem(comparison.gate.decision, tol.min_gate_agreement),
        decision_problem(comparison.top1.decision, tol.min_top1_agreement),
    ]
    if mpca is not None:
        found.append(metric_delta("MPCA", mpca[0], mpca[1], tol.max_mpca_drop)[1])
    problems = tuple(p for p in found if p)
    return Verdict(not problems, problems)
