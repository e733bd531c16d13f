"""``CudaFlow`` on the emulated device: the real kernels, launched as on a GPU, wired as the reference says.

Buffer wiring, pyramid levels, ping-pong slots, the reused previous pyramid, size changes, graphs (recorded
and replayed) and their fallback, the pooling launches, and the release of everything on close or on a failed
construction. The emulated device runs ``lk.cu`` / ``pool.cu`` through HIP-CPU; its copies run in stream order
only when synchronised, so a missing synchronise would show here as wrong numbers.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from pairedge.apps.probe import emulation_skip_reason
from pairedge.core.errors import BackendError
from pairedge.core.features.flowpool import pooled_reference
from pairedge.runtime.flow.cuda import backend as cuda_backend
from pairedge.runtime.flow.lk_reference import lk_flow
from pairedge.runtime.flow.pooling import PooledFlowStream, PoolRequest

EMULATION_REASON = emulation_skip_reason()
pytestmark = pytest.mark.skipif(EMULATION_REASON is not None, reason=str(EMULATION_REASON))


@pytest.fixture
def devices(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every emulated device a CudaFlow of this test opened (to count launches and live buffers)."""
    from pairedge.gpu.cuda.emulated.device import EmulatedDevice

    opened: list[EmulatedDevice] = []

    def open_device(api: str, device: int) -> EmulatedDevice:
        assert api == "hip-cpu"
        opened.append(EmulatedDevice(device))
        return opened[-1]

    monkeypatch.setattr(cuda_backend, "open_device", open_device)
    return opened


def _flow(**options: object) -> cuda_backend.CudaFlow:
    return cuda_backend.CudaFlow(api="hip-cpu", **options)  # type: ignore[arg-type]


