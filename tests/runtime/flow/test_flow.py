"""Flow backends: interface, registry, buffer reuse, FlowStream, and accuracy on real MPI-Sintel ground
truth."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import cv2
import numpy as np
import pytest
from pairedge.core.errors import BackendError, InputError
from pairedge.core.features.flowpool import pooled_reference
from pairedge.core.io.flo import endpoint_error, read_flo
from pairedge.runtime.flow import (
    FLOW_BACKENDS,
    FlowBackend,
    FlowOptions,
    FlowStream,
    PoolRequest,
    available_flow_backends,
    flow_backend_class,
    get_flow_backend,
)
from pairedge.runtime.flow.dis import DISFlow
from pairedge.runtime.flow.farneback import FarnebackFlow
from pairedge.runtime.flow.reference import ReferenceFlow
from rt_scenes import scene

AVAILABLE = [name for name, reason in available_flow_backends().items() if reason is None]

# (backend, options) configurations checked for accuracy; every available backend appears at least once.
CONFIGS = [
    ("dis", {"preset": "medium", "scale": 1.0}),
    ("dis", {"preset": "fast", "scale": 0.5}),
    ("dis", {"preset": "ultrafast", "scale": 0.5}),
    ("farneback", {}),
]


def _texture(h: int = 120, w: int = 160, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 255, (h // 4, w // 4), dtype=np.uint8)
    return cv2.GaussianBlur(cv2.resize(noise, (w, h), interpolation=cv2.INTER_CUBIC), (5, 5), 1.0)


def _shift(image: np.ndarray, dx: float, dy: float) -> np.ndarray:
    m = np.float32([[1, 0, dx], [0, 1, dy]])
    return cv2.warpAffine(image, m, (image.shape[1], image.shape[0]), borderMode=cv2.BORDER_REFLECT)


def test_registry_lists_cpu_backends() -> None:
    assert {"dis", "farneback"} <= set(FLOW_BACKENDS)
    assert {"dis", "farneback"} <= set(AVAILABLE)


def test_auto_is_dis_and_options_are_checked() -> None:
    assert get_flow_backend("auto").name == "dis"
    with pytest.raises(InputError, match="unknown flow backend"):
        get_flow_backend("raft")
    with pytest.raises(InputError, match="unknown option"):
        get_flow_backend("dis", pyramid=3)
    with pytest.raises(InputError, match="preset"):
        get_flow_backend("dis", preset="slow")
    with pytest.raises(InputError, match="scale"):
        get_flow_backend("dis", scale=1.5)


@pytest.mark.parametrize("name", AVAILABLE)
def test_translation_is_recovered_at_the_backend_scale(name: str) -> None:
    backend = get_flow_backend(name)
    assert isinstance(backend, FlowBackend) and backend.name == name
    a = _texture()
    b = _shift(a, 3.0, -2.0)
    flow = backend.compute(a, b)
    h, w = backend.scaled_shape(*a.shape)
    assert flow.shape == (h, w, 2) and flow.dtype == np.float32
    inner = flow[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4].reshape(-1, 2)
    median = np.median(inner, axis=0) / backend.scale  # back to full-resolution pixels
    np.testing.assert_allclose(median, [3.0, -2.0], atol=0.35)


@pytest.mark.parametrize("name", AVAILABLE)
def test_output_buffer_is_reused_and_results_do_not_depend_on_history(name: str) -> None:
    backend = get_flow_backend(name)
    a, b, c = _texture(seed=1), _texture(seed=2), _texture(seed=3)
    backend.compute(b, c)  # OpenCV's DIS differs by ~2e-3 px on an instance's very first call: warm up
    first = backend.compute(a, _shift(a, 2, 1)).copy()
    out1 = backend.compute(b, c)
    out2 = backend.compute(a, _shift(a, 2, 1))
    assert out1 is out2  # same buffer
    np.testing.assert_array_equal(out2, first)  # zeroed before each call: no dependence on the last call


@pytest.mark.parametrize("name", AVAILABLE)
def test_bad_inputs_raise_input_error(name: str) -> None:
    backend = get_flow_backend(name)
    gray = _texture()
    with pytest.raises(InputError, match="uint8 grayscale"):
        backend.compute(gray.astype(np.float32), gray)
    with pytest.raises(InputError, match="uint8 grayscale"):
        backend.compute(cv2.cvtColor(gray, cv2.COLOR_GRAY2BGR), gray)
    with pytest.raises(InputError, match="same shape"):
        backend.compute(gray, gray[:-2])


def test_stream_matches_pairwise_compute_and_handles_bgr() -> None:
    backend = get_flow_backend("dis", preset="fast", scale=0.5)
    reference = get_flow_backend("dis", preset="fast", scale=0.5)
    stream = FlowStream(backend)
    frames = [_shift(_texture(seed=4), k * 1.5, 0) for k in range(4)]
    assert stream.push(cv2.cvtColor(frames[0], cv2.COLOR_GRAY2BGR)) is None  # first frame: no flow
    for prev, cur in zip(frames, frames[1:], strict=False):
        got = stream.push(cv2.cvtColor(cur, cv2.COLOR_GRAY2BGR))
        assert got is not None
        np.testing.assert_allclose(got, reference.compute(prev, cur), atol=1e-4)
    stream.reset()
    assert stream.push(frames[0]) is None
    assert stream.push(frames[1][:-4]) is None  # a resolution change restarts the stream


def test_farneback_matches_the_liang2026_reference_exactly() -> None:
    from pairedge.core.features.liang2026 import farneback_flow, to_gray

    bgr = [cv2.cvtColor(_shift(_texture(seed=6), 2.5 * k, k), cv2.COLOR_GRAY2BGR) for k in range(3)]
    stream = FlowStream(get_flow_backend("farneback"))
    assert stream.push(bgr[0]) is None
    for prev, cur in zip(bgr, bgr[1:], strict=False):
        got = stream.push(cur)
        assert got is not None
        np.testing.assert_array_equal(got, farneback_flow(prev, cur))
        np.testing.assert_array_equal(stream._slots[stream._cur], to_gray(cur))


def test_stream_full_resolution_keeps_its_own_copy() -> None:
    stream = FlowStream(get_flow_backend("dis", preset="fast", scale=1.0))
    buf = _texture(seed=5)
    assert stream.push(buf) is None
    nxt = _shift(buf, 2, 0)
    buf[:] = nxt  # caller reuses its buffer: the stream must have copied the previous frame
    flow = stream.push(buf)
    assert flow is not None
    assert abs(float(np.median(flow[30:90, 40:120, 0])) - 2.0) < 0.35


def test_unavailable_backend_reason_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    cls = type(get_flow_backend("dis"))
    monkeypatch.setattr(cls, "unavailable_reason", classmethod(lambda c, options=None: "no GPU"))
    assert available_flow_backends()["dis"] == "no GPU"
    with pytest.raises(BackendError, match="no GPU"):
        get_flow_backend("dis")


def _sintel(shared_data: Path, level: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    base = shared_data / "sintel" / "clean" / level
    a = cv2.imread(str(base / "frame_0002.png"), cv2.IMREAD_GRAYSCALE)
    b = cv2.imread(str(base / "frame_0003.png"), cv2.IMREAD_GRAYSCALE)
    return a, b, read_flo(base / "gt" / "frame_0002.flo")


# Sane upper bounds on the mean end-point error (pixels); measured values are in the README.
EPE_BOUND = {"easy": 1.5, "medium": 5.0}


@pytest.mark.data
@pytest.mark.parametrize("level", ["easy", "medium"])
@pytest.mark.parametrize(("name", "options"), CONFIGS, ids=lambda v: str(v))
def test_sintel_endpoint_error(shared_data: Path, level: str, name: str, options: dict) -> None:
    if name not in AVAILABLE:
        pytest.skip(f"flow backend {name} unavailable: {available_flow_backends()[name]}")
    a, b, truth = _sintel(shared_data, level)
    backend = get_flow_backend(name, **options)
    flow = backend.compute(a, b)
    full = cv2.resize(flow, (a.shape[1], a.shape[0]), interpolation=cv2.INTER_LINEAR) / backend.scale
    epe = endpoint_error(full, truth)
    zero = endpoint_error(np.zeros_like(truth), truth)
    print(f"sintel clean/{level} {backend!r}: EPE {epe:.2f} px (zero flow {zero:.2f})")
    assert epe < EPE_BOUND[level]
    assert epe < 0.35 * zero


# -- rt_flow_options: Typed flow options and the declared FlowBackend contract (close, GPU time, pooled flow)
# of every backend.


@pytest.mark.parametrize("name", sorted(FLOW_BACKENDS))
def test_every_backend_declares_frozen_options_with_a_scale(name: str) -> None:
    cls = flow_backend_class(name)  # the CUDA class imports without a GPU: only its module is loaded
    assert issubclass(cls.Options, FlowOptions) and cls.Options is not FlowOptions
    options = cls.Options()
    assert 0 < options.scale <= 1 and isinstance(options.scale, float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.scale = 0.3  # type: ignore[misc]
    assert cls.options_for(0.25).scale == 0.25


def test_options_and_keywords_build_the_same_backend() -> None:
    typed = get_flow_backend("dis", DISFlow.Options(preset="ultrafast", scale=0.25))
    keywords = get_flow_backend("dis", preset="ultrafast", scale=0.25)
    assert typed.options == keywords.options == DISFlow(preset="ultrafast", scale=0.25).options
    assert repr(typed) == "DISFlow(preset='ultrafast', scale=0.25)" and typed.preset == "ultrafast"
    assert DISFlow.options_for(0.5, None) == DISFlow.Options(preset="fast", scale=0.5)
    assert DISFlow.options_for(0.5, "medium").preset == "medium"
    assert FarnebackFlow.options_for(1.0, "medium") == FarnebackFlow.Options(scale=1.0)  # no presets: ignored
    assert get_flow_backend("farneback", scale=None).scale == 1.0  # None keeps the default
    assert get_flow_backend("farneback").preset is None


def test_options_of_another_backend_or_mixed_with_keywords_are_refused() -> None:
    with pytest.raises(InputError, match=r"expected FarnebackFlow.Options, got DISFlow.Options"):
        get_flow_backend("farneback", DISFlow.Options())
    with pytest.raises(InputError, match="not both"):
        get_flow_backend("dis", DISFlow.Options(), scale=0.5)
    with pytest.raises(InputError, match=r"unknown option\(s\) \['preset'\]"):
        get_flow_backend("farneback", preset="fast")
    with pytest.raises(InputError, match="preset"):
        DISFlow.Options(preset="slow")


def test_cpu_backends_declare_close_gpu_time_and_cpu_pooling() -> None:
    frames = [f.image[:, :, 1].copy() for f in scene(people=2, frames=2, size=(96, 64))]
    boxes = np.array([[10, 10, 30, 40], [50, 5, 20, 30]], np.float64)
    request = PoolRequest(boxes, (0.15, 0.05), 8)
    for backend in (get_flow_backend("dis"), ReferenceFlow(scale=0.5)):
        assert not backend.emulated and backend.gpu_ms() is None and not backend.fuses_pooling
        a, b = (backend.resize(f, k) for k, f in enumerate(frames))
        pooled = backend.compute_pooled(a, b, request)
        want = pooled_reference(backend.compute_scaled(a, b), boxes, backend.scale, (0.15, 0.05), 8)
        np.testing.assert_array_equal(pooled.moments, want.moments)
        np.testing.assert_array_equal(pooled.grid, want.grid)
        backend.close()
        backend.close()  # idempotent
    assert ReferenceFlow(pooled=True).fuses_pooling
