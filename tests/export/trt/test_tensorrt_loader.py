"""Native TensorRT backend over the fake module + fake CUDA memory; manifests that refuse mismatches."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from fake_tensorrt import FakeCudaMemory, make_fake_tensorrt
from pairedge.apps.cli import app
from pairedge.core.errors import InputError, ModelError
from pairedge.core.features import get_spec
from pairedge.export.tensorrt.builder import BuildSettings, Profile
from pairedge.export.tensorrt.folder import build_model_folder
from pairedge.runtime.backends import load_model
from pairedge.runtime.backends.tensorrt import TensorRTBackend, TensorRTOptions
from pairedge.runtime.backends.tensorrt_loader import (
    EngineEnvironment,
    EngineFileError,
    EngineMismatchError,
    check_compatible,
    manifest_path,
)
from typer.testing import CliRunner

F1, F2 = get_spec("pairedge").stage1_dim, get_spec("pairedge").stage2_dim  # the bundled model's widths

VERSION = "10.3.0.30"


def _reference(onnx_path: Path, x: np.ndarray) -> np.ndarray:
    sess = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    return sess.run(["logits"], {"features": x})[0]


def _built(model_dir: Path, precision: str = "fp32", profile: Profile = Profile(1, 8, 16)) -> list:
    trt = make_fake_tensorrt(VERSION)
    return build_model_folder(model_dir, BuildSettings(precision, profile), trt=trt, memory=FakeCudaMemory())


def _backend(onnx: Path, memory: FakeCudaMemory, version: str = VERSION, **opts) -> TensorRTBackend:
    trt = make_fake_tensorrt(version, memory=memory)
    backend = TensorRTBackend(load_model(onnx), TensorRTOptions(**opts), trt=trt, memory=memory)
    backend.trt_calls = trt.calls  # type: ignore[attr-defined]
    return backend


@pytest.mark.parametrize("n", [1, 5, 16, 17, 40])
def test_inference_matches_onnx_and_splits_batches(model_dir: Path, n: int) -> None:
    _built(model_dir, profile=Profile(3, 8, 16))
    memory = FakeCudaMemory()
    x = np.random.default_rng(n).normal(size=(n, F2)).astype(np.float32)
    with _backend(model_dir / "stage2.onnx", memory) as backend:
        got = backend.infer(x)
        calls = backend.trt_calls
    np.testing.assert_allclose(got, _reference(model_dir / "stage2.onnx", x), rtol=1e-5, atol=1e-5)
    chunks = [min(16, n - s) for s in range(0, n, 16)]
    shapes = [c[2] for c in calls if c[0] == "IExecutionContext.set_input_shape"]
    assert shapes == [(max(c, 3), F2) for c in chunks]  # max 16 per call, padded up to the profile min 3
    assert [c for c in calls if c[0] == "IExecutionContext.execute_async_v3"] == [
        ("IExecutionContext.execute_async_v3", 0xABC)
    ] * len(chunks)
    assert sum(c[0] == "ICudaEngine.create_execution_context" for c in calls) == 1
    # device buffers sized to the profile max, pinned host buffers, one stream, everything freed
    assert ("alloc_device", 16 * F2 * 4) in memory.ops and ("alloc_device", 16 * 3 * 4) in memory.ops
    assert ("alloc_pinned", (16, F2), "float32") in memory.ops
    assert memory.ops.count(("create_stream",)) == 1 and memory.closed


def test_pipeline_style_lookup_by_precision(full_model_dir: Path) -> None:
    _built(full_model_dir, "fp16")
    memory = FakeCudaMemory()
    x = np.random.default_rng(0).normal(size=(4, F1)).astype(np.float32)
    with _backend(full_model_dir / "stage1.fp16.onnx", memory) as backend:
        assert backend.engine_path.name == "stage1.fp16.engine"
        got = backend.infer(x)
    np.testing.assert_allclose(got, _reference(full_model_dir / "stage1.fp16.onnx", x), rtol=1e-5, atol=1e-5)


def test_precision_comes_from_the_table_of_artefacts(full_model_dir: Path, tmp_path: Path) -> None:
    """No option: the table's precision of the ONNX file; a file it does not name is served by its fp32
    engine."""
    memory = FakeCudaMemory()
    for name, precision in (
        ("stage1.onnx", "fp32"),
        ("stage2.fp16.onnx", "fp16"),
        ("stage1.int8.onnx", "int8"),
    ):
        assert _backend(full_model_dir / name, memory).precision == precision
    assert _backend(full_model_dir / "stage1.onnx", memory, precision="int8").precision == "int8"
    loose = tmp_path / "loose.fp16.onnx"
    loose.write_bytes((full_model_dir / "stage1.onnx").read_bytes())
    assert _backend(loose, memory).precision == "fp32"
    with pytest.raises(InputError, match="precision: expected one of fp32, fp16, int8, got 'fp8'"):
        TensorRTOptions(precision="fp8")


def _expect_refusal(onnx: Path, memory: FakeCudaMemory, version: str, match: str) -> str:
    backend = _backend(onnx, memory, version)
    with pytest.raises(EngineMismatchError, match=match) as info:
        backend.activate()
    assert not [c for c in backend.trt_calls if c[0] == "Runtime.deserialize_cuda_engine"]
    return str(info.value)


def test_refuses_other_tensorrt_version(model_dir: Path) -> None:
    built = _built(model_dir)
    engine = built[0].engine
    # the same device tag folder, but the engine claims another TensorRT build
    data = json.loads(manifest_path(engine).read_text())
    data["tensorrt_version"] = "10.3.0.26"
    manifest_path(engine).write_text(json.dumps(data))
    msg = _expect_refusal(model_dir / "stage1.onnx", FakeCudaMemory(), VERSION, "TensorRT 10.3.0.26 built it")
    assert msg.endswith(f"pairedge build {model_dir} --precision fp32 --profile 1,8,16 --workspace 256")


def test_refuses_other_compute_capability(model_dir: Path) -> None:
    built = _built(model_dir)
    # an engine folder copied from an Orin onto a Xavier (sm72) is refused
    memory = FakeCudaMemory(name="Xavier", cc="7.2")
    backend = _backend(model_dir / "stage2.onnx", memory, engine_dir=str(built[1].engine.parent))
    with pytest.raises(
        EngineMismatchError, match=r"compute capability 8\.7 \(Orin\), this GPU is 7\.2"
    ) as info:
        backend.activate()
    assert str(info.value).endswith(
        f"pairedge build {model_dir} --precision fp32 --profile 1,8,16 --workspace 256"
    )
    assert not [c for c in backend.trt_calls if c[0] == "Runtime.deserialize_cuda_engine"] and memory.closed
    # and without an explicit folder, the Xavier simply has no engine of its own yet
    with pytest.raises(ModelError, match="no fp32 engine for this device \\(Xavier"):
        _backend(model_dir / "stage2.onnx", FakeCudaMemory(name="Xavier", cc="7.2")).activate()


def test_refuses_changed_onnx(model_dir: Path) -> None:
    _built(model_dir)
    import onnx

    proto = onnx.load(str(model_dir / "stage1.onnx"))
    proto.doc_string = "retrained"
    onnx.save(proto, str(model_dir / "stage1.onnx"))
    _expect_refusal(model_dir / "stage1.onnx", FakeCudaMemory(), VERSION, "the model changed since the build")


@pytest.mark.parametrize("damage", ["truncate", "flip", "grow"])
def test_corrupt_engine_never_reaches_deserialize(model_dir: Path, damage: str) -> None:
    engine = _built(model_dir)[0].engine
    blob = bytearray(engine.read_bytes())
    if damage == "truncate":
        blob = blob[: len(blob) // 2]
    elif damage == "flip":
        blob[len(blob) // 2] ^= 0xFF
    else:
        blob += b"\0" * 7
    engine.write_bytes(bytes(blob))
    backend = _backend(model_dir / "stage1.onnx", FakeCudaMemory())
    match = {"truncate": "truncated", "flip": "corrupt", "grow": "larger than recorded"}[damage]
    with pytest.raises(EngineFileError, match=match):
        backend.activate()
    assert not [c for c in backend.trt_calls if c[0] == "Runtime.deserialize_cuda_engine"]


def test_missing_engine_and_manifest_say_how_to_build(model_dir: Path) -> None:
    with pytest.raises(ModelError, match=f"pairedge build {model_dir} --precision fp32"):
        _backend(model_dir / "stage1.onnx", FakeCudaMemory()).activate()
    engine = _built(model_dir)[0].engine
    manifest_path(engine).unlink()
    with pytest.raises(EngineFileError, match="manifest not found"):
        _backend(model_dir / "stage1.onnx", FakeCudaMemory()).activate()


def test_stage_mismatch_refused(model_dir: Path) -> None:
    built = _built(model_dir)
    with pytest.raises(ModelError, match="stage-1 engine cannot serve the stage-2"):
        _backend(model_dir / "stage2.onnx", FakeCudaMemory(), engine=str(built[0].engine)).activate()


def test_registry_reports_why_unavailable() -> None:
    from pairedge.runtime.backends import available_backends

    reason = available_backends()["tensorrt"]
    assert reason is not None and "TensorRT is not installed" in reason and "JetPack" in reason


def test_cuda_python_memory_without_gpu_is_a_clear_error() -> None:
    pytest.importorskip("cuda.bindings.driver")
    from pairedge.apps.probe import gpu_skip_reason
    from pairedge.core.errors import DeviceUnavailableError
    from pairedge.gpu.cuda.driver import CudaPythonDevice

    if gpu_skip_reason() is None:
        pytest.skip("a GPU is present: covered by the device tests")
    with pytest.raises(DeviceUnavailableError, match="CUDA device 0 is not usable"):
        CudaPythonDevice(0)


def test_pipeline_load_with_backend_tensorrt(full_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pipeline.load(folder, precision=..., backend="tensorrt") goes through the registry to the engines."""
    import sys

    from pairedge.runtime import pipeline as pipeline_module
    from pairedge.runtime.backends import tensorrt as backend_module

    pytest.importorskip("cuda.bindings.driver")  # unavailable_reason wants a CUDA binding importable
    _built(full_model_dir, "int8")
    memory = FakeCudaMemory()
    monkeypatch.setitem(sys.modules, "tensorrt", make_fake_tensorrt(VERSION, memory=memory))
    monkeypatch.setattr(backend_module, "open_cuda_memory", lambda kind, device: memory)
    x = np.random.default_rng(5).normal(size=(7, F2)).astype(np.float32)
    with pipeline_module.Pipeline.load(
        full_model_dir, backend="tensorrt", precision="int8", flow="none"
    ) as pipe:
        assert (
            isinstance(pipe.stage2, TensorRTBackend) and pipe.stage2.engine_path.name == "stage2.int8.engine"
        )
        got = pipe.stage2.infer(x)
    np.testing.assert_allclose(got, _reference(full_model_dir / "stage2.int8.onnx", x), rtol=1e-5, atol=1e-5)


