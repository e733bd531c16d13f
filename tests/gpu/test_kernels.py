"""The CUDA flow kernels: compile everywhere a compiler exists; on a GPU, match the CPU reference.

Compile checks need no GPU: ``nvcc`` (when installed) builds every ``.cu`` for the Jetson Orin (sm_87), Jetson
Thor (sm_110 with CUDA 13, sm_101 with CUDA 12.8/12.9) and the lent H200 (sm_90); NVRTC (cuda-python + the
nvidia-cuda-nvrtc wheel) compiles the same sources. The GPU tests skip with the reason ``pairedge doctor``
prints (:func:`pairedge.apps.probe.gpu_skip_reason`); the same kernels run on the CPU, emulated, in
``test_twins.py`` and ``test_emulated_flow.py``.
"""

from __future__ import annotations

import json
import subprocess
from importlib import resources

import cv2
import numpy as np
import pytest
from pairedge.apps.probe import gpu_skip_reason, nvcc_path
from pairedge.core.errors import BackendError, InputError
from pairedge.core.features.flowpool import pooled_reference
from pairedge.gpu.cuda.nvrtc import Target, choose_target
from pairedge.runtime.flow import available_flow_backends, get_flow_backend
from pairedge.runtime.flow.cuda import KERNEL_FILES
from pairedge.runtime.flow.cuda.kernels import kernel_source
from pairedge.runtime.flow.lk_reference import lk_flow
from pairedge.runtime.flow.pooling import PoolRequest

KERNELS = resources.files("pairedge.runtime.flow.cuda").joinpath("kernels")


def _nvcc_release() -> tuple[int, int] | None:
    path = nvcc_path()
    if path is None:
        return None
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
    tail = out.split("release ")[-1].split(",")[0]
    major, minor = tail.split(".")[:2]
    return int(major), int(minor)


def thor_arch(release: tuple[int, int]) -> int:
    """Jetson Thor's architecture for a CUDA release: sm_110 from CUDA 13, sm_101 in CUDA 12.8 / 12.9."""
    return 110 if release >= (13, 0) else 101


def test_every_kernel_file_is_packaged():
    names = sorted(p.name for p in KERNELS.iterdir() if p.name.endswith(".cu"))
    assert names == sorted(KERNEL_FILES)


