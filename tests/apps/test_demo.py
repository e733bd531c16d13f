"""``pairedge demo`` end to end: simulate a held-out scene, run on ONNX Runtime CPU, score against the
simulator's truth, and say which seed and which boxes were scored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pairedge.apps.cli import app
from pairedge.apps.demo import DEMO_SEED, DemoOptions, cpu_deployment, example_frames, run_demo, scene_role
from pairedge.core.bundled import RECIPE, default_model_dir
from pairedge.core.errors import InputError
from pairedge.measure.metrics.pairwise.files import read_pairwise_file
from run_demo_helpers import toy_model, video_frames
from typer.testing import CliRunner

runner = CliRunner()
BUNDLED = (default_model_dir() / "stage1.onnx").is_file() and (default_model_dir() / "stage2.onnx").is_file()


def test_demo_library_writes_everything(tmp_path: Path) -> None:
    model = toy_model(tmp_path / "model")
    result = run_demo(
        tmp_path / "out", DemoOptions(frames=20, deployment=cpu_deployment(model), boxes="detections")
    )
    out = tmp_path / "out"
    assert result.summary.frames == 20
    assert set(result.files) >= {"results", "video", "gt_sim7", "gt_paper3", "metrics", "summary"}
    assert video_frames(Path(result.files["video"])) == 20
    gold = read_pairwise_file(
        out / "pairs_gt_paper3.jsonl", ("walking_together", "standing_together", "sitting_together")
    )
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
    result = runner.invoke(
        app, ["demo", "--out", str(tmp_path / "out"), "--frames", "16", "--model", str(model), "--no-video"]
    )
    assert result.exit_code == 0, result.output
    for text in ("frame 8:", "stage 1 pair F1", "stage 2 MPCA", "step total", "p99", "done in"):
        assert text in result.output
    assert not (tmp_path / "out" / "demo.mp4").exists()
    flat = " ".join(result.output.split())
    assert f"scene: simulator preset static, seed {DEMO_SEED}, 16 frames; ground-truth boxes" in flat
    assert "whether it trained on this scene is not known" in flat  # not the bundled model: no claim


def test_demo_names_its_seed_and_box_source_in_every_output(tmp_path: Path) -> None:
    """--seed and --boxes still choose the scene; the printout, metrics.json, summary.json and the results
    header all say which seed and which boxes were scored."""
    model = toy_model(tmp_path / "model")
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "demo",
            "--out",
            str(out),
            "--frames",
            "8",
            "--model",
            str(model),
            "--no-video",
            "--seed",
            "3",
            "--boxes",
            "detections",
        ],
    )
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "scene: simulator preset static, seed 3, 8 frames; simulated detector + tracker" in flat
    assert "(static seed 3, simulated detector)" in flat  # the metrics table's title
    scene = json.loads((out / "metrics.json").read_text())["details"]["scene"]
    assert (scene["seed"], scene["boxes"], scene["role"], scene["held_out"]) == (
        3,
        "detections",
        "unknown",
        False,
    )
    assert json.loads((out / "summary.json").read_text())["scene"] == scene
    header = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert header["scene"] == scene and header["source"] == "simulator preset static seed 3"


def test_the_default_scene_is_held_out_from_the_bundled_model() -> None:
    """The recipe's seed sets decide what a scene was to the bundled model; the default is a test seed."""
    assert DemoOptions().seed == DEMO_SEED
    role, text = scene_role("static", DEMO_SEED, RECIPE)
    assert role == "test" and text.startswith("held out") and RECIPE["test_seeds"] in text
    assert scene_role("static", 0, RECIPE)[0] == "training"  # the scene the demo used to grade
    assert "optimistic" in scene_role("moving", 11, RECIPE)[1]
    assert scene_role("noisy", 12, RECIPE)[0] == "unused"
    assert scene_role("static", 2001, RECIPE)[0] == "validation"  # link confirmation chosen there
    assert scene_role("surveillance", 23, RECIPE)[0] == "training"  # its own, longer training seed range
    assert scene_role("surveillance", 1003, RECIPE)[0] == "test"
    assert scene_role("crowd", 0, RECIPE)[0] == "unused"


def test_demo_rejects_bad_options(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="boxes"):
        DemoOptions(boxes="gt")
    result = runner.invoke(
        app, ["demo", "--out", str(tmp_path), "--preset", "nope", "--model", str(toy_model(tmp_path / "m"))]
    )
    assert result.exit_code == 1 and "Traceback" not in result.output


def test_demo_never_imports_torch(tmp_path: Path) -> None:
    model = toy_model(tmp_path / "model")
    code = (
        "import sys\n"
        "from pairedge.apps.demo import DemoOptions, cpu_deployment, run_demo\n"
        f"options = DemoOptions(frames=6, deployment=cpu_deployment({str(model)!r}), video=False)\n"
        f"run_demo({str(tmp_path / 'out')!r}, options)\n"
        "bad = [m for m in ('torch', 'tensorrt', 'pairedge.export') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert (tmp_path / "out" / "results.jsonl").is_file()


@pytest.mark.skipif(not BUNDLED, reason=f"the bundled default model is not in {default_model_dir()} yet")
def test_demo_with_the_bundled_model(tmp_path: Path) -> None:
    """The README's first command: the default, held-out scene with the shipped model finds the simulated
    pairs (seed 1000 with ground-truth boxes: pair F1 0.78, accuracy 0.76, MPCA 0.70 when measured)."""
    result = runner.invoke(app, ["demo", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    summary = metrics["summary"]
    assert summary["pair_f1"] > 0.65, summary
    assert summary["accuracy"] > 0.6 and summary["mpca"] > 0.6, summary
    assert metrics["details"]["scene"]["held_out"] and metrics["details"]["scene"]["role"] == "test"
    flat = " ".join(result.output.split())
    assert f"seed {DEMO_SEED}, 150 frames; ground-truth boxes" in flat and "held out: a test seed" in flat
    assert video_frames(tmp_path / "demo.mp4") == 150
    assert "unverified" not in result.output  # the bundled folder's hashes are checked


@pytest.mark.skipif(not BUNDLED, reason=f"the bundled default model is not in {default_model_dir()} yet")
def test_demo_warns_when_the_bundled_model_trained_on_the_scene(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["demo", "--out", str(tmp_path), "--seed", "0", "--frames", "10", "--no-video"]
    )
    assert result.exit_code == 0, result.output
    assert "a TRAINING scene of the bundled model" in " ".join(result.output.split())
    assert json.loads((tmp_path / "metrics.json").read_text())["details"]["scene"]["role"] == "training"
