"""``CudaFlow`` on a numpy stand-in for the GPU (``fake_device.py``): buffer wiring, levels, slots, pooling.

Runs everywhere (no GPU, no NVRTC): the launch layer and the compiler are replaced by the stand-in, whose
kernels re-implement the ``.cu`` files in numpy. What it proves: the backend launches the kernels in the
order and on the buffers that compute the reference algorithm (:func:`lk_flow`), reuses the previous
frame's pyramid, survives size changes and pools the right rectangles and grid.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from fake_device import FakeDevice
from pairedge.features.flowpool import pooled_reference
from pairedge.runtime.flow.cuda import backend as cuda_backend
from pairedge.runtime.flow.lk_reference import lk_flow
from pairedge.runtime.flow.pooling import PooledFlowStream, PoolRequest


@pytest.fixture
def fake(monkeypatch):
    device = FakeDevice()
    monkeypatch.setattr(cuda_backend, "open_api", lambda api, dev: device)
    monkeypatch.setattr(cuda_backend, "supported_archs", lambda: [87, 90])
    monkeypatch.setattr(cuda_backend, "compiled", lambda name, target: (b"", "fake"))
    return device


def _pair(h: int, w: int, seed: int = 0, dx: float = 2.3, dy: float = -1.1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 255, (max(h // 5, 1), max(w // 5, 1)), dtype=np.uint8)
    a = cv2.GaussianBlur(cv2.resize(noise, (w, h), interpolation=cv2.INTER_CUBIC), (5, 5), 1.2)
    b = cv2.warpAffine(a, np.float32([[1, 0, dx], [0, 1, dy]]), (w, h), borderMode=cv2.BORDER_REFLECT)
    return a, b


@pytest.mark.parametrize("graphs", [True, False])
@pytest.mark.parametrize("shape", [(48, 64), (1, 1), (3, 90), (17, 9)])
def test_orchestration_computes_the_reference(fake, shape, graphs):
    flow = cuda_backend.CudaFlow(scale=1.0, graphs=graphs)
    a, b = _pair(*shape)
    got = flow.compute_scaled(a, b).copy()
    want = lk_flow(a, b, flow.params)
    assert np.abs(got - want).max() <= 1e-3, np.abs(got - want).max()
    assert flow.last_gpu_ms is not None and fake.launches["median3"] == 2 * len(flow._levels)


def test_pyramid_reuse_size_change_and_pooling(fake):
    flow = cuda_backend.CudaFlow(scale=1.0)
    a, b = _pair(40, 56, 1)
    _, c = _pair(40, 56, 1, dx=4.0, dy=1.0)
    flow.compute_scaled(a, b)
    uploads = fake.launches["u8_to_float"]
    second = flow.compute_scaled(b, c).copy()  # b is the last frame: only c is uploaded
    assert fake.launches["u8_to_float"] == uploads + 1
    assert np.abs(second - lk_flow(b, c, flow.params)).max() <= 1e-3
    d, e = _pair(30, 70, 2)  # new size: buffers of the old size released, new ones allocated
    before = len(fake.mem)
    assert np.abs(flow.compute_scaled(d, e) - lk_flow(d, e, flow.params)).max() <= 1e-3
    assert len(fake.mem) <= before + 2
    boxes = np.array([[5, 3, 20, 25], [-30, -30, 40, 40], [60, 20, 30, 30], [np.nan, 1, 2, 3]], np.float64)
    request = PoolRequest(boxes, (0.15, 0.05), 8)
    pooled = flow.compute_pooled(d, e, request)
    want = pooled_reference(lk_flow(d, e, flow.params), boxes, 1.0, request.inset, request.grid_step)
    np.testing.assert_array_equal(pooled.rects, want.rects)
    np.testing.assert_allclose(pooled.moments, want.moments, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(pooled.grid, want.grid, atol=1e-3)


def test_pooled_stream_through_the_backend(fake):
    flow = cuda_backend.CudaFlow(scale=0.5)
    stream = PooledFlowStream(flow)
    a, b = _pair(60, 80, 3)
    request = PoolRequest(np.array([[10, 10, 30, 40]], np.float64), (0.15, 0.05), 8)
    assert stream.push_pooled(a, request) is None
    pooled = stream.push_pooled(b, request)
    assert pooled is not None and pooled.shape == (30, 40) and pooled.moments.shape == (1, 4)


def test_graphs_replay_over_a_stream_and_fall_back(fake, monkeypatch):
    flow = cuda_backend.CudaFlow(scale=1.0)
    frames = [_pair(36, 44, 4, dx=1.5 * k, dy=0.5 * k)[1] for k in range(5)]
    for prev, cur in zip(frames, frames[1:], strict=False):  # as FlowStream calls it: prev = last frame
        got = flow.compute_scaled(prev, cur)
        assert np.abs(got - lk_flow(prev, cur, flow.params)).max() <= 1e-3
    assert flow.compile_info["graphs"] == "on" and fake.replays == 4
    assert len(flow._graphs) == 3  # first pair (both uploaded), then one graph per slot parity

    def broken() -> None:
        raise cuda_backend.BackendError("capture refused")

    other = cuda_backend.CudaFlow(scale=1.0)
    monkeypatch.setattr(fake, "begin_capture", broken)
    got = other.compute_scaled(frames[0], frames[1])
    assert other.graphs is False and other.compile_info["graphs"].startswith("off")
    assert np.abs(got - lk_flow(frames[0], frames[1], other.params)).max() <= 1e-3


def test_failed_construction_and_close_release_the_device(fake, monkeypatch):
    """A kernel that fails to compile closes the context the constructor opened; close() frees the graphs."""
    from pairedge.errors import BackendError

    closed, destroyed = [], []
    monkeypatch.setattr(fake, "close", lambda: closed.append(True))
    monkeypatch.setattr(fake, "graph_destroy", lambda graph: destroyed.append(graph))

    def broken(name, target):
        raise BackendError("NVRTC compile failed")

    with monkeypatch.context() as m:
        m.setattr(cuda_backend, "compiled", broken)
        with pytest.raises(BackendError, match="NVRTC"):
            cuda_backend.CudaFlow(scale=1.0)
    assert closed == [True]

    flow = cuda_backend.CudaFlow(scale=1.0, graphs=True)
    a, b = _pair(24, 32)
    flow.compute(a, b)
    assert flow._graphs
    graphs = list(flow._graphs.values())
    flow.close()
    assert destroyed == graphs and not flow._graphs and closed == [True, True]