def test_wrong_options_type_is_an_input_error(model_dir: Path) -> None:
    from pairedge.runtime.backends.ort import OrtOptions

    with pytest.raises(InputError, match="expected TensorRTOptions, got OrtOptions"):
        TensorRTBackend(load_model(model_dir / "stage1.onnx"), OrtOptions())  # type: ignore[arg-type]
    with pytest.raises(InputError, match="memory: expected one of auto, cuda-python, pycuda"):
        TensorRTOptions(memory="cupy")


# -- manifest_matrix: Every combination of mismatches (TensorRT version, compute capability, ONNX hash) is
# refused, naming each difference and the rebuild command; only an exact match passes. Also: int8 manifests
# carry the calibration hash, `pairedge build` runs end to end over the fake module, and nothing here imports
# torch.


BUILT = EngineEnvironment("10.3.0.30", "12.6", "Orin", "8.7")
OTHER_VERSIONS = ["10.3.0.26", "10.3.1.30", "10.4.0.30", "10.13.0.35", "11.0.0.1"]
OTHER_CC = ["7.2", "8.6", "8.9", "11.0"]


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory):
    from trt_models import DEFAULT_MODEL

    folder = tmp_path_factory.mktemp("m")
    for name in ("stage1.onnx", "stage2.onnx"):
        (folder / name).write_bytes((DEFAULT_MODEL / name).read_bytes())
    built = build_model_folder(
        folder,
        BuildSettings("fp32", Profile(1, 32, 256), 128),
        trt=make_fake_tensorrt(BUILT.tensorrt_version),
        memory=FakeCudaMemory("Orin", "8.7", "12.6"),
    )
    return built[0].manifest, folder


