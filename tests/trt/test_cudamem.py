"""The cuda-python and pycuda memory layers, driven through fakes whose "device" memory is real host memory.

The fakes copy bytes with ``ctypes.memmove`` exactly where CUDA would, so pointer handling, pinned-array
wrapping, copy directions and sizes are exercised for real; the native backend then runs end to end on them
and must reproduce ONNX Runtime's outputs. The function names and argument counts cuda-python is called with
are checked against the installed ``cuda.bindings.runtime`` (the real package, which imports without a GPU).
"""

from __future__ import annotations

import ctypes
import enum
import inspect
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import onnxruntime
import pytest
from fake_tensorrt import FakeCudaMemory, make_fake_tensorrt
from pairedge.export.tensorrt.builder import BuildSettings, Profile
from pairedge.export.tensorrt.folder import build_model_folder
from pairedge.runtime.backends import load_model
from pairedge.runtime.backends.cudamem import CudaPythonMemory, PyCudaMemory
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


class FakeRuntimeApi:
    """The subset of ``cuda.bindings.runtime`` pairedge calls, with cuda-python's (err, value) tuples."""

    class cudaError_t(enum.IntEnum):  # noqa: N801 (cuda-python's names)
        cudaSuccess = 0
        cudaErrorMemoryAllocation = 2

    class cudaMemcpyKind(enum.IntEnum):  # noqa: N801
        cudaMemcpyHostToDevice = 1
        cudaMemcpyDeviceToHost = 2

    def __init__(self, fail_malloc: bool = False) -> None:
        self.calls: list[tuple[str, tuple]] = []
        self.live: dict[int, Any] = {}
        self.fail_malloc = fail_malloc
        ok = self.cudaError_t.cudaSuccess

        def record(name: str, result: Any) -> Any:
            def fn(*args: Any) -> Any:
                self.calls.append((name, args))
                return result(*args) if callable(result) else result

            return fn

        def alloc(n: int) -> tuple:
            if self.fail_malloc:
                return (self.cudaError_t.cudaErrorMemoryAllocation, None)
            buf = ctypes.create_string_buffer(n)
            self.live[ctypes.addressof(buf)] = buf
            return (ok, ctypes.addressof(buf))

        def free(ptr: int) -> tuple:
            self.live.pop(ptr)
            return (ok,)

        def memcpy(dst: int, src: int, count: int, kind: Any, stream: Any) -> tuple:
            ctypes.memmove(dst, src, count)
            return (ok,)

        self.cudaSetDevice = record("cudaSetDevice", (ok,))
        self.cudaMalloc = record("cudaMalloc", alloc)
        self.cudaMallocHost = record("cudaMallocHost", alloc)
        self.cudaFree = record("cudaFree", free)
        self.cudaFreeHost = record("cudaFreeHost", free)
        self.cudaMemcpyAsync = record("cudaMemcpyAsync", memcpy)
        self.cudaStreamCreate = record("cudaStreamCreate", (ok, 0x5EED))
        self.cudaStreamSynchronize = record("cudaStreamSynchronize", (ok,))
        self.cudaStreamDestroy = record("cudaStreamDestroy", (ok,))
        props = SimpleNamespace(name=b"Orin\0\0\0junk", major=8, minor=7)
        self.cudaGetDeviceProperties = record("cudaGetDeviceProperties", (ok, props))
        self.cudaRuntimeGetVersion = record("cudaRuntimeGetVersion", (ok, 12060))


class FakePyCuda:
    """The subset of ``pycuda.driver`` pairedge calls."""

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
    memory = FakeCudaMemory(name=name, cc=cc, cuda="12.6" if cc == "8.7" else "11.4")
    build_model_folder(model_dir, BuildSettings("fp32", Profile(2, 8, 8)), trt=make_fake_tensorrt(version),
                       memory=memory)  # fmt: skip


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
    rt = FakeRuntimeApi()
    memory = CudaPythonMemory(0, rt=rt)
    info = memory.device_info()
    assert (info.name, info.compute_capability, info.cuda_version) == ("Orin", "8.7", "12.6")
    trt = make_fake_tensorrt("10.3.0.30", memory=RawMemory())
    backend = TensorRTBackend(load_model(model_dir / "stage2.onnx"), trt=trt, memory=memory)
    _check_against_ort(backend, model_dir / "stage2.onnx")
    names = [c[0] for c in rt.calls]
    assert names.count("cudaMalloc") == 2 and names.count("cudaMallocHost") == 2
    assert names.count("cudaStreamCreate") == 1 and not rt.live  # everything freed on deactivate
    copies = [c[1] for c in rt.calls if c[0] == "cudaMemcpyAsync"]
    kinds = [int(c[3]) for c in copies]
    assert kinds == [1, 2] * 3  # 19 pairs at max 8 per call: 3 chunks, H2D then D2H each
    assert all(c[4] == 0x5EED for c in copies)
    assert ("IExecutionContext.execute_async_v3", 0x5EED) in trt.calls


def test_cuda_python_errors_are_typed(model_dir: Path) -> None:
    from pairedge.errors import BackendError

    memory = CudaPythonMemory(0, rt=FakeRuntimeApi(fail_malloc=True))
    with pytest.raises(BackendError, match="CUDA cudaMalloc failed: cudaErrorMemoryAllocation"):
        memory.alloc_device(1024)


def test_pycuda_layer_end_to_end(model_dir: Path) -> None:
    _build(model_dir, "Xavier", "7.2")
    driver = FakePyCuda()
    memory = PyCudaMemory(0, driver=driver)
    info = memory.device_info()
    assert (info.name, info.compute_capability, info.cuda_version) == ("Xavier", "7.2", "11.4")
    trt = make_fake_tensorrt("10.3.0.30", memory=RawMemory())
    backend = TensorRTBackend(load_model(model_dir / "stage1.onnx"), trt=trt, memory=memory)
    _check_against_ort(backend, model_dir / "stage1.onnx")
    assert driver.calls[:2] == ["init", "push"] and driver.calls[-2:] == ["pop", "detach"]
    assert not driver.live and ("IExecutionContext.execute_async_v3", 0xBEEF) in trt.calls


def test_calls_match_the_installed_cuda_python() -> None:
    """Every runtime function CudaPythonMemory calls exists in cuda.bindings.runtime with that many arguments."""
    rt = pytest.importorskip("cuda.bindings.runtime")
    source = inspect.getsource(CudaPythonMemory)
    called: dict[str, int] = {}
    for match in re.finditer(r'_call\("(\w+)"((?:, [^,)]+(?:\([^)]*\))?)*)\)', source):
        called[match.group(1)] = match.group(2).count(", ")
    for match in re.finditer(r"self\._rt\.(cuda\w+)\((\w*)\)", source):
        called[match.group(1)] = 1 if match.group(2) else 0
    assert {"cudaMalloc", "cudaMallocHost", "cudaMemcpyAsync", "cudaStreamCreate", "cudaFreeHost"} <= set(
        called
    )
    for name, nargs in called.items():
        fn = getattr(rt, name)
        params = fn.__doc__.split("\n", 1)[0]
        declared = len(
            [p for p in params[params.index("(") + 1 : params.rindex(")")].split(",") if p.strip()]
        )
        assert nargs == declared, f"{name}: pairedge passes {nargs} arguments, cuda-python declares {params}"
    for member in ("cudaMemcpyHostToDevice", "cudaMemcpyDeviceToHost"):
        assert hasattr(rt.cudaMemcpyKind, member)
    assert hasattr(rt.cudaError_t, "cudaSuccess")
