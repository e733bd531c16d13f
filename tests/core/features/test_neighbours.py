"""The fast neighbour counts (float32 filter + exact fallback) equal their float64 definition exactly."""

from __future__ import annotations

import numpy as np
import pytest
from pairedge.core.features import egomotion, neighbours
from pairedge.core.features.neighbours import INLINE, NEAR, neighbours_reference


def _pairs(centres: np.ndarray, heights: np.ndarray):
    ia, ib = np.triu_indices(len(centres), k=1)
    return centres[ia], centres[ib] - centres[ia], (heights[ia] + heights[ib]) / 2


@pytest.fixture(autouse=True)
def _filter_always(monkeypatch):
    """Every frame through the float32 filter (small ones otherwise take the definition directly)."""
    monkeypatch.setattr(neighbours, "DIRECT_MAX", 0)


def _assert_same(centres: np.ndarray, heights: np.ndarray) -> None:
    ca, delta, mean_h = _pairs(centres, heights)
    fast = neighbours.neighbours(ca, delta, mean_h, centres, None)
    ref = neighbours_reference(ca, delta, mean_h, centres, None)
    for f, r in zip(fast, ref, strict=True):
        assert f.dtype == np.float64
        np.testing.assert_array_equal(f, r)


def test_small_frames_take_the_definition_and_large_ones_the_filter(monkeypatch):
    monkeypatch.setattr(neighbours, "DIRECT_MAX", 16384)
    calls: list[int] = []
    real = neighbours.neighbours_reference

    def spy(centre_a, *args):
        calls.append(len(centre_a))
        return real(centre_a, *args)

    monkeypatch.setattr(neighbours, "neighbours_reference", spy)
    rng = np.random.default_rng(1)
    for n in (10, 60):
        centres, heights = rng.uniform(0, 640, (n, 2)), rng.uniform(40, 160, n)
        ca, delta, mean_h = _pairs(centres, heights)
        neighbours.neighbours(ca, delta, mean_h, centres, None)
    assert calls[0] == 45  # 45 pairs x 10 people: the definition, whole
    assert all(c < 60 * 59 // 2 for c in calls[1:])  # 60 people: the filter (at most a few pairs recomputed)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n", [2, 3, 17, 80])
def test_fast_counts_equal_the_definition_on_random_crowds(seed: int, n: int):
    rng = np.random.default_rng(seed)
    size = rng.choice([100.0, 640.0, 4000.0])
    centres = rng.uniform(0, size, (n, 2))
    heights = rng.uniform(0.02, 0.4, n) * size
    _assert_same(centres, heights)


def test_fast_counts_equal_the_definition_on_boundaries_and_degenerate_pairs():
    """People placed exactly on every threshold (float64), coincident pairs and lattices (many exact ties)."""
    h = 100.0
    a, b = np.array([200.0, 300.0]), np.array([300.0, 300.0])  # half = 0.5 mean heights
    on_edges = [
        (250.0 + NEAR * h, 300.0),  # on the near circle
        (300.0 + 0.25 * h, 300.0),  # along = half + 0.25
        (300.0 + 2.0 * h, 300.0),  # along = half + 2
        (200.0 - 0.25 * h, 300.0 + INLINE * h),  # across = INLINE, along = half + 0.25
        (250.0, 300.0 + NEAR * h),
        (200.0, 300.0),  # on top of A
    ]
    centres = np.array([a, b, *on_edges, (250.0, 300.0)])
    _assert_same(centres, np.full(len(centres), h))
    lattice = np.stack(np.meshgrid(np.arange(8) * 25.0, np.arange(6) * 30.0), -1).reshape(-1, 2)
    _assert_same(lattice, np.full(len(lattice), 50.0))
    _assert_same(np.vstack([lattice, lattice[:5]]), np.full(len(lattice) + 5, 20.0))  # coincident people


def test_fast_counts_block_size_does_not_matter(monkeypatch):
    rng = np.random.default_rng(9)
    centres, heights = rng.uniform(0, 640, (40, 2)), rng.uniform(40, 160, 40)
    ca, delta, mean_h = _pairs(centres, heights)
    whole = neighbours.neighbours(ca, delta, mean_h, centres, None)
    monkeypatch.setattr(neighbours, "CHUNK", 13)
    blocks = neighbours.neighbours(ca, delta, mean_h, centres, None)
    for w, b in zip(whole, blocks, strict=True):
        np.testing.assert_array_equal(w, b)
    assert whole[0].max() > 0 and whole[1].max() > 0


def test_panorama_counts_use_the_definition():
    rng = np.random.default_rng(3)
    centres, heights = rng.uniform(0, 640, (25, 2)), rng.uniform(40, 160, 25)
    ca, delta, mean_h = _pairs(centres, heights)
    fast = neighbours.neighbours(ca, delta, mean_h, centres, 640.0)
    ref = neighbours_reference(ca, delta, mean_h, centres, 640.0)
    for f, r in zip(fast, ref, strict=True):
        np.testing.assert_array_equal(f, r)


def test_background_mask_equals_the_per_point_box_test():
    rng = np.random.default_rng(5)
    xs, ys = np.arange(4, 320, 8), np.arange(4, 240, 8)
    boxes = np.column_stack([rng.uniform(-50, 600, 30), rng.uniform(-50, 450, 30), rng.uniform(5, 120, 30)])
    boxes = np.column_stack([boxes, boxes[:, 2] * 2.5])
    b = boxes * 0.5
    mx, my = b[:, 2] * egomotion.BOX_MARGIN, b[:, 3] * egomotion.BOX_MARGIN
    gx, gy = np.meshgrid(xs, ys)
    px, py = gx[..., None], gy[..., None]
    expected = (
        (px >= b[:, 0] - mx)
        & (px < b[:, 0] + b[:, 2] + mx)
        & (py >= b[:, 1] - my)
        & (py < b[:, 1] + b[:, 3] + my)
    ).any(axis=-1)
    got = egomotion._grid_inside_boxes(xs, ys, boxes, 0.5)
    np.testing.assert_array_equal(got, expected)
    assert 0 < got.sum() < got.size


def test_fast_counts_equal_the_definition_with_non_finite_positions():
    rng = np.random.default_rng(11)
    centres, heights = rng.uniform(0, 300, (12, 2)), rng.uniform(40, 120, 12)
    for bad in (np.nan, np.inf, -np.inf):
        c = centres.copy()
        c[3] = [bad, 100.0]
        ca, delta, mean_h = _pairs(c, heights)
        with np.errstate(invalid="ignore", over="ignore"):
            fast = neighbours.neighbours(ca, delta, mean_h, c, None)
            ref = neighbours_reference(ca, delta, mean_h, c, None)
        for f, r in zip(fast, ref, strict=True):
            np.testing.assert_array_equal(f, r)
        assert fast[0].max() > 0
    empty = neighbours.neighbours(np.zeros((0, 2)), np.zeros((0, 2)), np.zeros(0), centres, None)
    assert [len(e) for e in empty] == [0, 0]
