"""The TensorRT backend's memory is the one CUDA layer: its cuda-python and pycuda implementations driven
through fakes whose "device" memory is real host memory, and the emulated device run for real.

The fakes copy bytes with ``ctypes.memmove`` exactly where CUDA would, so pointer handling, pinned-array
wrapping, copy directions and sizes are exercised for real; the native backend then runs end to end on them
and must reproduce ONNX Runtime's outputs. The driver functions the layer calls, and their argument counts,
are checked against the installed ``cuda.bindings.driver`` (the real package imports without a GPU).
"""

from __future__ import annotations

import ast
import ctypes
import enum
import inspect
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import pytest
from fake_tensorrt import make_fake_tensorrt
from pairedge.core.errors import BackendError, DeviceUnavailableError, InputError
from pairedge.export.tensorrt.builder import BuildSettings, Profile
from pairedge.export.tensorrt.folder import build_model_folder
from pairedge.gpu.cuda import driver as driver_module
from pairedge.gpu.cuda.driver import CudaPythonDevice
from pairedge.gpu.cuda.emulated.device import EmulatedDevice
from pairedge.gpu.cuda.pycuda_device import PyCudaDevice
from pairedge.runtime.backends import load_model
from pairedge.runtime.backends.cudamem import open_cuda_memory
from pairedge.runtime.backends.tensorrt import TensorRTBackend


