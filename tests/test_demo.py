"""``pairedge demo`` end to end: simulate, run on ONNX Runtime CPU, score against the simulator's truth."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pairedge.cli import app
from pairedge.default_model import default_model_dir
from pairedge.demo import DemoOptions, example_frames, run_demo
from pairedge.errors import InputError
from pairedge.metrics.pairwise_files import read_pairwise_file
from run_demo_helpers import toy_model, video_frames
from typer.testing import CliRunner

runner = CliRunner()
BUNDLED = (default_model_dir() / "stage1.onnx").is_file() and (default_model_dir() / "stage2.onnx").is_file()


def test_demo_library_writes_everything(tmp_path: Path) -> None:
    model = toy_model(tmp_path / "model")
    result = run_demo(tmp_path / "out", DemoOptions(frames=20, model=model, boxes="detections"))
    out = tmp_path / "out"
    assert result.summary.frames == 20
    assert set(result.files) >= {"results", "video", "gt_sim7", "gt_paper3", "metrics", "summary"}
    assert video_frames(Path(result.files["video"])) == 20
    gold = read_pairwise_file(out / "pairs_gt_paper3.jsonl", ("walking_together", "standing_together",
                                                              "sitting_together"))  # fmt: skip
    assert len(gold.frames) == 20
    assert result.report is not None
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["details"]["counts"]["gold_frames"] == 20
    for key in ("pair_precision", "pair_recall", "pair_f1", "accuracy", "mpca", "macro_f1"):
        value = result.report.summary[key]
        assert value != value or 0.0 <= value <= 1.0  # NaN or a rate
    assert [e.frame for e in result.examples] == example_frames(20, 3) == [10, 14, 19]
    assert json.loads((out / "summary.json").read_text())["frames"] == 20
    # the toy folder has no manifest.json: the demo says its files were not verified, as `pairedge run` does
    assert any(n.startswith("unverified:") and "manifest.json" in n for n in result.notes)


def test_demo_cli_prints_interactions_metrics_latency(tmp_path: Path) -> None:
    model = toy_model(tmp_path / "model")
    result = runner.invoke(app, ["demo", "--out", str(tmp_path / "out"), "--frames", "16", "--model", str(model),
                                 "--no-video"])  # fmt: skip
    assert result.exit_code == 0, result.output
    for text in ("frame 8:", "stage 1 pair F1", "stage 2 MPCA", "step total", "p99", "done in"):
        assert text in result.output
    assert not (tmp_path / "out" / "demo.mp4").exists()


def test_demo_rejects_bad_options(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="boxes"):
        DemoOptions(boxes="gt")
    result = runner.invoke(app, ["demo", "--out", str(tmp_path), "--preset", "nope", "--model",
                                 str(toy_model(tmp_path / "m"))])  # fmt: skip
    assert result.exit_code == 1 and "Traceback" not in result.output


def test_demo_never_imports_torch(tmp_path: Path) -> None:
    model = toy_model(tmp_path / "model")
    code = (
        "import sys\n"
        "from pairedge.demo import DemoOptions, run_demo\n"
        f"run_demo({str(tmp_path / 'out')!r}, DemoOptions(frames=6, model={str(model)!r}, video=False))\n"
        "bad = [m for m in ('torch', 'tensorrt', 'pairedge.export') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert (tmp_path / "out" / "results.jsonl").is_file()


@pytest.mark.skipif(not BUNDLED, reason=f"the bundled default model is not in {default_model_dir()} yet")
def test_demo_with_the_bundled_model(tmp_path: Path) -> None:
    """The README's first command: the default scene with the shipped model finds the simulated pairs."""
    result = runner.invoke(app, ["demo", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "metrics.json").read_text())["summary"]
    assert summary["pair_f1"] > 0.7, summary
    assert summary["accuracy"] > 0.7 and summary["mpca"] > 0.7, summary
    assert video_frames(tmp_path / "demo.mp4") == 150
    assert "unverified" not in result.output  # the bundled folder's hashes are checked
