"""benchmarks/jetson/run_all.sh runs end to end with ONNX Runtime on a machine without TensorRT: every
TensorRT step is skipped with the probe's reason (never a pass), and report.md says PASS / FAIL per precision
on held-out data, as the parity reports and bench.json say."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pairedge.apps.probe import gpu_skip_reason

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "jetson" / "run_all.sh"
#: Small but real: calibrate on two training scenes, a 12-frame held-out pack, a 12-frame held-out bench.
QUICK = {
    "CAL_SCENES": "static:0,moving:0",
    "CAL_FRAMES": "40",
    "FRAMES": "12",
    "BENCH_DATA": "sim:static:seeds=5001:frames=12",
    "BENCH_REPEATS": "5",
    "BENCH_PEOPLE": "2",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("jetson") / "run"
    bindir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        **QUICK,
        "OUT": str(out),
        "PYTHON": sys.executable,
        "OMP_NUM_THREADS": "1",
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
    }
    done = subprocess.run(
        ["bash", str(SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    return out, done


def _status(out: Path) -> dict[str, tuple[str, str]]:
    with (out / "status.tsv").open() as f:
        return {row[0]: (row[1], row[2]) for row in csv.reader(f, delimiter="\t")}


def _verdicts(report: str) -> dict[str, list[str]]:
    """variant -> its cells in the report's verdict table."""
    table = report.split("## Verdicts per precision (held-out data)")[1].split("## Steps")[0]
    rows = [line.strip("|").split(" | ") for line in table.splitlines() if line.startswith("| ")]
    return {r[0].strip(): [c.strip() for c in r[1:]] for r in rows[1:]}


@pytest.mark.slow
def test_run_all_on_cpu_end_to_end(run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, done = run
    status = _status(out)
    report = (out / "report.md").read_text()
    verdicts = _verdicts(report)
    assert {"fp32", "fp16", "int8"} <= set(verdicts), report[:2000]
    reason = gpu_skip_reason(need_tensorrt=True)
    for name, (rc, text) in status.items():
        if name.startswith(("build-", "parity-tensorrt-", "bench-tensorrt")):
            assert (rc == "skip") == (reason is not None), (name, rc, text)
            if reason is not None:
                assert text == reason and f"| {name} | skipped | {reason} |" in report
        elif rc != "skip":
            assert rc in ("0", "1"), (name, rc, text)
    for step in ("doctor", "calibrate", "parity-pack", "bench"):
        assert status[step][0] == "0", (step, (out / "logs" / f"{step}.log").read_text()[-2000:])
    pack = json.loads((out / "parity-onnxruntime-fp32.json").read_text())["pack"]
    assert pack["source"] == "sim:noisy:5000" and pack["frames"] == 12  # a held-out seed
    for variant, cells in verdicts.items():
        parity = json.loads((out / f"parity-onnxruntime-{variant}.json").read_text())
        assert cells[1] == ("PASS" if parity["verdict"] == "PASS" else parity["summary"]).replace("|", "/")
        assert status[f"parity-onnxruntime-{variant}"][0] == ("0" if parity["verdict"] == "PASS" else "1")
        assert cells[3].startswith(("PASS (gate", "FAIL (gate")), cells
        if reason is not None:
            assert cells[2] == cells[4] == f"skipped: {reason}"
    bench = json.loads((out / "bench" / "bench.json").read_text())
    fp32 = next(r for r in bench["rows"] if r["precision"] == "fp32" and r["backend"] == "onnxruntime")
    assert fp32["gate_passed"] and verdicts["fp32"][1] == "PASS" and verdicts["fp32"][3].startswith("PASS")
    everything_passed = all(
        c.startswith(("PASS", "skipped:")) for cells in verdicts.values() for c in cells[1:]
    )
    assert done.returncode == (0 if everything_passed else 1), done.stdout[-3000:] + done.stderr[-2000:]
    assert ("NOT PASSED" in done.stdout) == (not everything_passed)
