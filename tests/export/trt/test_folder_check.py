"""`pairedge doctor --model FOLDER`: which precisions and backends of a model folder run on this machine,
with the runtime's own checks (manifest hashes, engine manifests against the local TensorRT and GPU)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fake_tensorrt import FakeCudaMemory, make_fake_tensorrt
from pairedge.apps.cli import app
from pairedge.apps.folder_check import FolderReport, LocalGpu, RunOption, inspect_model_folder
from pairedge.export.tensorrt.builder import BuildSettings, Profile
from pairedge.export.tensorrt.folder import build_model_folder
from typer.testing import CliRunner

runner = CliRunner()
NO_GPU = LocalGpu(None, None, None, "TensorRT is not installed", "no CUDA driver (libcuda) found")
ORIN = LocalGpu("10.3.0.30", "Orin", "8.7")


def option(report: FolderReport, precision: str, backend: str) -> RunOption:
    found = [o for o in report.options if o.precision == precision and o.backend.startswith(backend)]
    assert len(found) == 1, report.options
    return found[0]


def test_bundled_folder_runs_fp32_and_its_int8_on_the_cpu(model_dir: Path) -> None:
    """The bundled folder ships fp32 and the QAT int8 files (no fp16)."""
    report = inspect_model_folder(model_dir, gpu=NO_GPU)
    assert report.integrity.startswith("verified")
    assert option(report, "fp32", "onnxruntime").runs and option(report, "int8", "onnxruntime").runs
    assert "not in the folder (`pairedge calibrate`" in str(option(report, "fp16", "-").reason)
    assert "pairedge build" in str(option(report, "all", "tensorrt").reason)
    assert report.summary() == "runs here: fp32, int8 on onnxruntime" and not report.problems
    assert report.model.startswith("pairedge v2, flow") and report.flow == "dis: runs here"


def test_calibrated_folder_runs_every_precision(full_model_dir: Path) -> None:
    report = inspect_model_folder(full_model_dir, gpu=NO_GPU)
    assert [o.precision for o in report.runnable] == ["fp32", "fp16", "int8"]
    assert report.summary() == "runs here: fp32, fp16, int8 on onnxruntime"


def test_engines_are_judged_against_this_machine(full_model_dir: Path) -> None:
    build_model_folder(
        full_model_dir,
        BuildSettings("fp16", Profile(1, 32, 256), 128),
        trt=make_fake_tensorrt(ORIN.tensorrt_version),
        memory=FakeCudaMemory("Orin", "8.7", "12.6"),
    )
    here = option(inspect_model_folder(full_model_dir, gpu=ORIN), "fp16", "tensorrt")
    assert here.runs and here.files[0].startswith("engines/") and here.files[1].endswith("stage2.fp16.engine")
    no_gpu = option(inspect_model_folder(full_model_dir, gpu=NO_GPU), "fp16", "tensorrt").reason
    assert "built for Orin (compute capability 8.7, TensorRT 10.3.0.30)" in str(no_gpu)
    assert "TensorRT is not installed" in str(no_gpu) and "no CUDA driver" in str(no_gpu)
    xavier = option(
        inspect_model_folder(full_model_dir, gpu=LocalGpu("10.3.0.30", "Xavier", "7.2")), "fp16", "tensorrt"
    )
    assert "this GPU is 7.2 (Xavier)" in str(xavier.reason) and "pairedge build" in str(xavier.reason)
    newer = option(
        inspect_model_folder(full_model_dir, gpu=LocalGpu("10.4.0.1", "Orin", "8.7")), "fp16", "tensorrt"
    )
    assert "this machine runs 10.4.0.1" in str(newer.reason)
    # engine rows are the table's engine files (pairedge.core.artefacts): a stray .engine is no option
    (next(full_model_dir.glob("engines/*/")) / "stage1.bf16.engine").write_bytes(b"x")
    engines = [
        o
        for o in inspect_model_folder(full_model_dir, gpu=ORIN).options
        if o.backend.startswith("tensorrt (")
    ]
    assert [o.precision for o in engines] == ["fp16"]
    # a corrupt engine is a broken file: reported, never deserialised, and the option does not run
    engine = next(full_model_dir.glob("engines/*/stage2.fp16.engine"))
    blob = bytearray(engine.read_bytes())
    blob[0] ^= 0xFF
    engine.write_bytes(bytes(blob))
    report = inspect_model_folder(full_model_dir, gpu=ORIN)
    assert not option(report, "fp16", "tensorrt").runs
    assert any("corrupt" in p for p in report.problems)


def test_tampered_file_is_reported_and_the_cli_exits_1(model_dir: Path) -> None:
    path = model_dir / "stage2.onnx"
    path.write_bytes(path.read_bytes() + b"\0")
    report = inspect_model_folder(model_dir, gpu=NO_GPU)
    assert report.integrity.startswith("FAILED") and report.problems
    assert not report.runnable and "SHA-256" in str(option(report, "fp32", "onnxruntime").reason)
    res = runner.invoke(app, ["doctor", "--model", str(model_dir)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "nothing in this folder runs on this machine" in res.output


def test_cli_json_table_and_odd_folder_names(model_dir: Path, tmp_path: Path) -> None:
    odd = tmp_path / "[red]robot"
    shutil.copytree(model_dir, odd)
    res = runner.invoke(app, ["doctor", "--model", str(odd), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert set(data) == {"machine", "model"} and "onnxruntime" in data["machine"]
    assert data["model"]["summary"].startswith("runs here: fp32") and data["model"]["folder"] == str(odd)
    res = runner.invoke(app, ["doctor", "--model", str(odd)])
    assert res.exit_code == 0 and "[red]robot" in res.output.replace("\n", "")
    plain = runner.invoke(app, ["doctor", "--json"])  # without --model the JSON is the probe, as before
    assert plain.exit_code == 0 and "machine" not in json.loads(plain.output)


def test_not_a_folder_is_one_line(tmp_path: Path) -> None:
    res = runner.invoke(app, ["doctor", "--model", str(tmp_path / "missing")])
    assert res.exit_code == 1 and "not a model folder" in res.output and "Traceback" not in res.output
    with pytest.raises(Exception, match="not a model folder"):
        inspect_model_folder(tmp_path / "missing", gpu=NO_GPU)