def _pair(h: int, w: int, seed: int = 0, dx: float = 2.3, dy: float = -1.1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 255, (max(h // 5, 1), max(w // 5, 1)), dtype=np.uint8)
    a = cv2.GaussianBlur(cv2.resize(noise, (w, h), interpolation=cv2.INTER_CUBIC), (5, 5), 1.2)
    b = cv2.warpAffine(a, np.float32([[1, 0, dx], [0, 1, dy]]), (w, h), borderMode=cv2.BORDER_REFLECT)
    return a, b


@pytest.mark.parametrize("graphs", [True, False])
@pytest.mark.parametrize("shape", [(48, 64), (1, 1), (3, 90), (17, 9)])
def test_orchestration_computes_the_reference_bit_for_bit(devices, shape, graphs):
    flow = _flow(scale=1.0, graphs=graphs)
    a, b = _pair(*shape)
    got = flow.compute_scaled(a, b).copy()
    np.testing.assert_array_equal(got, lk_flow(a, b, flow.params))  # no FMA, same operation order
    assert flow.last_gpu_ms is not None and flow.emulated and flow.gpu_ms() is None  # no fake GPU time
    assert devices[0].launches["median3"] == 2 * len(flow._levels)
    assert "EMULATED" in repr(flow) and flow.compile_info["device"] == "hip-cpu (emulated)"
    flow.close()
    assert devices[0].live() == {}


def test_pyramid_reuse_size_change_and_pooling(devices):
    flow = _flow(scale=1.0)
    a, b = _pair(40, 56, 1)
    _, c = _pair(40, 56, 1, dx=4.0, dy=1.0)
    flow.compute_scaled(a, b)
    dev = devices[0]
    uploads = dev.launches["u8_to_float"]
    second = flow.compute_scaled(b, c).copy()  # b is the last frame: only c is uploaded
    assert dev.launches["u8_to_float"] == uploads + 1
    np.testing.assert_array_equal(second, lk_flow(b, c, flow.params))
    d, e = _pair(30, 70, 2)  # new size: buffers of the old size released, new ones allocated
    np.testing.assert_array_equal(flow.compute_scaled(d, e), lk_flow(d, e, flow.params))
    other = _flow(scale=1.0)
    other.compute_scaled(d, e)
    assert dev.live() == devices[1].live()  # nothing of the old size is left
    boxes = np.array([[5, 3, 20, 25], [-30, -30, 40, 40], [60, 20, 30, 30], [np.nan, 1, 2, 3]], np.float64)
    request = PoolRequest(boxes, (0.15, 0.05), 8)
    pooled = flow.compute_pooled(d, e, request)
    want = pooled_reference(lk_flow(d, e, flow.params), boxes, 1.0, request.inset, request.grid_step)
    np.testing.assert_array_equal(pooled.rects, want.rects)
    np.testing.assert_allclose(pooled.moments, want.moments, rtol=1e-12, atol=1e-12)  # float64 sum order
    np.testing.assert_array_equal(pooled.grid, want.grid)
    empty = flow.compute_pooled(d, e, PoolRequest(np.zeros((0, 4)), (0.15, 0.05), 8))
    assert empty.moments.shape == (0, 4) and empty.grid.shape == want.grid.shape


def test_pooled_stream_through_the_backend(devices):
    flow = _flow(scale=0.5)
    stream = PooledFlowStream(flow)
    a, b = _pair(60, 80, 3)
    request = PoolRequest(np.array([[10, 10, 30, 40]], np.float64), (0.15, 0.05), 8)
    assert stream.push_pooled(a, request) is None
    pooled = stream.push_pooled(b, request)
    assert pooled is not None and pooled.shape == (30, 40) and pooled.moments.shape == (1, 4)


def test_graphs_replay_over_a_stream_and_fall_back(devices, monkeypatch):
    flow = _flow(scale=1.0)
    frames = [_pair(36, 44, 4, dx=1.5 * k, dy=0.5 * k)[1] for k in range(5)]
    for prev, cur in zip(frames, frames[1:], strict=False):  # as FlowStream calls it: prev = last frame
        np.testing.assert_array_equal(flow.compute_scaled(prev, cur), lk_flow(prev, cur, flow.params))
    assert flow.compile_info["graphs"] == "on" and devices[0].replays == 4
    assert len(flow._graphs) == 3  # first pair (both uploaded), then one graph per slot parity
    assert devices[0].executed["median3"] == 4 * 2 * len(flow._levels)  # every replay ran the kernels

    def broken() -> None:
        raise BackendError("capture refused")

    other = _flow(scale=1.0)
    monkeypatch.setattr(devices[1], "begin_capture", broken)
    got = other.compute_scaled(frames[0], frames[1])
    assert other.graphs is False and other.compile_info["graphs"].startswith("off")
    np.testing.assert_array_equal(got, lk_flow(frames[0], frames[1], other.params))


def test_failed_construction_and_close_release_the_device(devices, monkeypatch):
    """A kernel that fails to build closes the device the constructor opened; close() frees the graphs."""
    from pairedge.gpu.cuda.emulated.device import EmulatedDevice

    def broken(self, name, source):
        raise BackendError("g++ could not build lk.cu")

    with monkeypatch.context() as m:
        m.setattr(EmulatedDevice, "load_module", broken)
        with pytest.raises(BackendError, match="g\\+\\+"):
            _flow(scale=1.0)
    assert devices[0]._closed

    flow = _flow(scale=1.0, graphs=True)
    destroyed: list = []
    monkeypatch.setattr(devices[1], "graph_destroy", destroyed.append)
    flow.compute(*_pair(24, 32))
    graphs = list(flow._graphs.values())
    assert graphs
    flow.close()
    assert destroyed == graphs and not flow._graphs and devices[1].live() == {} and devices[1]._closed


def test_a_missing_synchronise_shows_as_wrong_numbers(devices, monkeypatch):
    """The emulated device runs copies only when the stream is synchronised: skipping the wait leaves the
    pinned result buffer as fresh memory (NaN), as a GPU would leave it stale."""
    flow = _flow(scale=1.0, graphs=False)
    monkeypatch.setattr(flow, "_finish_timing", lambda: None)
    assert np.isnan(flow.compute_scaled(*_pair(20, 24))).all()
