"""Stage-2 classification metrics of the pairwise protocol, all derived from one confusion matrix.

One ``np.bincount`` over ``y_true * C + y_pred`` gives the (C, C) confusion matrix; accuracy, both MPCA
variants, macro-F1 and the per-class table are a few operations on that (C, C) array, so scoring 10 million
predictions costs little more than the bincount itself.

Definitions (SPEC.md §7 "pairwise", Liang et al. 2026, eq. 14), with TP_c the diagonal, N_c = TP_c + FN_c
the ground-truth count (support) of class c and TP_c + FP_c the number of predictions of class c:

- ``accuracy`` = sum_c TP_c / N.
- ``mpca`` = mean of TP_c / N_c over the classes **present** in the ground truth (N_c > 0). This is
  scikit-learn's ``recall_score(average="macro", labels=<classes present in y_true>)``.
- ``mpca_over_all_classes`` = (sum of TP_c / N_c over present classes) / C: the published scoring snippet's
  formula, where an absent class contributes 0. Equal to ``mpca`` when every class occurs in the ground truth.
- ``macro_f1`` = mean over **all** C classes of 2 P_c R_c / (P_c + R_c) with P_c = TP_c / (TP_c + FP_c)
  and R_c = TP_c / N_c, 0 when undefined; scikit-learn's
  ``f1_score(average="macro", labels=range(C), zero_division=0)``. (The published snippet computes P_c as
  TP_c / N_c, i.e. the recall, so its "macro-F1" equals its MPCA; pairedge uses the paper's formula.)
- ``macro_f1_present`` = the same mean over the classes that occur in the ground truth or the predictions
  (``-1`` is not a class): ``f1_score(average="macro", labels=<those classes>, zero_division=0)``. This equals
  scikit-learn's default ``f1_score(average="macro", zero_division=0)`` only when no prediction is ``-1``
  (scikit-learn would count ``-1`` as one more class with F1 0). A class absent from both scores 0 in
  ``macro_f1`` (so a perfect prediction on a test set with 2 of 7 classes gets 0.29); report both.

A prediction of ``-1`` means "no prediction" (a ground-truth pair the model never labelled): it counts as
a wrong answer for its true class (an FN) and as no class's FP, and is reported per class as ``missing``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pairedge.core.errors import InputError

#: Elements per chunk of the confusion pass (two int64 chunks and the key buffer stay in L2 cache).
_CHUNK = 1 << 16


@dataclass(frozen=True, eq=False)
class PairwiseMetrics:
    """Classification metrics over N ground-truth pairs and C classes.

    Attributes:
        labels: (C,) class names (``"0"``, ``"1"``, ... when not given).
        n: number of scored ground-truth samples N.
        n_missing: samples with no prediction (``y_pred == -1``), counted wrong.
        accuracy: correct / N (NaN when N = 0).
        mpca: mean per-class accuracy over classes present in the ground truth (NaN when N = 0).
        mpca_over_all_classes: sum of per-class accuracy over present classes, divided by C (snippet formula).
        macro_f1: mean over all C classes of the per-class F1 (0 for undefined classes; NaN when N = 0).
        macro_f1_present: mean per-class F1 over classes in the ground truth or the predictions.
        precision, recall, f1: (C,) float64 per class, TP/(TP+FP), TP/(TP+FN), F1; 0 where undefined.
        support: (C,) int64 ground-truth count N_c per class (missing predictions included).
        predicted: (C,) int64 number of predictions of each class (TP + FP).
        missing: (C,) int64 per true class, how many samples had no prediction.
        confusion: (C, C) int64, rows = ground truth, columns = prediction (missing predictions excluded).
    """

    labels: tuple[str, ...]
    n: int
    n_missing: int
    accuracy: float
    mpca: float
    mpca_over_all_classes: float
    macro_f1: float
    macro_f1_present: float
    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray
    support: np.ndarray
    predicted: np.ndarray
    missing: np.ndarray
    confusion: np.ndarray

    @property
    def num_classes(self) -> int:
        return len(self.labels)


def classification_metrics(
    y_true: np.ndarray | Sequence[int],
    y_pred: np.ndarray | Sequence[int],
    num_classes: int,
    labels: Sequence[str] | None = None,
) -> PairwiseMetrics:
    """Score predicted class ids against ground-truth class ids.

    Args:
        y_true: (N,) integer class ids in ``[0, C)`` (floats are accepted when finite and integral).
        y_pred: (N,) integer class ids in ``[0, C)``, or -1 for "no prediction" (counted wrong).
        num_classes: C.
        labels: optional (C,) class names for tables.

    Returns:
        :class:`PairwiseMetrics`.

    Raises:
        InputError: shapes differ, a value is NaN / out of range / not an integer, or ``labels`` has the
            wrong length.
    """
    c = _check_num_classes(num_classes)
    names = _check_names(labels, c)
    truth = _as_class_ids(y_true, "y_true", c)
    pred = _as_class_ids(y_pred, "y_pred", c)
    if truth.shape != pred.shape:
        raise InputError(
            f"y_true and y_pred must have the same length, got {len(truth)} and {len(pred)}; "
            "fix by passing one prediction per ground-truth sample (-1 where there is none)"
        )
    confusion, missing = _confusion(truth, pred, c)
    return _from_confusion(confusion, missing, names)


def metrics_from_confusion(
    confusion: np.ndarray, missing: np.ndarray | None = None, labels: Sequence[str] | None = None
) -> PairwiseMetrics:
    """Metrics from an accumulated (C, C) confusion matrix (rows = truth) and optional (C,) missing counts."""
    conf = np.asarray(confusion)
    if conf.ndim != 2 or conf.shape[0] != conf.shape[1] or conf.shape[0] == 0:
        raise InputError(f"confusion: expected a non-empty (C, C) matrix, got shape {conf.shape}")
    if conf.dtype.kind not in "iu" or (conf < 0).any():
        raise InputError("confusion: expected non-negative integer counts")
    c = conf.shape[0]
    miss = np.zeros(c, np.int64) if missing is None else np.asarray(missing, dtype=np.int64).reshape(-1)
    if miss.shape != (c,) or (miss < 0).any():
        raise InputError(f"missing: expected ({c},) non-negative counts, got shape {miss.shape}")
    return _from_confusion(conf.astype(np.int64), miss, _check_names(labels, c))


def _check_num_classes(num_classes: int) -> int:
    if isinstance(num_classes, bool) or not isinstance(num_classes, int | np.integer) or num_classes < 1:
        raise InputError(f"num_classes: expected a positive integer, got {num_classes!r}")
    return int(num_classes)


def _check_names(labels: Sequence[str] | None, c: int) -> tuple[str, ...]:
    if labels is None:
        return tuple(str(i) for i in range(c))
    names = tuple(str(x) for x in labels)
    if len(names) != c:
        raise InputError(f"labels: expected {c} class names (one per class), got {len(names)}")
    return names


def _as_class_ids(values: np.ndarray | Sequence[int], name: str, c: int) -> np.ndarray:
    """Check shape and dtype and return ``values`` as (N,) int64 (no copy when it already is one).

    The range of the ids is checked in :func:`_confusion`, chunk by chunk, while the data is in cache.
    """
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InputError(f"{name}: expected a 1-D array of class ids, got shape {arr.shape}")
    kind = arr.dtype.kind
    if kind == "f":
        bad = ~np.isfinite(arr)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"{name}[{i}] is {arr[i]}; expected a finite integer class id")
        frac = arr != np.floor(arr)
        if frac.any():
            i = int(np.flatnonzero(frac)[0])
            raise InputError(f"{name}[{i}] is {arr[i]}; expected an integer class id")
    elif kind not in "iub":
        raise InputError(
            f"{name}: expected integer class ids, got dtype {arr.dtype}; "
            "fix by mapping class names to ids with LabelSet.index"
        )
    if arr.dtype != np.int64:
        if kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
            raise InputError(f"{name}: class id {arr.max()} out of range [0, {c})")
        arr = arr.astype(np.int64)
    return arr


def _range_error(arr: np.ndarray, name: str, c: int, lowest: int) -> InputError:
    """The error for the first value of ``arr`` outside ``[lowest, c)``."""
    i = int(np.flatnonzero((arr < lowest) | (arr >= c))[0])
    allowed = f"[0, {c})" + (" or -1 for no prediction" if lowest < 0 else "")
    return InputError(f"{name}[{i}] = {arr[i]} is out of range; expected a class id in {allowed}")


def _confusion(truth: np.ndarray, pred: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
    """(C, C) confusion and (C,) missing counts from int64 ids, range-checked on the way.

    One pass over the data in cache-sized chunks: check the range of each chunk, build its key
    ``truth * (C + 1) + pred + 1`` (column 0 = no prediction) in a reused buffer, and bincount it. Working
    chunk by chunk keeps the data in cache, so the whole costs about two bincount passes over the arrays.
    """
    m = c + 1
    counts = np.zeros(c * m, np.int64)
    buf = np.empty(min(_CHUNK, len(truth)), np.int64)
    for start in range(0, len(truth), _CHUNK):
        t, p = truth[start : start + _CHUNK], pred[start : start + _CHUNK]
        if t.min() < 0 or t.max() >= c:
            raise _range_error(truth, "y_true", c, 0)
        if p.min() < -1 or p.max() >= c:
            raise _range_error(pred, "y_pred", c, -1)
        key = buf[: len(t)]
        np.multiply(t, m, out=key)
        key += p
        key += 1
        counts += np.bincount(key, minlength=c * m)
    full = counts.reshape(c, m)
    return full[:, 1:].copy(), full[:, 0].copy()


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Elementwise num / den as float64, 0 where den == 0."""
    out = np.zeros(np.shape(num), np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _from_confusion(conf: np.ndarray, missing: np.ndarray, names: tuple[str, ...]) -> PairwiseMetrics:
    c = conf.shape[0]
    tp = np.diagonal(conf).astype(np.int64)
    support = conf.sum(axis=1) + missing
    predicted = conf.sum(axis=0)
    n = int(support.sum())
    precision = _safe_div(tp, predicted)
    recall = _safe_div(tp, support)
    # 2PR/(P+R) == 2TP/(N_c + TP + FP); 0 when TP = 0 (including the undefined cases)
    f1 = _safe_div(2 * tp, support + predicted)
    present = support > 0
    if n == 0:
        accuracy = mpca = mpca_all = macro_f1 = macro_f1_present = float("nan")
    else:
        accuracy = float(tp.sum() / n)
        mpca = float(recall[present].mean())
        mpca_all = float(recall[present].sum() / c)
        macro_f1 = float(f1.mean())
        macro_f1_present = float(f1[present | (predicted > 0)].mean())
    return PairwiseMetrics(
        labels=names,
        n=n,
        n_missing=int(missing.sum()),
        accuracy=accuracy,
        mpca=mpca,
        mpca_over_all_classes=mpca_all,
        macro_f1=macro_f1,
        macro_f1_present=macro_f1_present,
        precision=precision,
        recall=recall,
        f1=f1,
        support=support,
        predicted=predicted,
        missing=missing,
        confusion=conf,
    )
