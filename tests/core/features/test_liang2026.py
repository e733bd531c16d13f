"""liang2026: every formula on hand-computed boxes, wrap on/off, integral pooling == mask reference."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.core.features import get_spec
from pairedge.core.features.integral import pixel_rects
from pairedge.core.features.liang2026 import (
    FARNEBACK_PARAMS,
    STAGE2_NAMES,
    farneback_flow,
    stage1_features,
    stage2_features,
    stage2_features_reference,
    to_gray,
)
from pairedge.core.types import Detections

W, H = 200.0, 120.0
# A: cx 25, cy 50, area 1800. B: cx 64, cy 54, area 1624.
A = np.array([[10.0, 20.0, 30.0, 60.0]])
B = np.array([[50.0, 25.0, 28.0, 58.0]])


def s1(a=A, b=B, wrap=False, width=W):
    return stage1_features(a, b, width, H, wrap=wrap)[0]


def test_stage1_horizontal_gap():
    assert s1()[0] == pytest.approx((39 - (30 + 28) / 2) / 200, abs=1e-6)


def test_stage1_height_ratio_with_released_epsilon():
    assert s1()[1] == pytest.approx(58 / 60, abs=1e-6)
    # min(hA, hB) / max(hA, hB + 1e-6): equal tiny heights give 0.5, not 1 (the released code's quirk)
    tiny = stage1_features([[0, 0, 1, 1e-6]], [[5, 0, 1, 1e-6]], W, H)[0]
    assert tiny[1] == pytest.approx(0.5, abs=1e-5)


def test_stage1_horizontal_distance():
    assert s1()[2] == pytest.approx(39 / 200, abs=1e-6)


def test_stage1_vertical_overlap():
    # rows [20, 80) and [25, 83): overlap 55, over min height 58
    assert s1()[3] == pytest.approx(55 / 58, abs=1e-6)
    disjoint = stage1_features([[0, 0, 10, 10]], [[0, 50, 10, 10]], W, H)[0]
    assert disjoint[3] == 0.0


def test_stage1_area_ratio():
    assert s1()[4] == pytest.approx(1624 / 1800, abs=1e-6)


def test_stage1_centre_distance_over_size():
    assert s1()[5] == pytest.approx(math.hypot(39, 4) / math.sqrt(1800 + 1624), abs=1e-6)


def test_stage1_vertical_distance():
    assert s1()[6] == pytest.approx(4 / 120, abs=1e-6)


def test_stage1_is_symmetric_except_epsilons():
    np.testing.assert_allclose(s1(A, B), s1(B, A), atol=1e-5)


def test_stage1_wrap_around_on_and_off():
    a = np.array([[5.0, 10.0, 10.0, 40.0]])  # cx 10
    b = np.array([[3740.0, 12.0, 10.0, 40.0]])  # cx 3745 on a 3760-wide panorama
    off = stage1_features(a, b, 3760, 480, wrap=False)[0]
    on = stage1_features(a, b, 3760, 480, wrap=True)[0]
    assert off[2] == pytest.approx(3735 / 3760, abs=1e-6)
    assert on[2] == pytest.approx(25 / 3760, abs=1e-6)
    assert on[0] == pytest.approx((25 - 10) / 3760, abs=1e-6)
    assert on[5] == pytest.approx(math.hypot(25, 2) / math.sqrt(800 + 1e-6), abs=1e-6)
    # vertical values do not wrap
    assert on[6] == off[6] == pytest.approx(2 / 480, abs=1e-7)


def test_stage1_degenerate_boxes_are_finite():
    out = stage1_features([[0, 0, 0, 0]], [[0, 0, 0, 0]], W, H)
    assert np.isfinite(out).all()


def const_flow(fx, fy, h=int(H), w=int(W)):
    flow = np.zeros((h, w, 2), np.float32)
    flow[..., 0], flow[..., 1] = fx, fy
    return flow


def test_stage2_geometry_values():
    v = stage2_features(A, B, W, H, flow=None)[0]
    d = math.hypot(39, 4)
    assert v[0] == pytest.approx(d / 59, abs=1e-6)
    assert v[1] == pytest.approx(d / 29, abs=1e-6)
    assert v[5] == pytest.approx((60 / 30 + 58 / 28) / 2, abs=1e-6)
    assert v[6] == pytest.approx(59 / 120, abs=1e-6)
    assert v[7] == pytest.approx((80 + 83) / 2 / 120, abs=1e-6)


def test_stage2_distance_never_wraps():
    a, b = [[5.0, 10.0, 10.0, 40.0]], [[3740.0, 10.0, 10.0, 40.0]]
    v = stage2_features(a, b, 3760, 480)[0]
    assert v[0] == pytest.approx(min(3735 / 40, 10.0), abs=1e-6)  # clamped at 10
    assert v[0] == 10.0


def test_stage2_constant_flow():
    v = stage2_features(A, B, W, H, flow=const_flow(3.0, 4.0))[0]
    mean_area = (1800 + 1624) / 2
    assert v[2] == pytest.approx(5 / mean_area, rel=1e-6)
    assert v[3] == pytest.approx(0.0, abs=1e-7)
    assert v[4] == pytest.approx(4 / 3, rel=1e-6)
    assert v[8] == pytest.approx(1.0, abs=1e-6)


def test_stage2_union_counts_overlap_once():
    # A [0,10)^2, B [5,15)^2: union 175 pixels; |f| = 2 on A's 100 pixels only
    flow = np.zeros((40, 40, 2), np.float32)
    flow[0:10, 0:10, 0] = 2.0
    a, b = [[0.0, 0.0, 10.0, 10.0]], [[5.0, 5.0, 10.0, 10.0]]
    v = stage2_features(a, b, 40, 40, flow=flow)[0]
    mean = 200 / 175
    std = math.sqrt(400 / 175 - mean**2)
    assert v[2] == pytest.approx(mean / 100, rel=1e-6)
    assert v[3] == pytest.approx(std / 100, rel=1e-6)
    assert v[4] == pytest.approx(0.0, abs=1e-7)  # no vertical flow
    assert v[8] == pytest.approx(1.0, abs=1e-6)


def test_stage2_direction_consistency_resultant_and_minimum_count():
    flow = np.zeros((40, 40, 2), np.float32)
    flow[0:10, 0:10, 0] = 2.0  # 100 pixels right
    flow[0:10, 20:25, 0] = -2.0  # 50 pixels left
    a, b = [[0.0, 0.0, 10.0, 10.0]], [[20.0, 0.0, 5.0, 10.0]]
    v = stage2_features(a, b, 40, 40, flow=flow)[0]
    assert v[8] == pytest.approx(50 / 150, abs=1e-6)
    few = np.zeros((40, 40, 2), np.float32)
    few[0, 0:9, 1] = 3.0  # 9 moving pixels < 10 -> 0
    assert stage2_features(a, b, 40, 40, flow=few)[0, 8] == 0.0
    few[0, 9, 1] = 3.0  # 10 moving pixels -> consistent
    assert stage2_features(a, b, 40, 40, flow=few)[0, 8] == pytest.approx(1.0, abs=1e-6)
    slow = np.full((40, 40, 2), 0.5, np.float32)  # |f| = 0.707 <= 1: nothing moves
    assert stage2_features(a, b, 40, 40, flow=slow)[0, 8] == 0.0


def test_stage2_synchrony_is_constant_one():
    rng = np.random.default_rng(3)
    flow = rng.normal(0, 3, (120, 200, 2)).astype(np.float32)
    boxes = rng.uniform([0, 0, 5, 5], [180, 100, 60, 80], (20, 4))
    v = stage2_features(boxes[:10], boxes[10:], W, H, flow=flow)
    assert STAGE2_NAMES[9] == "synchrony_constant"
    assert (v[:, 9] == 1.0).all()


def test_stage2_clamped_and_guarded():
    v = stage2_features([[0, 0, 0, 0]], [[100, 100, 0, 0]], W, H, flow=const_flow(0.0, 0.0))[0]
    assert np.isfinite(v).all()
    assert v.max() <= 10.0 and v.min() >= -10.0
    assert v[0] == 10.0  # d / max(0, 1e-5) clamped


def test_pixel_rects_truncate_like_int_and_clip():
    r = pixel_rects(
        np.array([[2.7, 1.2, 5.6, 3.5], [-3.5, -1.0, 10.0, 4.0], [190.0, 5.0, 30.0, 5.0]]), 1.0, 200, 120
    )
    assert r.tolist() == [[2, 1, 8, 4], [0, 0, 6, 3], [190, 5, 200, 10]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_integral_pooling_equals_mask_reference(seed):
    rng = np.random.default_rng(seed)
    h, w = 90, 130
    flow = rng.normal(0, 2.5, (h, w, 2)).astype(np.float32)
    flow[20:50, 30:70] += np.float32([4.0, -1.0])  # a coherent moving block
    # boxes partly and fully outside the image, overlapping, fractional coordinates
    boxes = rng.uniform([-40, -40, 0.5, 0.5], [w + 10, h + 10, 70, 90], (40, 4))
    ref = stage2_features_reference(boxes[:20], boxes[20:], w, h, flow)
    fast = stage2_features(boxes[:20], boxes[20:], w, h, flow=flow)
    np.testing.assert_allclose(fast, ref, atol=1e-5, rtol=0)


def test_farneback_params_and_gray():
    assert dict(FARNEBACK_PARAMS) == {
        "pyr_scale": 0.5,
        "levels": 3,
        "winsize": 15,
        "iterations": 3,
        "poly_n": 5,
        "poly_sigma": 1.2,
        "flags": 0,
    }
    with pytest.raises(TypeError):
        FARNEBACK_PARAMS["levels"] = 5  # read-only
    bgr = np.zeros((4, 4, 3), np.uint8)
    bgr[..., 0], bgr[..., 1], bgr[..., 2] = 100, 150, 200  # B, G, R
    assert int(to_gray(bgr)[0, 0]) == round(0.114 * 100 + 0.587 * 150 + 0.299 * 200)
    assert to_gray(bgr[..., 0]) is not None and to_gray(bgr[..., 0]).shape == (4, 4)
    with pytest.raises(InputError):
        to_gray(np.zeros((4, 4, 2), np.uint8))


def test_farneback_flow_recovers_a_shift():
    rng = np.random.default_rng(0)
    img = cv2.GaussianBlur(rng.integers(0, 255, (96, 128), dtype=np.uint8), (0, 0), 2.0)
    shifted = np.roll(img, 2, axis=1)
    flow = farneback_flow(img, shifted)
    assert flow.shape == (96, 128, 2) and flow.dtype == np.float32
    assert np.median(flow[20:-20, 20:-20, 0]) == pytest.approx(2.0, abs=0.2)


def test_extractor_step_matches_pure_api_and_wrap_config():
    spec = get_spec("liang2026")
    dets = Detections.from_arrays([[10, 20, 30, 60], [3740, 25, 28, 58], [50, 25, 28, 58]], [5, 2, 9])
    flow = const_flow(1.5, -0.5, 480, 3760)
    plain = spec.make_extractor().step(dets, 0.0, (3760, 480), flow, 1.0)
    wrapped = spec.make_extractor({"wrap": True}).step(dets, 0.0, (3760, 480), flow, 1.0)
    assert plain.pairs.tolist() == [[2, 5], [2, 9], [5, 9]]
    assert plain.index.tolist() == [[1, 0], [1, 2], [0, 2]]
    ba, bb = dets.boxes[plain.index[:, 0]], dets.boxes[plain.index[:, 1]]
    np.testing.assert_array_equal(plain.stage1, stage1_features(ba, bb, 3760, 480))
    np.testing.assert_array_equal(wrapped.stage1, stage1_features(ba, bb, 3760, 480, wrap=True))
    np.testing.assert_array_equal(plain.stage2, wrapped.stage2)
    assert plain.stage1.dtype == np.float32 and plain.stage2.shape == (3, 10)
    assert wrapped.stage1[0, 2] < plain.stage1[0, 2]


def test_extractor_accepts_half_scale_flow_by_resizing():
    spec = get_spec("liang2026")
    dets = Detections.from_arrays([[10, 20, 30, 60], [50, 25, 28, 58]], [0, 1])
    full = spec.make_extractor().step(dets, 0.0, (200, 120), const_flow(2.0, 0.0), 1.0)
    half = spec.make_extractor().step(dets, 0.0, (200, 120), const_flow(1.0, 0.0, 60, 100), 0.5)
    np.testing.assert_allclose(half.stage2, full.stage2, atol=1e-6)
    with pytest.raises(InputError):
        spec.make_extractor().step(dets, 0.0, (200, 120), const_flow(1.0, 0.0, 60, 100), 1.0)


def test_extractor_on_garbage_boxes_and_flow():
    rng = np.random.default_rng(1)
    ex = get_spec("liang2026").make_extractor()
    boxes = rng.uniform(-1e6, 1e6, (15, 4))
    boxes[0] = [np.nan, 0, 10, 10]  # dropped
    boxes[1] = [np.inf, 0, 10, 10]  # dropped
    boxes[2] = [5, 5, -3, 10]  # negative width: dropped
    boxes[3:6] = [[0, 0, 50, 100], [20, 10, 40, 90], [300, 10, 40, 90]]  # sane ones
    flow = rng.normal(0, 3, (120, 200, 2)).astype(np.float32)
    flow[0:50, 0:50] = np.nan
    flow[60:70, 10:30] = np.inf
    out = ex.step(Detections.from_arrays(boxes, np.arange(15)), 0.0, (200, 120), flow, 1.0)
    assert not np.isin(out.index, [0, 1, 2]).any()
    assert np.isfinite(out.stage1).all() and np.isfinite(out.stage2).all()
    assert np.abs(out.stage2).max() <= 10.0
    clean = np.nan_to_num(flow, nan=0.0, posinf=0.0, neginf=0.0)
    ba, bb = boxes[out.index[:, 0]], boxes[out.index[:, 1]]
    np.testing.assert_allclose(out.stage2, stage2_features_reference(ba, bb, 200, 120, clean), atol=1e-5)


def _pil_integer_luma(bgr: np.ndarray) -> np.ndarray:
    b, g, r = (bgr[..., i].astype(np.uint32) for i in range(3))
    return ((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16).astype(np.uint8)


def test_pil_luma_is_exact_on_every_colour():
    from pairedge.core.features.liang2026 import PilLuma

    codes = np.arange(1 << 24, dtype=np.uint32)
    every = (
        np.stack([codes >> 16, (codes >> 8) & 255, codes & 255], -1).astype(np.uint8).reshape(4096, 4096, 3)
    )
    out = np.empty((4096, 4096), np.uint8)
    assert PilLuma()(every, out) is out
    np.testing.assert_array_equal(out, _pil_integer_luma(every))
    # OpenCV's 14-bit luma differs on some colours: the reason this conversion exists
    assert np.count_nonzero(cv2.cvtColor(every, cv2.COLOR_BGR2GRAY) != out) > 0


def test_to_gray_matches_pil_convert_l():
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(3)
    bgr = rng.integers(0, 256, (123, 301, 3), dtype=np.uint8)
    rgb = np.ascontiguousarray(bgr[..., ::-1])
    np.testing.assert_array_equal(to_gray(bgr), np.asarray(Image.fromarray(rgb).convert("L")))
    bgra = np.dstack([bgr, rng.integers(0, 256, bgr.shape[:2], dtype=np.uint8)])
    rgba = np.ascontiguousarray(bgra[..., [2, 1, 0, 3]])
    np.testing.assert_array_equal(to_gray(bgra), np.asarray(Image.fromarray(rgba, "RGBA").convert("L")))


def test_runtime_farneback_stream_uses_pil_luma():
    """The runtime's Farneback flow sees exactly the gray frames the released code computes."""
    from pairedge.runtime.flow import FlowStream, get_flow_backend

    rng = np.random.default_rng(4)
    frames = [
        cv2.GaussianBlur(rng.integers(0, 256, (64, 96, 3), dtype=np.uint8), (0, 0), 1.5) for _ in range(2)
    ]
    stream = FlowStream(get_flow_backend("farneback", scale=1.0))
    assert stream.push(frames[0]) is None
    flow = stream.push(frames[1])
    np.testing.assert_array_equal(stream._slots[stream._cur], _pil_integer_luma(frames[1]))
    np.testing.assert_array_equal(flow, farneback_flow(frames[0], frames[1]))