CASES = [
    (version, cc, onnx_changed)
    for version, cc, onnx_changed in itertools.product(
        [None, *OTHER_VERSIONS], [None, *OTHER_CC], [False, True]
    )
]


@pytest.mark.parametrize(("version", "cc", "onnx_changed"), CASES)
def test_every_mismatch_is_refused(manifest, version: str | None, cc: str | None, onnx_changed: bool) -> None:
    m, folder = manifest
    env = EngineEnvironment(
        version or BUILT.tensorrt_version, "12.6", "Xavier" if cc else "Orin", cc or "8.7"
    )
    sha = "0" * 64 if onnx_changed else m.onnx["sha256"]
    if not (version or cc or onnx_changed):
        check_compatible(m, env, onnx_sha256=sha, model_dir=folder, engine=folder / "e")
        return
    with pytest.raises(EngineMismatchError) as info:
        check_compatible(m, env, onnx_sha256=sha, model_dir=folder, engine=folder / "e")
    msg = str(info.value)
    assert (f"this machine runs {version}" in msg) == bool(version)
    assert (f"this GPU is {cc}" in msg) == bool(cc)
    assert ("the model changed since the build" in msg) == onnx_changed
    assert msg.endswith(f"pairedge build {folder} --precision fp32 --profile 1,32,256 --workspace 128")


