"""Pairwise classification metrics against scikit-learn and the published scoring snippet."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pairedge.core.errors import InputError
from pairedge.measure.metrics.pairwise import classification_metrics, metrics_from_confusion
from sklearn.metrics import (
    accuracy_score,
    confusion_matrix,
    f1_score,
    precision_recall_fscore_support,
    recall_score,
)

# scikit-learn warns when one label occurs; our calls pass labels= explicitly where it matters
pytestmark = pytest.mark.filterwarnings("ignore:A single label was found:UserWarning")


@st.composite
def label_arrays(draw: st.DrawFn, allow_missing: bool = False) -> tuple[np.ndarray, np.ndarray, int]:
    c = draw(st.integers(1, 8))
    n = draw(st.integers(1, 120))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    # skewed class frequencies so that some classes are often absent from truth or prediction
    weights = rng.dirichlet(np.full(c, 0.5))
    y_true = rng.choice(c, size=n, p=weights)
    agree = rng.random(n) < draw(st.floats(0.0, 1.0))
    y_pred = np.where(agree, y_true, rng.integers(0, c, n))
    if allow_missing:
        y_pred = np.where(rng.random(n) < 0.2, -1, y_pred)
    return y_true.astype(np.int64), y_pred.astype(np.int64), c


def _snippet(preds: list[int], golds: list[int], c: int) -> tuple[float, float, float]:
    """The published scoring snippet for this protocol, verbatim in logic (P_c computed as TP_c / N_c)."""
    n = len(golds)
    accuracy = sum(1 for p, g in zip(preds, golds, strict=True) if p == g) / n
    tp = [0] * c
    cnt = [0] * c
    for p, g in zip(preds, golds, strict=True):
        cnt[g] += 1
        if p == g:
            tp[g] += 1
    mpca = sum(tp[k] / cnt[k] for k in range(c) if cnt[k] > 0) / c
    macro_f1 = 0.0
    for k in range(c):
        p_c = tp[k] / (tp[k] + (cnt[k] - tp[k])) if (tp[k] + (cnt[k] - tp[k])) > 0 else 0
        r_c = tp[k] / cnt[k] if cnt[k] > 0 else 0
        macro_f1 += 2 * p_c * r_c / (p_c + r_c) if (p_c + r_c) > 0 else 0
    return accuracy, mpca, macro_f1 / c


@settings(max_examples=300, deadline=None)
@given(label_arrays())
def test_matches_scikit_learn(case: tuple[np.ndarray, np.ndarray, int]) -> None:
    y_true, y_pred, c = case
    m = classification_metrics(y_true, y_pred, c)
    present = np.unique(y_true)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert m.accuracy == pytest.approx(accuracy_score(y_true, y_pred), abs=1e-12)
        assert m.mpca == pytest.approx(
            recall_score(y_true, y_pred, labels=present, average="macro"), abs=1e-12
        )
        f1 = f1_score(y_true, y_pred, labels=range(c), average="macro", zero_division=0)
        assert m.macro_f1 == pytest.approx(f1, abs=1e-12)
        # scikit-learn's default label set: the classes in y_true or y_pred
        assert m.macro_f1_present == pytest.approx(
            f1_score(y_true, y_pred, average="macro", zero_division=0), abs=1e-12
        )
        p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=range(c), zero_division=0)
    np.testing.assert_allclose(m.precision, p, atol=1e-12)
    np.testing.assert_allclose(m.recall, r, atol=1e-12)
    np.testing.assert_allclose(m.f1, f, atol=1e-12)
    np.testing.assert_array_equal(m.support, s)
    np.testing.assert_array_equal(m.confusion, confusion_matrix(y_true, y_pred, labels=range(c)))
    assert m.confusion.dtype == np.int64 and m.confusion.shape == (c, c)


@settings(max_examples=200, deadline=None)
@given(label_arrays())
def test_mpca_over_all_classes_is_the_published_snippet(case: tuple[np.ndarray, np.ndarray, int]) -> None:
    y_true, y_pred, c = case
    m = classification_metrics(y_true, y_pred, c)
    accuracy, mpca_snippet, f1_snippet = _snippet(y_pred.tolist(), y_true.tolist(), c)
    assert m.accuracy == pytest.approx(accuracy, abs=1e-12)
    assert m.mpca_over_all_classes == pytest.approx(mpca_snippet, abs=1e-12)
    # the snippet's "precision" is the recall, so its macro-F1 collapses to its MPCA
    assert f1_snippet == pytest.approx(mpca_snippet, abs=1e-12)
    if len(np.unique(y_true)) == c:
        assert m.mpca == pytest.approx(m.mpca_over_all_classes, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(label_arrays(allow_missing=True))
def test_missing_predictions_are_wrong_and_no_false_positive(
    case: tuple[np.ndarray, np.ndarray, int],
) -> None:
    y_true, y_pred, c = case
    m = classification_metrics(y_true, y_pred, c)
    as_other = np.where(y_pred < 0, c, y_pred)  # an extra label outside range(C) = wrong for everyone
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert m.accuracy == pytest.approx(accuracy_score(y_true, as_other), abs=1e-12)
        f1 = f1_score(y_true, as_other, labels=range(c), average="macro", zero_division=0)
        assert m.macro_f1 == pytest.approx(f1, abs=1e-12)
        p, r, _, s = precision_recall_fscore_support(y_true, as_other, labels=range(c), zero_division=0)
    np.testing.assert_allclose(m.precision, p, atol=1e-12)
    np.testing.assert_allclose(m.recall, r, atol=1e-12)
    np.testing.assert_array_equal(m.support, s)
    assert m.n_missing == int((y_pred < 0).sum()) == int(m.missing.sum())
    assert int(m.confusion.sum()) + m.n_missing == len(y_true)


def test_hand_computed_case_and_snippet_difference() -> None:
    # C = 3, class 2 absent from the truth; one wrong prediction into class 2
    y_true = [0, 0, 0, 1, 1]
    y_pred = [0, 0, 2, 1, 0]
    m = classification_metrics(y_true, y_pred, 3, labels=["walk", "stand", "sit"])
    assert m.accuracy == pytest.approx(3 / 5)
    assert m.mpca == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert m.mpca_over_all_classes == pytest.approx((2 / 3 + 1 / 2) / 3)
    # P_walk = 2/3 (TP 2, FP 1), R_walk = 2/3; P_stand = 1, R_stand = 1/2; sit: 0
    f1_walk, f1_stand = 2 / 3, 2 * 1 * 0.5 / 1.5
    assert m.macro_f1 == pytest.approx((f1_walk + f1_stand + 0) / 3)
    assert m.labels == ("walk", "stand", "sit")
    np.testing.assert_array_equal(m.predicted, [3, 1, 1])


def test_accepts_integral_floats_and_bools() -> None:
    a = classification_metrics(np.array([0.0, 1.0, 1.0]), np.array([0, 1, 0]), 2)
    b = classification_metrics(np.array([False, True, True]), np.array([0, 1, 0], np.int8), 2)
    assert a.accuracy == b.accuracy == pytest.approx(2 / 3)


def test_empty_input_is_undefined_not_an_error() -> None:
    m = classification_metrics(np.zeros(0, np.int64), np.zeros(0, np.int64), 3)
    assert np.isnan(m.accuracy) and np.isnan(m.mpca) and np.isnan(m.macro_f1)
    assert m.confusion.shape == (3, 3)


def test_from_confusion_equals_direct() -> None:
    rng = np.random.default_rng(0)
    y_true, y_pred = rng.integers(0, 5, 1000), rng.integers(-1, 5, 1000)
    direct = classification_metrics(y_true, y_pred, 5)
    again = metrics_from_confusion(direct.confusion, direct.missing)
    assert again.macro_f1 == direct.macro_f1 and again.mpca == direct.mpca
    assert again.accuracy == direct.accuracy


@pytest.mark.parametrize(
    ("y_true", "y_pred", "c", "message"),
    [
        ([0, 1, 2], [0, 1], 3, "same length"),
        ([0, 1, float("nan")], [0, 1, 2], 3, "finite"),
        ([0, 1, 1.5], [0, 1, 2], 3, "integer class id"),
        ([0, 1, 3], [0, 1, 2], 3, "y_true[2] = 3 is out of range"),
        ([0, 1, 2], [0, 1, 7], 3, "y_pred[2] = 7 is out of range"),
        ([0, -1, 2], [0, 1, 2], 3, "y_true[1] = -1"),
        ([0, 1, 2], [0, -2, 2], 3, "y_pred[1] = -2"),
        (["walk", "stand"], [0, 1], 3, "integer class ids"),
        ([[0, 1]], [[0, 1]], 3, "1-D"),
        ([0, 1], [0, 1], 0, "num_classes"),
    ],
)
def test_bad_input_raises_input_error(y_true: object, y_pred: object, c: int, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        classification_metrics(y_true, y_pred, c)  # type: ignore[arg-type]


def test_wrong_number_of_label_names() -> None:
    with pytest.raises(InputError, match="expected 3 class names"):
        classification_metrics([0, 1], [0, 1], 3, labels=["a", "b"])


def test_bad_confusion_matrix() -> None:
    with pytest.raises(InputError, match=r"\(C, C\)"):
        metrics_from_confusion(np.zeros((2, 3), np.int64))
    with pytest.raises(InputError, match="non-negative"):
        metrics_from_confusion(np.array([[1, -1], [0, 2]]))


def test_out_of_range_in_a_later_chunk_names_the_index() -> None:
    y_true = np.zeros(300_000, np.int64)
    y_pred = np.zeros(300_000, np.int64)
    y_pred[200_001] = 9
    with pytest.raises(InputError, match=re.escape("y_pred[200001] = 9 is out of range")):
        classification_metrics(y_true, y_pred, 3)
    y_pred[200_001] = -1
    m = classification_metrics(y_true, y_pred, 3)
    assert m.n_missing == 1 and m.confusion[0, 0] == 299_999


def test_macro_f1_present_with_missing_predictions_differs_from_sklearn_default() -> None:
    """docs/formats.md: -1 (no prediction) is not a class, so scikit-learn's default label set (which adds
    -1 as a class with F1 0) agrees only without missing predictions."""
    y_true = np.array([0, 0, 1, 1, 2], np.int64)
    y_pred = np.array([0, -1, 1, 1, 2], np.int64)
    m = classification_metrics(y_true, y_pred, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        without_missing = f1_score(y_true, y_pred, labels=[0, 1, 2], average="macro", zero_division=0)
        sklearn_default = f1_score(y_true, y_pred, average="macro", zero_division=0)
    assert m.macro_f1_present == pytest.approx(without_missing, abs=1e-12)
    assert m.macro_f1_present == pytest.approx((2 / 3 + 1 + 1) / 3, abs=1e-12)
    assert sklearn_default == pytest.approx((0 + 2 / 3 + 1 + 1) / 4, abs=1e-12)
