"""``pairedge eval --match-boxes``: a tracker run in an eval job is scored against ground truth by box, with
the same pair F1 as ``pairedge score --match-boxes`` on a ``pairedge run`` of the same video."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pairedge.apps.cli import app
from pairedge.apps.evaluation.evaluate import evaluate
from pairedge.apps.evaluation.sources import parse_sources
from pairedge.core.sim.output import write_scene
from pairedge.runtime.deployment import Deployment
from run_demo_helpers import toy_model
from typer.testing import CliRunner

runner = CliRunner()


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(simulator folder: video.mp4, det/det.txt without ids, gt/gt.txt, pairs_gt_paper3.jsonl; toy model)."""
    root = tmp_path_factory.mktemp("evmb")
    write_scene("static", 3, 24, root / "sim")
    return root / "sim", toy_model(root / "model")


def _eval(sim: Path, model: Path, out: Path, *extra: str) -> dict:
    res = runner.invoke(
        app,
        [
            "eval",
            str(model),
            "--data",
            str(sim / "video.mp4"),
            "--detections",
            str(sim / "det" / "det.txt"),
            "--gold",
            str(sim / "pairs_gt_paper3.jsonl"),
            "--out",
            str(out),
            *extra,
        ],
    )
    assert res.exit_code == 0, res.output
    return json.loads((out / "eval.json").read_text())


@pytest.mark.parametrize("tracker", ["iou", "botsort"])
def test_eval_and_score_give_the_same_pair_f1(scene: tuple[Path, Path], tmp_path: Path, tracker: str) -> None:
    if tracker != "iou":
        pytest.importorskip("trackers", reason="Roboflow's trackers library is not installed")
    sim, model = scene
    gt = sim / "gt" / "gt.txt"
    report = _eval(sim, model, tmp_path / "eval", "--match-boxes", str(gt), "--tracker", tracker)
    assert any("matched" in n and "gt.txt" in n for n in report["notes"]), report["notes"]
    run = runner.invoke(
        app,
        [
            "run",
            str(sim / "video.mp4"),
            "-d",
            str(sim / "det" / "det.txt"),
            "--model",
            str(model),
            "--tracker",
            tracker,
            "--out",
            str(tmp_path / "run"),
            "--no-video",
        ],
    )
    assert run.exit_code == 0, run.output
    with Deployment(model).load() as pipe:  # the toy model has one threshold (no operating points)
        tau = pipe.tau_interact
    score = runner.invoke(
        app,
        [
            "score",
            "-p",
            "pairwise",
            "--pred",
            str(tmp_path / "run" / "results.jsonl"),
            "--gold",
            str(sim / "pairs_gt_paper3.jsonl"),
            "--match-boxes",
            str(gt),
            "--tau",
            repr(tau),
            "--json",
            str(tmp_path / "score.json"),
        ],
    )
    assert score.exit_code == 0, score.output
    scored = json.loads((tmp_path / "score.json").read_text())["summary"]
    assert report["summary"]["pair_f1"] is not None and report["summary"]["pair_f1"] > 0
    assert report["summary"]["pair_f1"] == pytest.approx(scored["pair_f1"], abs=1e-12)
    assert report["summary"]["pair_precision"] == pytest.approx(scored["pair_precision"], abs=1e-12)


def test_box_matching_changes_the_scores_of_tracker_ids(scene: tuple[Path, Path], tmp_path: Path) -> None:
    """Without --match-boxes the tracker's ids are compared with the truth's as they are."""
    sim, model = scene
    source = parse_sources(
        str(sim / "video.mp4"), detections=sim / "det" / "det.txt", gold=sim / "pairs_gt_paper3.jsonl"
    )[0]
    plain = evaluate(model, source)
    matched = evaluate(model, source, match_boxes=sim / "gt" / "gt.txt")
    assert plain.stage1 != matched.stage1
    assert not any("matched" in n for n in plain.notes)


def test_match_boxes_refusals_are_one_line(scene: tuple[Path, Path], tmp_path: Path) -> None:
    sim, model = scene
    res = runner.invoke(
        app,
        [
            "eval",
            str(model),
            "--data",
            "sim:static:seeds=1-2:frames=5",
            "--match-boxes",
            str(sim / "gt" / "gt.txt"),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert res.exit_code == 1
    assert "--match-boxes: expected one video or ROS 2 log source" in " ".join(res.output.split())
    res = runner.invoke(
        app,
        [
            "eval",
            str(model),
            "--data",
            str(sim / "video.mp4"),
            "--detections",
            str(sim / "det" / "det.txt"),
            "--match-boxes",
            str(sim / "det" / "det.txt"),
            "--out",
            str(tmp_path / "o2"),
        ],
    )
    # a detection file (id -1) is not a ground truth of boxes: refused before the run
    assert res.exit_code == 1 and "error:" in res.output and not (tmp_path / "o2" / "eval.json").exists()