def test_int8_manifest_records_the_calibration_report(full_model_dir: Path) -> None:
    (full_model_dir / "calibration.json").write_text(json.dumps({"method": "percentile"}))
    built = build_model_folder(
        full_model_dir, BuildSettings("int8"), trt=make_fake_tensorrt("10.13.0.35"), memory=FakeCudaMemory()
    )
    from pairedge.runtime.backends.tensorrt_loader import sha256_file

    assert built[0].manifest.calibration == {
        "file": "calibration.json",
        "sha256": sha256_file(full_model_dir / "calibration.json"),
    }
    fp32 = build_model_folder(
        full_model_dir, BuildSettings("fp32"), trt=make_fake_tensorrt("10.13.0.35"), memory=FakeCudaMemory()
    )
    assert fp32[0].manifest.calibration is None


def test_cli_build_over_the_fake_module(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from pairedge.export.tensorrt import folder as folder_module
    from pairedge.runtime.backends import cudamem

    monkeypatch.setitem(sys.modules, "tensorrt", make_fake_tensorrt("10.13.0.35"))
    monkeypatch.setattr(cudamem, "open_cuda_memory", lambda kind="auto", device=0: FakeCudaMemory())
    assert folder_module  # build_model_folder imports open_cuda_memory from cudamem at call time
    cache = tmp_path / "t.cache"
    result = CliRunner().invoke(
        app, ["build", str(model_dir), "--profile", "1,16,64", "--timing-cache", str(cache)]
    )
    assert result.exit_code == 0, result.output
    assert "no TensorRT readiness problems" in result.output  # check ran with the installed version's target
    assert re.search(r"stage2\.onnx\s*│\s*tensorrt-10\.13\s*│\s*ok", result.output), result.output
    engines = sorted((model_dir / "engines" / "orin-sm87-trt10.13.0").glob("*.engine"))
    assert [e.name for e in engines] == ["stage1.fp32.engine", "stage2.fp32.engine"]
    flat = " ".join(
        result.output.split()
    )  # the console wraps at its width: the line length depends on the path
    assert "profile 1/16/64" in flat and cache.is_file()


def test_nothing_imports_torch() -> None:
    code = (
        "import sys\n"
        "import pairedge.export.tensorrt.builder, pairedge.export.tensorrt.folder, "
        "pairedge.export.tensorrt.check\n"
        "import pairedge.runtime.backends.tensorrt, pairedge.runtime.backends.cudamem, "
        "pairedge.apps.cli.build\n"
        "import pairedge.apps.cli.check\n"
        "assert 'torch' not in sys.modules and 'tensorrt' not in sys.modules, sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
