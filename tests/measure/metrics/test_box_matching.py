"""Box matching (MOT convention): hand-computed frames, the exact optimum against scipy, refusals."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.measure.metrics.box_matching import iou_matrix, match_boxes, max_weight_assignment


def _strip(x0: float, x1: float) -> list[float]:
    """A box 10 px tall over [x0, x1] (IoU of two such boxes = the 1-D interval IoU)."""
    return [x0, 0.0, x1 - x0, 10.0]


def test_iou_by_hand() -> None:
    iou = iou_matrix(np.array([_strip(0, 9)]), np.array([_strip(0, 10), _strip(2, 11), _strip(20, 30)]))
    np.testing.assert_allclose(iou, [[9 / 10, 7 / 11, 0.0]])


def test_hungarian_beats_greedy() -> None:
    # A: 0.9 with T1, 7/11 = 0.636 with T2; B: 7/13 = 0.538 with T1, 5/14 = 0.357 with T2 (forbidden).
    # Greedy takes A-T1 first and leaves B alone (1 match); the optimum is A-T2 + B-T1 (2 matches, 1.175).
    pred = np.array([_strip(0, 9), _strip(-3, 7)])
    truth = np.array([_strip(0, 10), _strip(2, 11)])
    np.testing.assert_allclose(iou_matrix(pred, truth), [[0.9, 7 / 11], [7 / 13, 5 / 14]])
    assert match_boxes(pred, truth).tolist() == [1, 0]


def test_threshold_is_inclusive_and_forbids_below() -> None:
    truth = np.array([_strip(0, 10)])
    assert match_boxes(np.array([_strip(0, 5)]), truth).tolist() == [0]  # IoU exactly 0.5
    assert match_boxes(np.array([_strip(0, 4.9)]), truth).tolist() == [-1]


def test_ties_go_in_index_order() -> None:
    same = _strip(0, 10)
    pred = np.array([same, same])
    truth = np.array([same, same])
    assert match_boxes(pred, truth).tolist() == [0, 1]
    # one true box, two identical predictions: the first prediction gets it
    assert match_boxes(pred, truth[:1]).tolist() == [0, -1]
    assert match_boxes(pred[:1], truth).tolist() == [0]


def test_empty_frames() -> None:
    empty = np.zeros((0, 4))
    assert match_boxes(empty, np.array([_strip(0, 10)])).tolist() == []
    assert match_boxes(np.array([_strip(0, 10)]), empty).tolist() == [-1]
    assert match_boxes(empty, empty).tolist() == []


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_boxes_refused(bad: float) -> None:
    with pytest.raises(InputError, match="finite"):
        match_boxes(np.array([[0.0, 0.0, bad, 10.0]]), np.array([_strip(0, 10)]))
    with pytest.raises(InputError, match="finite"):
        match_boxes(np.array([_strip(0, 10)]), np.array([[bad, 0.0, 1.0, 10.0]]))


def test_bad_shapes_and_thresholds_refused() -> None:
    with pytest.raises(InputError, match="shape"):
        match_boxes(np.zeros((2, 3)), np.zeros((1, 4)))
    with pytest.raises(InputError, match="width and height"):
        match_boxes(np.array([[0.0, 0.0, -1.0, 1.0]]), np.zeros((1, 4)))
    with pytest.raises(InputError, match="min_iou"):
        match_boxes(np.zeros((1, 4)), np.zeros((1, 4)), min_iou=0.0)


def _brute_force(w: np.ndarray) -> float:
    n, m = w.shape
    if n > m:
        return _brute_force(w.T)
    return max(sum(w[i, c] for i, c in enumerate(cols)) for cols in itertools.permutations(range(m), n))


@pytest.mark.parametrize("seed", range(40))
def test_assignment_is_optimal(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    w = rng.random((n, m)) * (rng.random((n, m)) < 0.7)
    if seed % 5 == 0:
        w = np.round(w, 1)  # many ties
    rows, cols = max_weight_assignment(w)
    assert (
        len(rows) == min(n, m)
        and len(set(rows.tolist())) == len(rows)
        and len(set(cols.tolist())) == len(cols)
    )
    assert w[rows, cols].sum() == pytest.approx(_brute_force(w))


def test_against_scipy_on_large_frames() -> None:
    scipy_opt = pytest.importorskip("scipy.optimize")
    rng = np.random.default_rng(7)
    for n, m in ((30, 40), (40, 30), (60, 60)):
        w = rng.random((n, m))
        rows, cols = max_weight_assignment(w)
        r2, c2 = scipy_opt.linear_sum_assignment(w, maximize=True)
        assert w[rows, cols].sum() == pytest.approx(w[r2, c2].sum())
