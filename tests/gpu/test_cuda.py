"""The one CUDA layer (``pairedge.gpu.cuda``): kernel signatures read from the source, launch checks shared by
every implementation, explicit selection of the emulated device, its build cache, the doctor rows, and a
source scan that no other module imports cuda-python or pycuda."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import numpy as np
import pytest
from pairedge.apps.probe import emulation_skip_reason, probe
from pairedge.core.errors import BackendError, InputError, MissingDependencyError
from pairedge.gpu.cuda import GPU_KINDS, Kernel, Limits, open_device, resolve_kind, unavailable_reason
from pairedge.gpu.cuda.base import BlockRule, check_launch
from pairedge.gpu.cuda.emulated import toolchain
from pairedge.gpu.cuda.source import parse_kernels
from pairedge.runtime.flow.cuda.kernels import kernel_source

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "sdk" / "gpu" / "cuda"
PACKAGE_DIRS = ("sdk", "runtime", "export", "calibration", "benchmarks")
CUDA_MODULES = ("cuda", "pycuda")  # cuda-python installs the top-level package ``cuda``


def test_signatures_and_shared_memory_are_read_from_the_kernel_files():
    lk, pool = parse_kernels(kernel_source("lk.cu")), parse_kernels(kernel_source("pool.cu"))
    assert len(lk) == 13 and list(pool) == ["box_moments", "grid_sample"]
    moments = pool["box_moments"]
    assert [p.kind for p in moments.params] == ["p", "p", "i", "p", "i", "p"]
    assert (
        moments.declaration() == "const float* u, const float* v, int w, const int* rects, int n, double* out"
    )
    assert moments.static_shared == 4 * 256 * 8 and lk["lk_terms"].params[8].kind == "f"
    text = """
    // __global__ void commented_out(double x) {}
    __global__ void k(float* a, unsigned long n) { }
    """
    with pytest.raises(BackendError, match="parameter n has type 'unsigned long'"):
        parse_kernels(text)
    dynamic = parse_kernels(
        "__global__ void d(float* a) { extern __shared__ float s[]; __shared__ int t[3][5]; }"
    )
    assert dynamic["d"].static_shared == 60  # the extern array is sized at launch


def _kernel(rule: BlockRule = BlockRule()) -> Kernel:
    return Kernel(parse_kernels(kernel_source("pool.cu"))["box_moments"], None, rule)


def test_launch_checks_follow_the_device_limits():
    small = Limits(
        max_threads_per_block=512, max_block=(512, 512, 64), max_grid=(100, 10, 1), max_shared_per_block=9000
    )
    args = (("p", 1), ("p", 2), ("i", 3), ("p", 4), ("i", 5), ("p", 6))
    assert check_launch(_kernel(), (7,), (512,), 0, args, small) == ((7, 1, 1), (512, 1, 1))
    for grid, block, shared, match in (
        ((7,), (1024,), 0, "at most 512 per block"),
        ((101,), (32,), 0, "grid dimension x is 101"),
        ((7,), (32,), 809, "the device allows 9000"),
        ((1, 1, 2), (32,), 0, "grid dimension z is 2"),
        ((7,), (32, 1, 1, 1), 0, "1 to 3 dimensions"),
    ):
        with pytest.raises(BackendError, match=match):
            check_launch(_kernel(), grid, block, shared, args, small)


def test_selection_is_explicit(monkeypatch):
    monkeypatch.delenv("PAIREDGE_CUDA_EMULATION", raising=False)
    with pytest.raises(InputError, match="expected one of auto, cuda-python, pycuda, hip-cpu"):
        resolve_kind("cupy")
    with pytest.raises(InputError, match="a TensorRT engine needs a GPU"):
        resolve_kind("hip-cpu", emulation=False)
    assert resolve_kind("hip-cpu") == "hip-cpu"
    monkeypatch.setenv("PAIREDGE_CUDA_EMULATION", "hip-cpu")
    assert resolve_kind("auto") == "hip-cpu"
    try:  # where emulation is not allowed (TensorRT), the variable is ignored
        assert resolve_kind("auto", emulation=False) in GPU_KINDS
    except MissingDependencyError as exc:
        assert "PAIREDGE_CUDA_EMULATION" not in str(exc)
    monkeypatch.setenv("PAIREDGE_CUDA_EMULATION", "yes-please")
    with pytest.raises(InputError, match="expected 'hip-cpu'"):
        resolve_kind("auto")
    monkeypatch.setenv("PAIREDGE_CUDA_EMULATION", "off")
    assert not (unavailable_reason("auto") or "").startswith(
        "the emulated CUDA device"
    )  # "off": the GPU path


def test_missing_pieces_give_the_exact_reason(monkeypatch, tmp_path):
    with monkeypatch.context() as m:
        m.setenv("PAIREDGE_HIP_CPU", str(tmp_path / "nowhere"))
        reason = unavailable_reason("hip-cpu")
        assert reason == (
            f"the emulated CUDA device (hip-cpu) is not usable here: HIP-CPU not found at "
            f"$PAIREDGE_HIP_CPU={tmp_path / 'nowhere'} (no include/hip/hip_runtime.h); point "
            "PAIREDGE_HIP_CPU at a HIP CPU Runtime checkout (github.com/ROCm/HIP-CPU)"
        )
        assert emulation_skip_reason() == "CUDA emulation: " + reason.split("here: ")[1]
        row = probe().get("CUDA emulation")
        assert not row.ok and "HIP-CPU not found" in row.detail
    if toolchain.hip_cpu_root()[0] is None:
        pytest.skip(toolchain.hip_cpu_root()[1])
    monkeypatch.setattr(toolchain, "_tbb_header", lambda: None)
    # only the headers missing (the library found), whatever this machine has installed
    monkeypatch.setattr(toolchain, "_tbb_library", lambda: "/usr/lib/libtbb.so")
    assert unavailable_reason("hip-cpu").endswith(
        "Intel TBB headers not found (HIP-CPU runs grids on TBB); install with: apt-get install -y libtbb-dev"
    )
    monkeypatch.setenv("PAIREDGE_CXX", "no-such-gxx")
    assert "no-such-gxx not found" in unavailable_reason("hip-cpu")


def test_opening_the_emulated_device_says_so(caplog, monkeypatch):
    monkeypatch.setenv("PAIREDGE_CUDA_EMULATION", "hip-cpu")
    with caplog.at_level(logging.WARNING, logger="pairedge.gpu.cuda"), open_device() as device:
        assert device.emulated and device.kind == "hip-cpu" and "emulated" in repr(device)
    assert "EMULATED" in caplog.text and "PAIREDGE_CUDA_EMULATION=hip-cpu" in caplog.text


def test_doctor_rows(monkeypatch):
    monkeypatch.setenv("PAIREDGE_CUDA_EMULATION", "hip-cpu")
    found = probe()
    names = [c.name for c in found.checks]
    assert names.index("cuda-python") < names.index("CUDA driver / GPU") < names.index("CUDA emulation")
    row = found.get("CUDA emulation")
    if emulation_skip_reason() is None:
        assert row.ok and "SELECTED by PAIREDGE_CUDA_EMULATION=hip-cpu" in row.detail
        assert "cuda (emulated)" in found.get("flow backends").detail
    monkeypatch.delenv("PAIREDGE_CUDA_EMULATION")
    if emulation_skip_reason() is None:
        assert "select with PAIREDGE_CUDA_EMULATION=hip-cpu" in probe().get("CUDA emulation").detail


def _cuda_imports(path: Path) -> list[str]:
    """Imports of cuda-python / pycuda in one file: import statements, and module names passed as the first
    string argument of any call (importlib.import_module, require, importable, __import__ ...)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            value = node.args[0].value
            names = [value] if isinstance(value, str) and "." in value else []
        found += [
            f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names if n.split(".")[0] in CUDA_MODULES
        ]
    return found