class RawMemory:
    """What the fake TensorRT reads and writes: raw addresses of this process."""

    @staticmethod
    def read(ptr: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        count = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return np.frombuffer(ctypes.string_at(ptr, count), dtype).reshape(shape)

    @staticmethod
    def write(ptr: int, array: np.ndarray) -> None:
        data = np.ascontiguousarray(array)
        ctypes.memmove(ptr, data.ctypes.data, data.nbytes)


class FakeDriver:
    """The subset of ``cuda.bindings.driver`` the layer calls, with cuda-python's (err, value...) tuples and
    the real functions' positional parameters (a wrong argument count raises TypeError)."""

    class CUresult(enum.IntEnum):  # noqa: N801 (cuda-python's names)
        CUDA_SUCCESS = 0
        CUDA_ERROR_OUT_OF_MEMORY = 2

    CUdevice_attribute = enum.IntEnum(
        "CUdevice_attribute",
        [
            f"CU_DEVICE_ATTRIBUTE_{n}"
            for n in (
                "COMPUTE_CAPABILITY_MAJOR",
                "COMPUTE_CAPABILITY_MINOR",
                "MAX_THREADS_PER_BLOCK",
                "MAX_BLOCK_DIM_X",
                "MAX_BLOCK_DIM_Y",
                "MAX_BLOCK_DIM_Z",
                "MAX_GRID_DIM_X",
                "MAX_GRID_DIM_Y",
                "MAX_GRID_DIM_Z",
                "MAX_SHARED_MEMORY_PER_BLOCK",
            )
        ],
    )
    ATTRS = {
        "COMPUTE_CAPABILITY_MAJOR": 8,
        "COMPUTE_CAPABILITY_MINOR": 7,
        "MAX_THREADS_PER_BLOCK": 1024,
        "MAX_BLOCK_DIM_X": 1024,
        "MAX_BLOCK_DIM_Y": 1024,
        "MAX_BLOCK_DIM_Z": 64,
        "MAX_GRID_DIM_X": 2**31 - 1,
        "MAX_GRID_DIM_Y": 65535,
        "MAX_GRID_DIM_Z": 65535,
        "MAX_SHARED_MEMORY_PER_BLOCK": 49152,
    }

    def __init__(self, fail_malloc: bool = False) -> None:
        self.calls: list[str] = []
        self.live: dict[int, Any] = {}
        self.streams: list[int] = []
        self.fail_malloc = fail_malloc
        self.ok = self.CUresult.CUDA_SUCCESS

    def _rec(self, name: str) -> None:
        self.calls.append(name)

    def cuInit(self, flags):  # noqa: N802
        return (self.ok,)

    def cuDeviceGetCount(self):  # noqa: N802
        return (self.ok, 1)

    def cuDeviceGet(self, ordinal):  # noqa: N802
        return (self.ok, 7)

    def cuDeviceGetName(self, length, dev):  # noqa: N802
        return (self.ok, b"Orin" + b"\0" * (length - 4))

    def cuDriverGetVersion(self):  # noqa: N802
        return (self.ok, 12060)

    def cuDeviceGetAttribute(self, attrib, dev):  # noqa: N802
        return (self.ok, self.ATTRS[attrib.name.removeprefix("CU_DEVICE_ATTRIBUTE_")])

    def cuDevicePrimaryCtxRetain(self, dev):  # noqa: N802
        self._rec("retain")
        return (self.ok, "ctx")

    def cuDevicePrimaryCtxRelease(self, dev):  # noqa: N802
        self._rec("release")
        return (self.ok,)

    def cuCtxSetCurrent(self, ctx):  # noqa: N802
        return (self.ok,)

    def cuStreamCreate(self, flags):  # noqa: N802
        self.streams.append(0x5EED + len(self.streams))
        return (self.ok, self.streams[-1])

    def cuStreamDestroy(self, stream):  # noqa: N802
        self.streams.remove(stream)
        return (self.ok,)

    def cuStreamSynchronize(self, stream):  # noqa: N802
        self._rec(f"sync {stream:#x}")
        return (self.ok,)

    def _alloc(self, n: int) -> tuple:
        if self.fail_malloc:
            return (self.CUresult.CUDA_ERROR_OUT_OF_MEMORY, None)
        buf = ctypes.create_string_buffer(n)
        self.live[ctypes.addressof(buf)] = buf
        return (self.ok, ctypes.addressof(buf))

    def cuMemAlloc(self, bytesize):  # noqa: N802
        self._rec("cuMemAlloc")
        return self._alloc(bytesize)

    def cuMemHostAlloc(self, bytesize, flags):  # noqa: N802
        self._rec("cuMemHostAlloc")
        return self._alloc(bytesize)

    def cuMemFree(self, dptr):  # noqa: N802
        self.live.pop(dptr)
        return (self.ok,)

    def cuMemFreeHost(self, p):  # noqa: N802
        self.live.pop(p)
        return (self.ok,)

    def cuMemcpyHtoDAsync(self, dst, src, count, stream):  # noqa: N802
        self._rec(f"htod {stream:#x}")
        ctypes.memmove(dst, src, count)
        return (self.ok,)

    def cuMemcpyDtoHAsync(self, dst, src, count, stream):  # noqa: N802
        self._rec(f"dtoh {stream:#x}")
        ctypes.memmove(dst, src, count)
        return (self.ok,)

    def cuEventDestroy(self, ev):  # noqa: N802
        return (self.ok,)

    def cuModuleUnload(self, module):  # noqa: N802
        return (self.ok,)


class FakePyCuda:
    """The subset of ``pycuda.driver`` the layer calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.live: dict[int, Any] = {}
        outer = self

        class Alloc:
            def __init__(self, n: int) -> None:
                self.buf = ctypes.create_string_buffer(n)
                outer.live[int(self)] = self

            def __int__(self) -> int:
                return ctypes.addressof(self.buf)

            def free(self) -> None:
                outer.calls.append("free")
                outer.live.pop(int(self))

        class Context:
            def push(self) -> None:
                outer.calls.append("push")

            def pop(self) -> None:
                outer.calls.append("pop")

            def detach(self) -> None:
                outer.calls.append("detach")

        class Device:
            def __init__(self, index: int) -> None:
                self.index = index

            def name(self) -> str:
                return "Xavier"

            def compute_capability(self) -> tuple[int, int]:
                return (7, 2)

            def retain_primary_context(self) -> Context:
                return Context()

        class Stream:
            handle = 0xBEEF

            def synchronize(self) -> None:
                outer.calls.append("sync")

        self.Device, self.Stream = Device, Stream
        self.mem_alloc = Alloc
        self.pagelocked_empty = lambda shape, dtype: np.zeros(shape, dtype)
        self.init = lambda: outer.calls.append("init")
        self.get_driver_version = lambda: 11040

    def memcpy_htod_async(self, dst: int, src: np.ndarray, stream: Any) -> None:
        self.calls.append("htod")
        ctypes.memmove(dst, src.ctypes.data, src.nbytes)

    def memcpy_dtoh_async(self, dst: np.ndarray, src: int, stream: Any) -> None:
        self.calls.append("dtoh")
        ctypes.memmove(dst.ctypes.data, src, dst.nbytes)


def _build(model_dir: Path, name: str, cc: str, version: str = "10.3.0.30") -> None:
    from fake_tensorrt import FakeCudaMemory

    memory = FakeCudaMemory(name=name, cc=cc, cuda="12.6" if cc == "8.7" else "11.4")
    build_model_folder(
        model_dir, BuildSettings("fp32", Profile(2, 8, 8)), trt=make_fake_tensorrt(version), memory=memory
    )


def _check_against_ort(backend: TensorRTBackend, onnx: Path, n: int = 19) -> None:
    x = np.random.default_rng(n).normal(size=(n, backend.num_features)).astype(np.float32)
    with backend:
        got = backend.infer(x)
    ref = onnxruntime.InferenceSession(str(onnx), providers=["CPUExecutionProvider"]).run(
        None, {"features": x}
    )[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_cuda_python_layer_end_to_end(model_dir: Path) -> None:
    _build(model_dir, "Orin", "8.7")
    drv = FakeDriver()
    memory = CudaPythonDevice(0, drv=drv)
    info = memory.device_info()
    assert (info.name, info.compute_capability, info.cuda_version) == ("Orin", "8.7", "12.6")
    assert memory.limits.max_shared_per_block == 49152
    trt = make_fake_tensorrt("10.3.0.30", memory=RawMemory())
    backend = TensorRTBackend(load_model(model_dir / "stage2.onnx"), trt=trt, memory=memory)
    _check_against_ort(backend, model_dir / "stage2.onnx")
    assert drv.calls.count("cuMemAlloc") == 2 and drv.calls.count("cuMemHostAlloc") == 2
    assert not drv.live and not drv.streams and drv.calls[-1] == "release"  # everything freed on deactivate
    stream = 0x5EED + 1  # the layer's default stream is 0x5EED; the backend made its own
    copies = [c for c in drv.calls if c.startswith(("htod", "dtoh"))]
    assert copies == [f"htod {stream:#x}", f"dtoh {stream:#x}"] * 3  # 19 pairs at max 8: 3 chunks
    assert ("IExecutionContext.execute_async_v3", stream) in trt.calls


def test_cuda_python_errors_are_typed() -> None:
    memory = CudaPythonDevice(0, drv=FakeDriver(fail_malloc=True))
    with pytest.raises(BackendError, match="CUDA cuMemAlloc\\(1024\\) failed with CUDA_ERROR_OUT_OF_MEMORY"):
        memory.alloc_device(1024)


def test_pycuda_layer_end_to_end(model_dir: Path) -> None:
    _build(model_dir, "Xavier", "7.2")
    driver = FakePyCuda()
    memory = PyCudaDevice(0, driver=driver)
    info = memory.device_info()
    assert (info.name, info.compute_capability, info.cuda_version) == ("Xavier", "7.2", "11.4")
    trt = make_fake_tensorrt("10.3.0.30", memory=RawMemory())
    backend = TensorRTBackend(load_model(model_dir / "stage1.onnx"), trt=trt, memory=memory)
    _check_against_ort(backend, model_dir / "stage1.onnx")
    assert driver.calls[:2] == ["init", "push"] and driver.calls[-2:] == ["pop", "detach"]
    assert not driver.live and ("IExecutionContext.execute_async_v3", 0xBEEF) in trt.calls


def _driver_calls() -> dict[str, int]:
    """``self.drv.cu*(...)`` calls of the cuda-python implementation -> positional argument count (a
    starred grid / block counts 3)."""
    tree = ast.parse(inspect.getsource(driver_module))
    called: dict[str, int] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr.startswith("cu")
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "drv"
        ):
            called[node.func.attr] = sum(3 if isinstance(a, ast.Starred) else 1 for a in node.args)
    return called


def test_calls_match_the_installed_cuda_python() -> None:
    """Every driver function the layer calls exists in cuda.bindings.driver with that many parameters."""
    drv = pytest.importorskip("cuda.bindings.driver")
    called = _driver_calls()
    assert {"cuMemAlloc", "cuMemHostAlloc", "cuMemcpyHtoDAsync", "cuLaunchKernel", "cuGraphLaunch"} <= set(
        called
    )
    for name, nargs in called.items():
        first = getattr(drv, name).__doc__.split("\n", 1)[0]
        declared = [p for p in first[first.index("(") + 1 : first.rindex(")")].split(",") if p.strip()]
        assert nargs == len(declared), (
            f"{name}: the layer passes {nargs} arguments, cuda-python declares {first}"
        )
    for enum_name, member in (
        ("CUstreamCaptureMode", "CU_STREAM_CAPTURE_MODE_THREAD_LOCAL"),
        ("CUresult", "CUDA_SUCCESS"),
    ):
        assert hasattr(getattr(drv, enum_name), member)
    for attr in FakeDriver.ATTRS:
        assert hasattr(drv.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{attr}"), attr


def test_fake_driver_has_every_memory_call_the_layer_makes() -> None:
    """The fake above keeps up with the layer: the memory / stream calls it makes all exist in the fake."""
    launch_only = {
        "cuLaunchKernel",
        "cuModuleLoadData",
        "cuModuleGetFunction",
        "cuEventCreate",
        "cuEventRecord",
        "cuEventSynchronize",
        "cuEventElapsedTime",
        "cuStreamBeginCapture",
        "cuStreamEndCapture",
        "cuGraphInstantiate",
        "cuGraphDestroy",
        "cuGraphLaunch",
        "cuGraphExecDestroy",
        "cuMemsetD32Async",
    }
    missing = sorted(set(_driver_calls()) - launch_only - set(dir(FakeDriver)))
    assert not missing, missing


def test_open_cuda_memory_never_opens_the_emulated_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """TensorRT engines need a GPU: PAIREDGE_CUDA_EMULATION is ignored and "hip-cpu" is refused."""
    monkeypatch.setenv("PAIREDGE_CUDA_EMULATION", "hip-cpu")
    with pytest.raises(InputError, match="expected one of auto, cuda-python, pycuda, got 'hip-cpu'"):
        open_cuda_memory("hip-cpu")
    for name in ("cuda", "cuda.bindings", "cuda.bindings.driver", "pycuda", "pycuda.driver"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(
        ImportError,
        match="neither is importable; install it with: pip install '\\.\\[gpu\\]' in the pairedge folder",
    ) as info:
        open_cuda_memory("auto")
    assert "PAIREDGE_CUDA_EMULATION" not in str(info.value)  # no hint towards a device TensorRT cannot use


def test_no_gpu_is_a_device_unavailable_error() -> None:
    class NoDriver(FakeDriver):
        def cuInit(self, flags):  # noqa: N802
            raise RuntimeError('"cuda" is an NVIDIA driver library and can only be found via system search')

    with pytest.raises(DeviceUnavailableError, match="CUDA device 0 is not usable \\(no CUDA driver"):
        CudaPythonDevice(0, drv=NoDriver())


# -- emulated_memory: The whole native TensorRT backend except the engine runs on the emulated CUDA device's
# memory.


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
