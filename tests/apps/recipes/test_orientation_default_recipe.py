"""The default-model recipe's pieces added for real video: stage-1 threshold calibration and extra presets."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
from pairedge.apps.recipes.default_model import calibrate_threshold, concat_rows  # noqa: E402
from pairedge.core.io.featurefile import FeatureData  # noqa: E402


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


def test_constrained_threshold_stops_where_another_preset_would_lose_more_than_max_drop() -> None:
    from pairedge.apps.recipes.default_model import constrained_threshold

    # surveillance: positives at 0.8, many negatives at 0.6 -> F1 wants a threshold above 0.6;
    # static: positives at 0.62 (a threshold above 0.62 loses all of them), negatives at 0.2
    p = np.array([0.8] * 10 + [0.6] * 40 + [0.62] * 10 + [0.2] * 10)
    y = np.array([1] * 10 + [0] * 40 + [1] * 10 + [0] * 10)
    presets = np.array(["surveillance"] * 50 + ["static"] * 20)
    tau, info = constrained_threshold(p, y, presets, 1.0, "surveillance", 0.01)
    assert 0.6 < tau <= 0.62 and info["precision"] == 1.0 and "surveillance" in info["rule"]
    free, _ = constrained_threshold(p, y, presets, 1.0, "surveillance", 1.0)  # no constraint
    assert free == pytest.approx(0.61)  # the first threshold with precision 1 and recall 1
    only, _ = constrained_threshold(p[:50], y[:50], presets[:50], 1.0, "surveillance", 0.01)
    assert only == pytest.approx(0.61)


def test_sim_rows_can_be_built_in_an_older_spec_layout() -> None:
    from pairedge.export.datasets.sim import SimDataset, sim_feature_sets

    ds = dict(presets=("static",), seeds=(0,), frames=6, stride=2, task="stage1")
    v1 = sim_feature_sets("pairedge", SimDataset(**ds, spec_version="1"))["stage1"]
    now = sim_feature_sets("pairedge", SimDataset(**ds))["stage1"]
    assert v1.feature_spec_version == "1" and v1.X.shape[1] == 25
    assert now.X.shape[1] == 31 and len(v1.y) == len(now.y) > 0
    np.testing.assert_array_equal(v1.y, now.y)


def test_link_settings_choose_on_validation_clips_through_the_pipeline() -> None:
    """The recipe's confirmation time and operating points come from pipeline runs of the built folder."""
    from pairedge.apps.recipes.default_model import link_settings
    from pairedge.core.bundled import RECIPE, default_model_dir

    recipe = {
        **RECIPE,
        "confirm": {"seeds": "2000", "grid": [0.0, 0.2], "frames": 12},
        "stage1": {
            **RECIPE["stage1"],
            "operating_points": {
                "surveillance": {"preset": "surveillance", "taus": [0.6, 0.7], "min_camera_height": 1.3}
            },
        },
    }
    extra, record = link_settings(default_model_dir(), recipe)
    assert extra["confirm_s"] in (0.0, 0.2) and extra["confirm_s"] == record["confirm_s"]
    assert [r["confirm_s"] for r in record["validation"]] == [0.0, 0.2]
    best = max(record["validation"], key=lambda r: (round(r["mean_f1"], 6), -r["confirm_s"]))
    assert best["confirm_s"] == extra["confirm_s"]
    point = extra["operating_points"]["surveillance"]
    assert point["p_interact"] in (0.6, 0.7) and point["min_camera_height"] == 1.3
    assert len(record["operating_points"]["surveillance"]["validation"]) == 4
