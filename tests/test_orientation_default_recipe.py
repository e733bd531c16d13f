"""The default-model recipe's pieces added for real video: stage-1 threshold calibration and extra presets."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
from pairedge.datasets.arrays import FeatureData  # noqa: E402
from pairedge.export.default_model import calibrate_threshold, concat_rows  # noqa: E402


def test_calibrated_threshold_trades_recall_for_precision() -> None:
    rng = np.random.default_rng(0)
    y = (rng.random(4000) < 0.2).astype(np.int64)
    p = np.clip(0.55 + 0.2 * y + rng.normal(0, 0.1, len(y)), 0, 1)  # negatives ~0.55: 0.5 lets most through
    tau_half, half = calibrate_threshold(p, y, 0.5)
    tau_one, one = calibrate_threshold(p, y, 1.0)
    assert 0.5 < tau_one <= tau_half <= 0.95
    assert half["precision"] >= one["precision"] and one["recall"] >= half["recall"]
    pred = p >= tau_half
    assert half["precision"] == pytest.approx((pred & (y == 1)).sum() / pred.sum())


def test_concat_rows_keeps_layout() -> None:
    a = FeatureData.from_arrays(np.zeros((2, 3)), [0, 1], ["s-0", "s-0"], ("no", "yes"), stage=1)
    b = FeatureData.from_arrays(np.ones((1, 3)), [1], ["t-0"], ("no", "yes"), stage=1)
    c = concat_rows([a, b])
    assert c.X.shape == (3, 3) and c.groups.tolist() == ["s-0", "s-0", "t-0"] and c.stage == 1
    assert concat_rows([a]) is a
