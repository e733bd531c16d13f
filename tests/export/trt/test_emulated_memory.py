"""The whole native TensorRT backend except the engine runs on the emulated CUDA device's memory.

Bindings, pinned staging, batch splits beyond the profile, zero padding below it, async copies in stream
order and everything freed: the recording fake engine stands in for TensorRT, the emulated device
(:class:`pairedge.gpu.cuda.emulated.device.EmulatedDevice`, no compiler needed for memory) for the GPU. Its
copies really are asynchronous (they run when the stream is synchronised), so a missing synchronise or a copy
in the wrong order gives wrong numbers here, as on a GPU.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import pytest
from fake_tensorrt import make_fake_tensorrt
from pairedge.core.errors import BackendError
from pairedge.export.tensorrt.builder import BuildSettings, Profile
from pairedge.export.tensorrt.folder import build_model_folder
from pairedge.gpu.cuda.emulated.device import EmulatedDevice
from pairedge.runtime.backends import load_model
from pairedge.runtime.backends.tensorrt import TensorRTBackend

VERSION = "10.13.0.35"


class EngineOnStream:
    """What the fake engine reads and writes, in stream order: a read first runs the work queued before the
    engine (its kernels follow the input copy); the output is written by a host function queued on the
    backend's stream, so it lands after what was queued before ``execute_async_v3`` and before what
    follows."""

    def __init__(self, device: EmulatedDevice) -> None:
        self.device = device
        self.stream: Any = None

    def read(self, ptr: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        EmulatedDevice.synchronize(self.device, self.stream)  # the class's: a test may stub the instance's
        count = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return np.frombuffer(ctypes.string_at(ptr, count), dtype).reshape(shape)

    def write(self, ptr: int, array: np.ndarray) -> None:
        data = np.ascontiguousarray(array).copy()
        self.device.host_function(lambda: ctypes.memmove(ptr, data.ctypes.data, data.nbytes), self.stream)


class RecordingDevice(EmulatedDevice):
    """The emulated device, remembering the streams it made (the engine adapter writes on the last one)."""

    def __init__(self, adapter_slot: list[EngineOnStream]) -> None:
        self._slot = adapter_slot
        super().__init__()

    def create_stream(self) -> Any:
        stream = super().create_stream()
        for adapter in self._slot:
            adapter.stream = stream
        return stream


def _setup(model_dir: Path, profile: Profile) -> tuple[RecordingDevice, Any]:
    # the engines are "built" for the emulated device, so the backend finds and accepts them there
    build_model_folder(
        model_dir, BuildSettings("fp32", profile), trt=make_fake_tensorrt(VERSION), memory=EmulatedDevice()
    )
    slot: list[EngineOnStream] = []
    device = RecordingDevice(slot)
    slot.append(EngineOnStream(device))
    return device, make_fake_tensorrt(VERSION, memory=slot[0])


def _ort(onnx: Path, x: np.ndarray) -> np.ndarray:
    sess = onnxruntime.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
    return sess.run(None, {"features": x})[0]


@pytest.mark.parametrize("n", [1, 2, 8, 9, 19])
def test_backend_on_emulated_memory_matches_onnx(model_dir: Path, n: int) -> None:
    device, trt = _setup(model_dir, Profile(2, 4, 8))
    x = np.random.default_rng(n).normal(size=(n, load_model(model_dir / "stage2.onnx").num_features))
    backend = TensorRTBackend(load_model(model_dir / "stage2.onnx"), trt=trt, memory=device)
    with backend:
        assert device.live() == {"device": 2, "pinned": 2}  # buffers at profile max, allocated once
        got = backend.infer(x.astype(np.float32))
        again = backend.infer(x.astype(np.float32))
    np.testing.assert_allclose(
        got, _ort(model_dir / "stage2.onnx", x.astype(np.float32)), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_array_equal(got, again)
    shapes = [c[2] for c in trt.calls if c[0] == "IExecutionContext.set_input_shape"]
    chunks = [min(8, n - s) for s in range(0, n, 8)]
    assert shapes == [(max(c, 2), x.shape[1]) for c in chunks] * 2  # split at 8, padded up to 2
    assert device.live() == {}  # deactivate freed every buffer


def test_a_missing_synchronise_is_caught(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the stream synchronise the output copy has not run: the result is the pinned buffer's old
    bytes (NaN: fresh memory is 0xFF), not the engine's output, exactly the bug a GPU would show."""
    device, trt = _setup(model_dir, Profile(1, 4, 8))
    backend = TensorRTBackend(load_model(model_dir / "stage1.onnx"), trt=trt, memory=device)
    x = np.random.default_rng(0).normal(size=(3, backend.num_features)).astype(np.float32)
    with backend:
        monkeypatch.setattr(device, "synchronize", lambda stream=None: None)
        got = backend.infer(x)
    assert np.isnan(got).all()


def test_emulated_memory_refuses_what_a_gpu_would_not_do() -> None:
    device = EmulatedDevice()
    buf = device.alloc_device(64)
    pinned = device.alloc_pinned((16,), np.float32)
    with pytest.raises(BackendError, match="not pinned memory"):
        device.htod_async(buf, np.zeros(16, np.float32))  # pageable host memory
    with pytest.raises(BackendError, match="not inside a live device allocation"):
        device.htod_async(buf + 32, pinned)  # 64 bytes into the last 32
    device.dtoh_async(pinned, buf)
    mark = device.mark()
    late = device.alloc_device(16)
    device.release(mark)
    with pytest.raises(BackendError, match="not inside a live device allocation"):
        device.memset_async(late, 16)  # released
    device.synchronize()
    assert np.isnan(pinned).all()  # fresh device memory is 0xFF bytes
    device.close()
    assert device.live() == {}
    with pytest.raises(BackendError, match="after close"):
        device.alloc_device(4)
