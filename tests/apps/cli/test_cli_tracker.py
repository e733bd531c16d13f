"""``pairedge run --tracker``: the tracker backend on raw detections, and its one-line refusals."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from pairedge.apps.cli import app
from pairedge.measure.sim.output import write_scene
from run_demo_helpers import toy_model
from typer.testing import CliRunner

runner = CliRunner()


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(video, raw detections without ids, toy model folder)."""
    root = tmp_path_factory.mktemp("trk")
    files = write_scene("static", 3, 10, root / "sim")
    return root / "sim" / files.video, root / "sim" / "det" / "det.txt", toy_model(root / "model")


def _run(scene: tuple[Path, Path, Path], out: Path, *extra: str) -> object:
    video, det, model = scene
    return runner.invoke(
        app,
        ["run", str(video), "-d", str(det), "--model", str(model), "--out", str(out), "--no-video", *extra],
    )


@pytest.mark.parametrize("name", ["iou", "bytetrack", "ocsort", "botsort"])
def test_run_with_each_tracker(scene: tuple[Path, Path, Path], tmp_path: Path, name: str) -> None:
    if name != "iou":
        pytest.importorskip("trackers", reason="Roboflow's trackers library is not installed")
    res = _run(scene, tmp_path, "--tracker", name)
    assert res.exit_code == 0, res.output
    records = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()[1:]]
    ids = {t["id"] for r in records for t in r["tracks"]}
    assert len(ids) >= 3 and min(ids) >= 1
    notes = json.loads((tmp_path / "summary.json").read_text())["notes"]
    who = "the built-in tracker" if name == "iou" else f"the {name} tracker (trackers library)"
    assert any(n.endswith(f"ids assigned by {who}") for n in notes), notes


def test_unknown_tracker_is_one_line(scene: tuple[Path, Path, Path], tmp_path: Path) -> None:
    res = _run(scene, tmp_path, "--tracker", "deepsort")
    assert res.exit_code == 2  # a usage error: the setting's choices are listed
    last = res.output.strip().splitlines()[-1]
    assert (
        last.startswith("error: Invalid value for '--tracker'") and "'deepsort'" in last and "'iou'" in last
    )


def test_missing_library_is_one_line_naming_the_extra(
    scene: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "trackers", None)
    res = _run(scene, tmp_path, "--tracker", "bytetrack")
    assert res.exit_code == 1
    assert "pip install '.[trackers]'" in " ".join(res.output.split())
