"""Feature-spec interface: registry, pair enumeration, config handling, integral images."""

from __future__ import annotations

import numpy as np
import pytest
from pairedge.core.errors import InputError, ModelError
from pairedge.core.features import FeatureExtractor, PairFeatures, frame_pairs, get_spec, spec_names
from pairedge.core.features.integral import integral, intersect, pixel_rects, rect_sums, union_sums
from pairedge.core.types import Detections


def test_registry_knows_both_specs_and_refuses_unknown():
    assert set(spec_names()) == {"liang2026", "pairedge"}
    for name in spec_names():
        spec = get_spec(name)
        assert spec.name == name and spec.version
        assert spec.stage1_dim == len(spec.stage1_names) > 0
        assert spec.stage2_dim == len(spec.stage2_names) > 0
        assert len(set(spec.stage1_names)) == spec.stage1_dim
        assert spec.flow_backend in ("farneback", "dis")
        assert isinstance(spec.make_extractor(), FeatureExtractor)
    with pytest.raises(ModelError, match="unknown feature spec 'nope'"):
        get_spec("nope")


def test_make_config_rejects_unknown_keys_and_types():
    spec = get_spec("liang2026")
    with pytest.raises(InputError, match="unknown config keys"):
        spec.make_extractor({"warp": True})
    with pytest.raises(InputError):
        spec.make_extractor(3)


def test_frame_pairs_skips_unusable_and_duplicate_ids():
    boxes = [
        [0, 0, 10, 20],  # id 7
        [5, 5, 10, 20],  # id -1: no identity
        [9, 9, 10, 20],  # id 3
        [np.nan, 0, 10, 20],  # id 4: NaN box
        [1, 1, 0, 20],  # id 5: zero width
        [2, 2, 10, 20],  # id 3 again: duplicate, ignored
        [3, 3, 10, 20],  # id 1
    ]
    dets = Detections.from_arrays(boxes, [7, -1, 3, 4, 5, 3, 1])
    pairs, index = frame_pairs(dets)
    assert pairs.tolist() == [[1, 3], [1, 7], [3, 7]]
    assert index.tolist() == [[6, 2], [6, 0], [2, 0]]
    assert pairs.dtype == np.int64 and index.dtype == np.int64
    assert (pairs[:, 0] < pairs[:, 1]).all()


def test_frame_pairs_counts_and_empty():
    n = 100
    dets = Detections.from_arrays(np.tile([[0, 0, 10, 20]], (n, 1)), np.arange(n)[::-1])
    pairs, index = frame_pairs(dets)
    assert len(pairs) == n * (n - 1) // 2
    assert (pairs[:, 0] < pairs[:, 1]).all()
    np.testing.assert_array_equal(dets.track_ids[index], pairs)
    p0, i0 = frame_pairs(Detections.empty())
    assert p0.shape == (0, 2) and i0.shape == (0, 2)
    assert len(PairFeatures.empty(7, 10)) == 0


@pytest.mark.parametrize("name", ["liang2026", "pairedge"])
def test_extractors_handle_frames_with_fewer_than_two_people(name):
    spec = get_spec(name)
    ex = spec.make_extractor()
    for i, dets in enumerate([Detections.empty(), Detections.from_arrays([[0, 0, 10, 20]], [1])]):
        out = ex.step(dets, 0.1 * i, (64, 48), None, 1.0)
        assert len(out) == 0
        assert out.stage1.shape == (0, spec.stage1_dim) and out.stage2.shape == (0, spec.stage2_dim)


def test_integral_rect_sums_match_direct_sums():
    rng = np.random.default_rng(0)
    img = rng.normal(size=(17, 23, 3))
    table = integral([img[:, :, c] for c in range(3)])
    rects = pixel_rects(rng.uniform([-5, -5, 0, 0], [25, 20, 15, 15], (50, 4)), 1.0, 23, 17)
    direct = np.array([img[y0:y1, x0:x1].sum(axis=(0, 1)) for x0, y0, x1, y1 in rects])
    np.testing.assert_allclose(rect_sums(table, rects), direct, atol=1e-9)
    ra, rb = rects[:25], rects[25:]
    sums, counts = union_sums(table, ra, rb)
    for k in range(25):
        mask = np.zeros((17, 23), bool)
        for x0, y0, x1, y1 in (ra[k], rb[k]):
            mask[y0:y1, x0:x1] = True
        assert counts[k] == mask.sum()
        np.testing.assert_allclose(sums[k], img[mask].sum(axis=0), atol=1e-9)
    assert (intersect(ra, rb)[:, 2] >= intersect(ra, rb)[:, 0]).all()