@pytest.mark.parametrize("kernel", KERNEL_FILES)
@pytest.mark.parametrize("device", ["orin", "thor", "h200"])
def test_nvcc_compiles(kernel, device, tmp_path):
    release = _nvcc_release()
    if release is None:
        pytest.skip("nvcc: not found (CUDA kernels are compiled at run time with NVRTC instead)")
    arch = {"orin": 87, "h200": 90, "thor": thor_arch(release)}[device]
    if arch == 101 and release < (12, 8):
        pytest.skip(f"nvcc {release[0]}.{release[1]} predates Jetson Thor (needs CUDA 12.8+)")
    src = KERNELS.joinpath(kernel)
    out = tmp_path / f"{kernel}.cubin"
    run = subprocess.run(
        [
            nvcc_path(),
            f"-arch=sm_{arch}",
            "--fmad=false",
            "-Werror",
            "all-warnings",
            "-cubin",
            "-o",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert out.stat().st_size > 1000


def _nvrtc_or_skip():
    try:
        from pairedge.gpu.cuda import nvrtc as cc

        cc.nvrtc_version()
    except Exception as exc:  # MissingDependencyError or a missing libnvrtc
        pytest.skip(f"NVRTC not usable here: {exc}")
    return cc


@pytest.mark.parametrize("arch", [87, 90, 110])
def test_nvrtc_compiles(arch, tmp_path, monkeypatch):
    cc = _nvrtc_or_skip()
    if arch not in cc.supported_archs():
        pytest.skip(f"this NVRTC {cc.nvrtc_version()} cannot build sm_{arch}")
    monkeypatch.setenv("PAIREDGE_CACHE_DIR", str(tmp_path))
    for name in KERNEL_FILES:
        code, how = cc.compiled(name, kernel_source(name), Target("cubin", arch))
        assert how in ("nvrtc", "memory") and code[:4] == b"\x7fELF"
    cc._MEMORY.clear()
    code, how = cc.compiled("pool.cu", kernel_source("pool.cu"), Target("cubin", arch))
    assert how == "disk" and code[:4] == b"\x7fELF"  # cached per architecture on disk


def test_nvrtc_reports_compile_errors():
    cc = _nvrtc_or_skip()
    with pytest.raises(BackendError, match="error"):
        cc.nvrtc_compile(
            'extern "C" __global__ void k() { undefined_thing(); }', "bad.cu", Target("cubin", 90)
        )


def test_target_selection():
    assert choose_target(90, [75, 80, 87, 90]) == Target("cubin", 90)
    assert choose_target(121, [75, 87, 90]) == Target("ptx", 90)  # newer GPU: PTX, JIT by the driver
    with pytest.raises(BackendError, match="flow='reference'"):
        choose_target(70, [75, 80])


def test_without_gpu_the_backend_says_why():
    reason = available_flow_backends()["cuda"]
    if reason is None:
        pytest.skip("a GPU is usable here: the GPU tests below run instead")
    with pytest.raises(BackendError, match="not available on this machine"):
        get_flow_backend("cuda")


# ------------------------------------------------------------------------------------------ on a GPU

GPU_REASON = gpu_skip_reason(need_cuda_python=True)
gpu = pytest.mark.skipif(GPU_REASON is not None, reason=str(GPU_REASON))


def _pair(h: int, w: int, dx: float = 2.6, dy: float = -1.3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    noise = rng.integers(0, 255, (max(h // 6, 1), max(w // 6, 1)), dtype=np.uint8)
    a = cv2.GaussianBlur(cv2.resize(noise, (w, h), interpolation=cv2.INTER_CUBIC), (5, 5), 1.2)
    b = cv2.warpAffine(a, np.float32([[1, 0, dx], [0, 1, dy]]), (w, h), borderMode=cv2.BORDER_REFLECT)
    return a, b


@pytest.fixture(scope="module")
def cuda_flow():
    if GPU_REASON is not None:
        pytest.skip(GPU_REASON)
    backend = get_flow_backend("cuda", scale=1.0)
    yield backend
    backend.close()


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("shape", [(240, 320), (1, 1), (3, 500), (37, 53)])
def test_gpu_flow_matches_reference(cuda_flow, shape):
    a, b = _pair(*shape)
    ref = lk_flow(a, b, cuda_flow.params)
    got = cuda_flow.compute_scaled(a, b).copy()
    assert np.isfinite(got).all()
    assert np.abs(got - ref).mean() <= 1e-3, np.abs(got - ref).mean()
    assert cuda_flow.last_gpu_ms is not None and cuda_flow.last_gpu_ms > 0


@pytest.mark.gpu
@gpu
def test_gpu_pooling_matches_reference(cuda_flow):
    a, b = _pair(240, 320)
    boxes = np.array(
        [[10, 20, 40, 100], [200, 50, 60, 150], [-50, -50, 70, 90], [330, 10, 20, 20]], np.float64
    )
    request = PoolRequest(boxes, (0.15, 0.05), 8)
    pooled = cuda_flow.compute_pooled(a, b, request)
    dense = cuda_flow.compute_scaled(a, b).copy()
    want = pooled_reference(dense, boxes, 1.0, request.inset, request.grid_step)
    np.testing.assert_array_equal(pooled.rects, want.rects)
    np.testing.assert_allclose(pooled.moments, want.moments, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(pooled.grid, want.grid)


@pytest.mark.gpu
@gpu
def test_gpu_size_change_and_bad_input(cuda_flow):
    a, b = _pair(60, 80)
    assert cuda_flow.compute_scaled(a, b).shape == (60, 80, 2)
    c, d = _pair(50, 90)
    assert cuda_flow.compute_scaled(c, d).shape == (50, 90, 2)  # buffers reallocated for the new size
    with pytest.raises(InputError):
        cuda_flow.compute_scaled(a, b.astype(np.float32))


def test_doctor_lists_flow_backends():
    from pairedge.apps.probe import probe

    check = probe().get("flow backends")
    assert check.ok and "reference" in check.detail and "dis" in check.detail
    if available_flow_backends()["cuda"] is not None:
        assert "cuda:" in check.detail  # with the reason it is not usable


@pytest.mark.gpu
@gpu
def test_gpu_graphs_equal_eager_launches(cuda_flow):
    eager = get_flow_backend("cuda", scale=1.0, graphs=False)
    seq = [_pair(120, 160, dx=k, dy=-0.5 * k)[1] for k in range(4)]
    for prev, cur in zip(seq, seq[1:], strict=False):
        np.testing.assert_array_equal(cuda_flow.compute_scaled(prev, cur), eager.compute_scaled(prev, cur))
    assert cuda_flow.compile_info.get("graphs") == "on", cuda_flow.compile_info
    eager.close()


def test_cli_run_flow_cuda_and_reference(tmp_path, monkeypatch):
    """``pairedge run --flow cuda`` without a GPU: exit 1, one line with the reason; ``--flow reference``
    runs. With ``PAIREDGE_CUDA_EMULATION=hip-cpu`` it runs on the emulated device and scores what the
    reference scores."""
    from pairedge.apps.cli import app
    from pairedge.measure.sim.output import write_scene
    from run_demo_helpers import toy_model
    from typer.testing import CliRunner

    files = write_scene("static", 2, 4, tmp_path / "sim")
    video, model = tmp_path / "sim" / files.video, toy_model(tmp_path / "model")
    base = ["run", str(video), "-d", str(tmp_path / "sim" / "gt/gt.txt"), "--model", str(model)]
    runner = CliRunner()
    ok = runner.invoke(app, [*base, "--flow", "reference", "--out", str(tmp_path / "ref")])
    assert ok.exit_code == 0, ok.output
    if available_flow_backends()["cuda"] is None:
        pytest.skip("a GPU is usable here")
    monkeypatch.delenv("PAIREDGE_CUDA_EMULATION", raising=False)
    bad = runner.invoke(app, [*base, "--flow", "cuda", "--out", str(tmp_path / "cuda")])
    assert bad.exit_code == 1 and "cuda" in bad.output and "not available" in bad.output, bad.output
    assert "Traceback" not in bad.output and "PAIREDGE_CUDA_EMULATION=hip-cpu" in bad.output  # the way out
    from pairedge.apps.probe import emulation_skip_reason

    if emulation_skip_reason() is not None:
        pytest.skip(emulation_skip_reason())
    monkeypatch.setenv("PAIREDGE_CUDA_EMULATION", "hip-cpu")
    emulated = runner.invoke(app, [*base, "--flow", "cuda", "--out", str(tmp_path / "emulated")])
    assert emulated.exit_code == 0, emulated.output

    def scored(folder):
        records = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()[1:]]
        return [[(i["ids"], i["label"], i["probs"]) for i in r["interactions"]] for r in records]

    assert scored(tmp_path / "emulated") == scored(tmp_path / "ref")
    summary = json.loads((tmp_path / "emulated" / "summary.json").read_text())
    assert "EMULATED" in summary["pipeline"]["flow"] and "flow_gpu" not in summary["latency_ms"]
    assert "EMULATED device" in emulated.output  # the console summary says so too
