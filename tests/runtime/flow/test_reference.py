"""The CPU reference of the CUDA flow (``flow="reference"``) and the dense-or-pooled contract with the
spec."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.core.features.base import usable_rows
from pairedge.core.features.edge import PairedgeConfig, PairedgeExtractor
from pairedge.core.features.flowpool import PooledFlow, check_pooled, pooled_reference
from pairedge.core.types import Detections
from pairedge.runtime.flow import FlowStream, get_flow_backend
from pairedge.runtime.flow.lk_reference import LKParams, box_sum, level_shapes, lk_flow, median3, pyramid
from pairedge.runtime.flow.pooling import PooledFlowStream, PoolRequest
from rt_scenes import scene


def textured(h: int, w: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 255, (max(h // 6, 1), max(w // 6, 1)), dtype=np.uint8)
    return cv2.GaussianBlur(cv2.resize(noise, (w, h), interpolation=cv2.INTER_CUBIC), (5, 5), 1.2)


def test_recovers_a_translation():
    a = textured(120, 160)
    m = np.float32([[1, 0, 3.4], [0, 1, -1.7]])
    b = cv2.warpAffine(a, m, (160, 120), borderMode=cv2.BORDER_REFLECT)
    flow = lk_flow(a, b)
    inner = flow[15:-15, 15:-15].reshape(-1, 2)
    err = np.abs(inner - [3.4, -1.7]).mean(axis=0)
    assert flow.shape == (120, 160, 2) and flow.dtype == np.float32
    assert (err < 0.15).all(), err


@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (3, 5000), (7, 13), (33, 17)])
def test_any_size_gives_a_finite_field(shape):
    a = textured(*shape)
    b = np.roll(a, 1, axis=1)
    flow = lk_flow(a, b)
    assert flow.shape == (*shape, 2) and np.isfinite(flow).all()
    assert np.abs(lk_flow(a, a)).max() == 0.0  # identical frames: exactly zero


def test_steps_match_their_definitions():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(9, 11)).astype(np.float32)
    r = 2
    p = np.pad(a.astype(np.float64), r)
    brute = np.array([[p[y : y + 2 * r + 1, x : x + 2 * r + 1].sum() for x in range(11)] for y in range(9)])
    np.testing.assert_allclose(box_sum(a, r), brute, rtol=1e-5, atol=1e-5)
    q = np.pad(a, 1, mode="edge")
    med = np.array([[np.median(q[y : y + 3, x : x + 3]) for x in range(11)] for y in range(9)])
    np.testing.assert_array_equal(median3(a), med.astype(np.float32))
    shapes = level_shapes(218, 512, LKParams())
    assert shapes[0] == (218, 512) and shapes[1] == (109, 256) and min(shapes[-1]) >= 4
    assert [lv.shape for lv in pyramid(np.zeros((218, 512), np.uint8), LKParams())] == shapes


def test_params_are_checked():
    with pytest.raises(InputError, match="LK flow params"):
        LKParams(radius=-1)


def test_backend_registered_and_size_change_mid_stream():
    backend = get_flow_backend("reference", scale=0.5)
    stream = FlowStream(backend)
    assert stream.push(textured(60, 80)) is None
    assert stream.push(textured(60, 80, 1)).shape == (30, 40, 2)
    assert stream.push(textured(50, 90)) is None  # new resolution: a new stream starts
    assert stream.push(textured(50, 90, 2)).shape == (25, 45, 2)


def _run(extractor, frames, flows, pooled: bool, cfg: PairedgeConfig, scale: float):
    out = []
    for (frame, dets), flow in zip(frames, flows, strict=True):
        size = (frame.shape[1], frame.shape[0])
        if pooled and flow is not None:
            boxes = np.asarray(dets.boxes, np.float64)[usable_rows(dets)]
            flow = pooled_reference(flow, boxes, scale, cfg.pool_inset, cfg.grid_step)
        out.append(extractor.step(dets, len(out) / 10.0, size, flow, scale).stage2)
    return np.concatenate(out)


@pytest.mark.parametrize("ego", ["affine", "median"])
def test_features_same_from_dense_and_pooled_reference_flow(ego):
    """Reference flow pooled on the CPU (dense path) vs by the fused path's reference: <= 1e-4 relative."""
    cfg = PairedgeConfig(ego_motion=ego)
    frames, flows = [], []
    stream = FlowStream(get_flow_backend("reference", scale=0.5))
    for f in scene(people=6, frames=5, size=(200, 150)):
        boxes = np.vstack([f.detections.boxes, [[-40, -30, 60, 80], [190, 140, 50, 50], [np.nan, 0, 5, 5]]])
        dets = Detections.from_arrays(boxes.astype(np.float32), np.arange(1, len(boxes) + 1))
        flow = stream.push(f.image)
        frames.append((f.image, dets))
        flows.append(None if flow is None else flow.copy())
    dense = _run(PairedgeExtractor(cfg), frames, flows, False, cfg, 0.5)
    pooled = _run(PairedgeExtractor(cfg), frames, flows, True, cfg, 0.5)
    assert dense.shape == pooled.shape and dense.shape[0] > 0
    assert np.abs(dense[:, :2]).max() > 0.05  # flow-derived motion is really there
    for col in range(dense.shape[1]):
        np.testing.assert_allclose(
            pooled[:, col], dense[:, col], rtol=1e-4, atol=1e-6, err_msg=f"column {col}"
        )


def test_pooled_stream_and_mismatched_boxes():
    backend = get_flow_backend("reference", scale=0.5, pooled=True)
    assert backend.fuses_pooling and not get_flow_backend("dis").fuses_pooling
    stream = PooledFlowStream(backend)
    boxes = np.array([[10, 10, 30, 60], [300, 300, 10, 10]], np.float64)  # the second is outside the frame
    request = PoolRequest(boxes, (0.15, 0.05), 8)
    frames = [f.image for f in scene(people=2, frames=2, size=(160, 120))]
    assert stream.push_pooled(frames[0], request) is None
    pooled = stream.push_pooled(frames[1], request)
    assert isinstance(pooled, PooledFlow) and pooled.shape == (60, 80) and pooled.grid.shape == (7, 10, 2)
    assert (pooled.rects[1] == [80, 60, 80, 60]).all() and (pooled.moments[1] == 0).all()
    with pytest.raises(InputError, match="boxes"):
        check_pooled(pooled, boxes[:1], 8, (0.15, 0.05))
    with pytest.raises(InputError, match="grid step"):
        check_pooled(pooled, boxes, 4, (0.15, 0.05))
    with pytest.raises(TypeError):
        PooledFlowStream(get_flow_backend("dis"))
