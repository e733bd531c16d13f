"""The one decision rule (``pairedge.runtime.decisions``) against hand-computed cases, and the comparator
deciding through it."""

from __future__ import annotations

import numpy as np
from pairedge.compare.comparator import DecisionRule
from pairedge.runtime.decisions import NO_LABEL, gate_open, gated_labels, interact_probability, top1


def test_interact_probability_is_the_sigmoid_of_the_logit_difference() -> None:
    z = np.array([[0.0, 0.0], [0.0, 2.0], [3.0, 1.0]], np.float32)
    expected = 1.0 / (1.0 + np.exp(-np.array([0.0, 2.0, -2.0])))
    np.testing.assert_allclose(interact_probability(z), expected, rtol=1e-6)
    np.testing.assert_allclose(
        interact_probability(np.array([[0.0], [1.0]])), [0.5, 1 / (1 + np.exp(-1.0))], rtol=1e-6
    )
    assert interact_probability(np.array([[0.0, -1e4]])).tolist() == [0.0]  # no overflow warning, exact 0


def test_gate_opens_at_tau_and_top1_takes_the_first_of_a_tie() -> None:
    assert gate_open(np.array([0.49, 0.5, 0.51]), 0.5).tolist() == [False, True, True]
    assert gate_open(np.array([0.3, 0.3]), np.array([0.2, 0.4])).tolist() == [True, False]
    assert top1(np.array([[1.0, 2.0, 2.0], [5.0, 0.0, 5.0]])).tolist() == [1, 0]


def test_gated_labels_and_the_comparator_decide_alike() -> None:
    rng = np.random.default_rng(0)
    z1, z2 = rng.normal(size=(200, 2)).astype(np.float32), rng.normal(size=(200, 3)).astype(np.float32)
    labels = gated_labels(z1, z2, 0.6)
    rule = DecisionRule(tau=0.6)
    gate = rule.decisions(1, z1).astype(bool)
    assert gate.any() and not gate.all()
    np.testing.assert_array_equal(labels, np.where(gate, rule.decisions(2, z2), NO_LABEL))
    p = 1.0 / (1.0 + np.exp(-(z1[:, 1] - z1[:, 0]).astype(np.float64)))
    np.testing.assert_array_equal(labels >= 0, p >= 0.6)  # the hand formula
