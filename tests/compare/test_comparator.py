"""pairedge.compare.comparator: one decision rule and one agreement arithmetic, and calibrate, bench and
parity print the same figures on the same rows."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from pairedge.compare.comparator import (
    SCOPE_ALL,
    SCOPE_ALL_NONE_GATED,
    SCOPE_GATED,
    AgreementTolerances,
    DecisionRule,
    LogitError,
    compare,
    compare_stage,
    judge,
    metric_delta,
)
from pairedge.compare.parity.pack import PairRows
from pairedge.core.errors import InputError
from pairedge.runtime.decisions import interact_probability

TAU = 0.55


def _rows(z1: np.ndarray, z2: np.ndarray) -> PairRows:
    n = len(z1)
    fields = {f: np.zeros(n) for f in PairRows.__dataclass_fields__}
    fields.update(stage1_logits=z1, stage2_logits=z2)
    return PairRows(**fields)


@pytest.fixture(scope="module")
def logits() -> dict[str, np.ndarray]:
    """fp32 reference and a noisy candidate (some disagreements), with planted near-ties of both stages."""
    rng = np.random.default_rng(23)
    n = 3000
    z1 = np.stack([np.zeros(n), rng.normal(0, 2.5, n)], 1).astype(np.float32)
    z2 = rng.normal(0, 1.5, (n, 3)).astype(np.float32)
    logit_tau = math.log(TAU / (1 - TAU))
    z1[:10, 1] = logit_tau + 2e-3  # fp32 p_interact within 1e-3 above tau: near-ties, gate open
    z2[:10] = [[1.0, 1.0 + 1e-3, -2.0]] * 10  # fp32 top-1 near-ties (softmax margin < 1e-3)
    c1 = z1 + rng.normal(0, 0.05, z1.shape).astype(np.float32)
    c2 = z2 + rng.normal(0, 0.05, z2.shape).astype(np.float32)
    c1[:10] = [0.0, logit_tau - 2e-3]  # the candidate closes the near-tie gates
    c2[:10] = [[1.0 + 1e-3, 1.0, -2.0]] * 10  # and flips the near-tie top-1
    truth = np.where(rng.random(n) < 0.8, z2.argmax(1), rng.integers(0, 3, n)).astype(np.int64)
    return {"z1": z1, "z2": z2, "c1": c1, "c2": c2, "truth": truth}


def test_decision_rule_is_the_runtimes() -> None:
    rule = DecisionRule(tau=TAU)
    z = np.array([[0.0, 0.2], [0.0, 0.21], [1.0, -1.0]], np.float32)
    p = interact_probability(z)
    assert np.array_equal(rule.gate_probability(z), p) and rule.gate(z).tolist() == (p >= TAU).tolist()
    assert rule.decisions(2, np.array([[0.1, 0.3, 0.3]])).tolist() == [1]  # first index on ties
    assert rule.margin(1, z) == pytest.approx(np.abs(p.astype(np.float64) - TAU))
    with pytest.raises(InputError, match="stage must be 1"):
        rule.decisions(3, z)
    with pytest.raises(InputError, match=r"expected an \(N, C\) array"):
        rule.gate(np.zeros(4))


def test_threshold_per_row() -> None:
    """A clip whose operating point switched: one threshold per row, for the gate and the top-1 scope."""
    z1 = np.array([[0.0, 0.3], [0.0, 0.3], [0.0, -3.0]], np.float32)  # p 0.574, 0.574, 0.047
    rule = DecisionRule(tau=np.array([0.5, 0.6, 0.5]))
    assert rule.gate(z1).tolist() == [True, False, False]
    s = compare_stage(2, np.eye(3, dtype=np.float32), np.eye(3, dtype=np.float32), rule, reference_stage1=z1)
    assert s.decision.rows == 1 and rule.to_dict()["tau"] == {"per_row": True, "min": 0.5, "max": 0.6}
    with pytest.raises(InputError, match="one per row"):
        DecisionRule(tau=np.array([0.5, 0.6])).gate(z1)


def test_scope_of_top1() -> None:
    rule = DecisionRule()
    z2 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], np.float32)
    c2 = np.array([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0]], np.float32)  # differs on row 0 only
    open_ = np.array([[0.0, -5.0], [0.0, 5.0], [0.0, 5.0]], np.float32)  # the reference gates rows 1, 2
    s = compare_stage(2, z2, c2, rule, reference_stage1=open_)
    assert (s.decision.scope, s.decision.rows, s.decision.agreement) == (SCOPE_GATED, 2, 1.0)
    assert s.logits.max == 0.0 and s.logits_all.max == 1.0  # the error outside the scope is reported apart
    s = compare_stage(2, z2, c2, rule)
    assert (s.decision.scope, s.decision.rows) == (SCOPE_ALL, 3) and s.decision.agreed == 2
    closed = np.full((3, 2), [0.0, -5.0], np.float32)
    s = compare_stage(2, z2, c2, rule, reference_stage1=closed)
    assert (s.decision.scope, s.decision.rows) == (SCOPE_ALL_NONE_GATED, 3)
    with pytest.raises(InputError, match="expected 3 rows"):
        compare_stage(2, z2, c2, rule, reference_stage1=closed[:2])
    with pytest.raises(InputError, match="candidate's shape"):
        compare_stage(1, z2, c2[:, :1], rule)


def test_near_ties_counted_and_excepted(logits: dict[str, np.ndarray]) -> None:
    c = compare((logits["z1"], logits["z2"]), (logits["c1"], logits["c2"]), DecisionRule(tau=TAU))
    g, t = c.gate.decision, c.top1.decision
    assert g.near_ties >= g.near_tie_disagreements >= 10  # the planted ones, and noise near the boundary
    assert t.near_tie_disagreements >= 10 and t.scope == SCOPE_GATED
    assert g.agreement_excl_near_ties == pytest.approx((g.agreed + g.near_tie_disagreements) / g.rows)
    assert g.agreement < g.agreement_excl_near_ties < 1.0  # the noise also changes decisive rows
    tol = AgreementTolerances(min_gate_agreement=g.agreement_excl_near_ties, min_top1_agreement=0.0)
    assert judge(c, tol).passed  # judged on the figure with near-ties excepted
    strict = AgreementTolerances(min_gate_agreement=g.agreement_excl_near_ties + 1e-6, min_top1_agreement=0.0)
    problems = judge(c, strict).problems
    assert (
        len(problems) == 1
        and "stage-1 gate agreement" in problems[0]
        and f"{g.near_tie_disagreements} near-tie" in problems[0]
    )


def test_logit_error_statistics_and_nonfinite() -> None:
    ref = np.zeros((100, 2), np.float32)
    cand = ref.copy()
    cand[:, 0] = np.arange(100) / 100.0
    e = LogitError.of(ref, cand)
    err = np.abs(cand - ref).astype(np.float64)
    assert (e.max, e.mean, e.p99) == pytest.approx((0.99, err.mean(), np.percentile(err, 99)))
    cand[3, 1] = np.nan
    e = LogitError.of(ref, cand)
    assert e.nonfinite_rows == 1 and e.max == math.inf and math.isfinite(e.p99)
    c = compare((ref, ref), (cand, ref))
    assert not judge(c).passed and "NaN or inf for 1 of 100 rows" in judge(c).problems[0]
    assert LogitError.of(ref[:0], ref[:0]) == LogitError(0, 0.0, 0.0, 0.0, 0)


def test_metric_delta_is_one_sided() -> None:
    assert metric_delta("MPCA", 0.80, 0.797, 0.005) == (pytest.approx(-0.003), None)
    assert (
        "MPCA drops 1.00 points (0.8000 -> 0.7900), tolerance 0.50"
        in metric_delta("MPCA", 0.8, 0.79, 0.005)[1]
    )
    assert metric_delta("MPCA", 0.80, 0.90, 0.005)[1] is None  # doing better never fails
    assert metric_delta("MPCA", math.nan, math.nan, 0.005) == (0.0, None)
    delta, problem = metric_delta("pair_f1", 0.5, math.nan, 0.01, who="the device")
    assert math.isnan(delta) and "nan for the device" in problem


def test_calibrate_bench_and_parity_agree_on_the_same_rows(logits: dict[str, np.ndarray]) -> None:
    """The same rows through calibrate's agreement(), bench's gate and parity's logits / labels levels."""
    from pairedge.apps.bench.accuracy import Gate, score_variant
    from pairedge.calibration.infer import agreement
    from pairedge.compare.parity.levels import Tolerances, labels_level, logits_level

    z1, z2, c1, c2, truth = (logits[k] for k in ("z1", "z2", "c1", "c2", "truth"))
    ref = _rows(z1, z2)
    # calibrate: stage 1 on every row; stage 2 on the rows the fp32 gate opens (given its stage-1 logits,
    # or, as calibrate's own stage-2 rows come, just those rows)
    cal1 = agreement(1, z1, c1, TAU)
    cal2 = agreement(2, z2, c2, TAU, reference_stage1=z1)
    gated = interact_probability(z1) >= TAU
    assert replace(agreement(2, z2[gated], c2[gated], TAU), scope=cal2.scope) == cal2
    # bench
    bench = score_variant(ref, truth >= 0, truth, (c1, c2), TAU, Gate()).agreement
    # parity
    ident = {"stage1_labels": ["no", "yes"], "labels": ["a", "b", "c"], "norm": {}}
    lab = labels_level(ident, ident, ref, (c1, c2), TAU, truth, Tolerances()).metrics
    lgt = logits_level(ident, ident, ref, (c1, c2), "int8", Tolerances(), TAU).metrics

    assert cal1.agreement == bench["gate"] == lab["gate_agreement"]
    assert cal2.agreement == bench["top1"] == lab["top1_agreement"]
    assert (
        cal1.agreement_excl_near_ties == bench["gate_excl_near_ties"] == lab["gate_agreement_excl_near_ties"]
    )
    assert (
        cal2.agreement_excl_near_ties == bench["top1_excl_near_ties"] == lab["top1_agreement_excl_near_ties"]
    )
    assert (
        cal1.near_tie_disagreements
        == bench["gate_near_tie_disagreements"]
        == lab["gate_near_tie_disagreements"]
        >= 10
    )
    assert (
        cal2.near_tie_disagreements
        == bench["top1_near_tie_disagreements"]
        == lab["top1_near_tie_disagreements"]
        >= 10
    )
    assert cal2.n == bench["top1_rows"] == lab["top1_pairs"] == lgt["stage2_pairs"] == int(gated.sum())
    assert cal1.max_abs == bench["max_abs_logit_error_stage1"] == lgt["stage1"]["max"]
    assert cal2.max_abs == bench["max_abs_logit_error_stage2"] == lgt["stage2"]["max"]
    assert (cal2.p99_abs, cal2.mean_abs) == (lgt["stage2"]["p99"], lgt["stage2"]["mean"])
    assert 0.9 < cal2.agreement < 1.0 and 0.9 < cal1.agreement < 1.0  # the rows really disagree somewhere


