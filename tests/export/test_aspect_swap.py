"""The stage-2 box-aspect swap of the default recipe (pairedge.export.aspect_swap)."""

from __future__ import annotations

import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.core.io.featurefile import FeatureData
from pairedge.export.aspect_swap import borrow_standing_aspect

NAMES = ("a_aspect", "a_height", "b_aspect", "b_height", "pair_mean_width", "a_speed")
LABELS = ("walking_together", "standing_together", "sitting_together")


def _rows(n: int = 600, seed: int = 0) -> FeatureData:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    asp_a, asp_b = rng.uniform(0.25, 0.6, n), rng.uniform(0.25, 0.6, n)
    h_a, h_b = rng.uniform(0.05, 0.5, n), rng.uniform(0.05, 0.5, n)
    # mean width over the image width of a 4:3 frame: (aspect * height * H) summed over both, / 2 / W
    width = (asp_a * h_a + asp_b * h_b) / 2 * 0.75
    X = np.stack([asp_a, h_a, asp_b, h_b, width, rng.normal(size=n)], 1)
    return FeatureData.from_arrays(
        X, y, np.array([f"s{i % 7}" for i in range(n)]), LABELS, feature_names=NAMES, stage=2
    )


def test_all_walking_rows_take_a_standing_rows_aspects_and_keep_their_boxes_consistent() -> None:
    data = _rows()
    before = data.X.copy()
    out, changed = borrow_standing_aspect(data, 1.0, seed=3)
    walking, standing = data.y == 0, data.y == 1
    assert changed == int(walking.sum())
    np.testing.assert_array_equal(data.X, before)  # the input is not modified
    np.testing.assert_array_equal(out.X[~walking], before[~walking])  # standing and sitting rows untouched
    donors = {(round(float(a), 6), round(float(b), 6)) for a, b in before[standing][:, [0, 2]]}
    for row in out.X[walking]:
        assert (round(float(row[0]), 6), round(float(row[2]), 6)) in donors  # both sides from one row
    # the pair's mean width follows the new widths; heights and other columns stay
    expect = (out.X[walking, 0] * out.X[walking, 1] + out.X[walking, 2] * out.X[walking, 3]) / 2 * 0.75
    np.testing.assert_allclose(out.X[walking, 4], expect, rtol=1e-5)
    np.testing.assert_array_equal(out.X[:, [1, 3, 5]], before[:, [1, 3, 5]])


def test_a_fraction_changes_that_share_of_walking_rows_the_same_way_for_the_same_seed() -> None:
    data = _rows(3000)
    out, changed = borrow_standing_aspect(data, 0.5, seed=0)
    again, _ = borrow_standing_aspect(data, 0.5, seed=0)
    other, _ = borrow_standing_aspect(data, 0.5, seed=1)
    walking = int((data.y == 0).sum())
    assert 0.45 * walking < changed < 0.55 * walking
    assert int((out.X[:, 0] != data.X[:, 0]).sum()) == changed
    np.testing.assert_array_equal(out.X, again.X)
    assert not np.array_equal(out.X, other.X)
    same, none = borrow_standing_aspect(data, 0.0)
    assert same is data and none == 0


def test_rows_without_the_columns_or_labels_and_bad_fractions_are_refused() -> None:
    data = _rows(50)
    with pytest.raises(InputError, match=r"fraction in \[0, 1\]"):
        borrow_standing_aspect(data, 1.5)
    with pytest.raises(InputError, match="fraction"):
        borrow_standing_aspect(data, float("nan"))
    cad = FeatureData.from_arrays(data.X, data.y, data.groups, ("a", "b", "c"), feature_names=NAMES, stage=2)
    with pytest.raises(InputError, match="walking_together, standing_together"):
        borrow_standing_aspect(cad, 0.5)
    box_only = FeatureData.from_arrays(
        data.X[:, :5], data.y, data.groups, LABELS, feature_names=NAMES[:5][::-1], stage=2
    )
    borrow_standing_aspect(box_only, 0.5)  # every needed column is there, in another order
    with pytest.raises(InputError, match="pair_mean_width"):
        borrow_standing_aspect(
            FeatureData.from_arrays(
                data.X[:, :4], data.y, data.groups, LABELS, feature_names=NAMES[:4], stage=2
            ),
            0.5,
        )
