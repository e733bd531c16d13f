"""bench_default_gate: the per-class terms of MPCA, the comparison rows and the held-out seed option."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_default_gate as gate  # noqa: E402
from pairedge.export.evaluation import classification_metrics  # noqa: E402


def test_short_keeps_each_class_right_over_rows() -> None:
    y = np.array([0, 0, 0, 1, 1, 2])
    pred = np.array([0, 0, 1, 1, 1, 0])
    m = gate._short(classification_metrics(y, pred, ["a", "b", "c", "d"]))
    assert m["per_class"] == {"a": [2, 3], "b": [2, 2], "c": [0, 1]}  # d has no rows: left out
    assert m["mpca"] == pytest.approx(np.mean([2 / 3, 1.0, 0.0]))


def test_compare_gates_every_preset_both_models_were_made_for() -> None:
    def scored(acc: float, mpca: float) -> dict:
        return {"n": 10.0, "accuracy": acc, "mpca": mpca, "macro_f1": 0.5, "per_class": {}}

    old = {
        "presets": {
            "static": {"stage1": scored(0.80, 0.80), "stage2": scored(0.80, 0.80)},
            "surveillance": {"stage1": scored(0.80, 0.80), "stage2": scored(0.80, 0.80)},
        }
    }
    new = {
        "presets": {
            "static": {"stage1": scored(0.79, 0.81), "stage2": scored(0.80, 0.80)},
            "surveillance": {"stage1": scored(0.80, 0.80), "stage2": scored(0.85, 0.779)},
        }
    }
    rows = {(r["stage"], r["preset"]): r for r in gate.compare(old, new, 0.02)}
    assert rows["stage1", "static"]["pass"] and rows["stage1", "static"]["gated"]
    bad = rows["stage2", "surveillance"]
    assert bad["gated"] and not bad["pass"] and bad["change_points"]["mpca"] == pytest.approx(-2.1)


@pytest.mark.parametrize("item", ["crowd=1-3", "surveillance=", "surveillance=x-y", "surveillance"])
def test_seeds_option_refuses_what_it_cannot_use(
    item: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit) as exc:
        gate.main(["--old", str(tmp_path), "--seeds", item])
    assert exc.value.code == 2 and "--seeds" in capsys.readouterr().err