def test_one_cuda_layer_no_other_module_imports_cuda_python_or_pycuda():
    files = [p for d in PACKAGE_DIRS for p in (ROOT / d).rglob("*.py")]
    assert len(files) > 200
    outside = [hit for p in files if LAYER not in p.parents for hit in _cuda_imports(p)]
    assert outside == [], "only pairedge.gpu.cuda (sdk/gpu/cuda/) may import cuda-python or pycuda"
    inside = [hit for p in LAYER.rglob("*.py") for hit in _cuda_imports(p)]
    assert any("cuda.bindings.driver" in h for h in inside) and any("pycuda.driver" in h for h in inside)


@pytest.mark.slow
def test_build_cache_and_compile_errors(monkeypatch, tmp_path):
    """A new kernel file builds once (then comes from the disk cache), an edited one rebuilds, and a
    compile error reports g++'s message and where its whole log is."""
    if emulation_skip_reason() is not None:
        pytest.skip(emulation_skip_reason())
    from pairedge.gpu.cuda.emulated.device import EmulatedDevice

    monkeypatch.setenv("PAIREDGE_CACHE_DIR", str(tmp_path))
    source = """extern "C" __global__ void block_sum(const float* x, int n, float* out) {
        __shared__ float s[64];
        float acc = 0.0f;
        for (int i = threadIdx.x; i < n; i += blockDim.x) acc += x[i];
        s[threadIdx.x] = acc;
        __syncthreads();
        if (threadIdx.x == 0) { float t = 0.0f; for (int k = 0; k < blockDim.x; ++k) t += s[k]; out[0] = t; }
    }"""
    with EmulatedDevice() as device:
        module = device.load_module("sum.cu", source)
        assert module.how == "g++" and device.build_seconds > 0
        x = device.alloc_pinned((100,), np.float32)
        x[:] = np.arange(100)
        dx, dout = device.alloc_device(400), device.alloc_device(4)
        device.htod_async(dx, x)
        device.launch(module.function("block_sum"), (1,), (64,), (("p", dx), ("i", 100), ("p", dout)))
        out = device.alloc_pinned((1,), np.float32)
        device.dtoh_async(out, dout)
        device.synchronize()
        assert out[0] == 4950.0  # every thread ran, and __syncthreads held them
    assert len(list(tmp_path.glob("hip-cpu/sum-*/libsum_hipcpu.so"))) == 1
    from pairedge.gpu.cuda.emulated import build

    tc = toolchain.find_toolchain()[0]
    assert build.build_library("sum.cu", source, tc)[1] == "disk"
    with pytest.raises(
        BackendError, match="g\\+\\+ could not build broken.cu with HIP-CPU \\(full log: .*build.log\\)"
    ):
        build.build_library("broken.cu", source.replace("acc += x[i];", "acc += undefined_thing;"), tc)
