"""Every combination of mismatches (TensorRT version, compute capability, ONNX hash) is refused, naming each
difference and the rebuild command; only an exact match passes. Also: int8 manifests carry the calibration
hash, `pairedge build` runs end to end over the fake module, and nothing here imports torch."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fake_tensorrt import FakeCudaMemory, make_fake_tensorrt
from pairedge.apps.cli import app
from pairedge.export.tensorrt.builder import BuildSettings, Profile
from pairedge.export.tensorrt.folder import build_model_folder
from pairedge.runtime.backends.tensorrt_loader import EngineEnvironment, EngineMismatchError, check_compatible
from typer.testing import CliRunner

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