def test_the_three_verdicts_agree(logits: dict[str, np.ndarray]) -> None:
    """With the same thresholds, bench's gate and parity's labels level pass or fail together."""
    from pairedge.apps.bench.accuracy import Gate, score_variant
    from pairedge.calibration.infer import agreement
    from pairedge.compare.parity.levels import Tolerances, labels_level

    z1, z2, c1, c2, truth = (logits[k] for k in ("z1", "z2", "c1", "c2", "truth"))
    ref = _rows(z1, z2)
    top1 = agreement(2, z2, c2, TAU, reference_stage1=z1).agreement_excl_near_ties
    gate = agreement(1, z1, c1, TAU).agreement_excl_near_ties
    ident = {"stage1_labels": ["no", "yes"], "labels": ["a", "b", "c"]}
    for minimum in (min(gate, top1) - 1e-9, max(gate, top1) + 1e-9):
        bench = score_variant(
            ref,
            truth >= 0,
            truth,
            (c1, c2),
            TAU,
            Gate(max_mpca_drop=1.0, min_top1_agreement=minimum, min_gate_agreement=minimum),
        )
        parity = labels_level(
            ident,
            ident,
            ref,
            (c1, c2),
            TAU,
            truth,
            Tolerances(gate_agreement=minimum, top1_agreement=minimum),
        )
        assert bench.passed == (parity.status == "PASS") == (minimum <= min(gate, top1))
        assert list(bench.problems) == list(parity.problems)
