"""benchmarks/jetson/report.py turns a run folder (steps, doctor, engine manifests, parity, bench) into
report.md."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

from fake_tensorrt import FakeCudaMemory, make_fake_tensorrt
from pairedge.export.tensorrt.builder import BuildSettings
from pairedge.export.tensorrt.folder import build_model_folder

ROOT = Path(__file__).resolve().parents[3]


def _report_module():
    spec = importlib.util.spec_from_file_location(
        "jetson_report", ROOT / "benchmarks" / "jetson" / "report.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_report_collects_a_run(model_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    model_dir.rename(run / "model")
    build_model_folder(
        run / "model", BuildSettings("fp32"), trt=make_fake_tensorrt("10.3.0.30"), memory=FakeCudaMemory()
    )
    (run / "status.tsv").write_text("doctor\t0\tpairedge doctor --json\nbuild-fp16\t1\tpairedge build m\n")
    (run / "doctor.json").write_text(
        json.dumps({"checks": [{"name": "TensorRT", "ok": True, "detail": "10.3"}]})
    )
    (run / "parity-tensorrt-fp32.md").write_text("PASS: 4/4 levels\n")
    (run / "parity-tensorrt-fp32.json").write_text(json.dumps({"verdict": "PASS"}))
    module = _report_module()
    report = module.write_report(run).read_text()
    assert "| build-fp16 | **1** | `pairedge build m` |" in report and "| TensorRT | True | 10.3 |" in report
    assert "orin-sm87-trt10.3.0/stage1.fp32.engine | 10.3.0.30 | Orin sm87 | fp32 | 1/64/512 |" in report
    assert (
        "PASS: 4/4 levels" in report and "(parity-tensorrt-int8.md missing: see status and logs/)" in report
    )
    assert "| fp32 | model/ fp32 | not run | PASS | not run | not run |" in report
    assert "step build-fp16 (exit 1)" in module.failures(run) and module.main([str(run)]) == 1


def test_run_all_is_valid_bash() -> None:
    subprocess.run(["bash", "-n", str(ROOT / "benchmarks" / "jetson" / "run_all.sh")], check=True)
