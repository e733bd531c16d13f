"""bench_box_shape: scoring against hand-computed cases, a tiny real run, and bad arguments refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_box_shape as bench  # noqa: E402

WALK, STAND, SIT = 0, 1, 2


def test_false_sitting_and_sitting_recall_by_hand() -> None:
    y = np.array([WALK, WALK, STAND, STAND, SIT, SIT])
    pred = np.array([SIT, WALK, SIT, STAND, SIT, WALK])
    s = bench.score(y, pred)
    assert s["false_sitting"] == pytest.approx(2 / 4)  # 2 of the 4 walking / standing rows called sitting
    assert s["sitting_recall"] == pytest.approx(1 / 2) and s["sitting_support"] == 2
    assert s["accuracy"] == pytest.approx(3 / 6)


def test_a_tiny_run_never_ignores_box_shape_for_the_simulated_detector(tmp_path: Path) -> None:
    rc = bench.main(
        [
            "--presets",
            "static",
            "--seeds",
            "1000",
            "--frames",
            "45",
            "--aspects",
            "0,0.5",
            "--out",
            str(tmp_path),
        ]
    )
    assert rc == 0
    res = json.loads((tmp_path / "bench_box_shape.json").read_text())
    assert res["box_shape_columns"] == ["a_aspect", "b_aspect"]
    as_is, fixed = res["variants"]["as simulated"]["static"], res["variants"]["fixed 0.50"]["static"]
    assert as_is["ignored_share"] == 0.0 and as_is["used"] == as_is["auto"]
    assert fixed["ignored_share"] > 0.5


@pytest.mark.parametrize(
    "args",
    [
        ["--aspects", "0.05"],
        ["--aspects", "x"],
        ["--presets", "nope"],
        ["--seeds", "a-b"],
        ["--seeds", ""],
        ["--presets", ","],
        ["--frames", "1"],
        ["--model", "/no/such/[bold]model"],
    ],
)
def test_bad_arguments_are_refused_in_one_line(args: list[str], tmp_path: Path, capsys) -> None:
    assert bench.main([*args, "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1 and "Traceback" not in err
