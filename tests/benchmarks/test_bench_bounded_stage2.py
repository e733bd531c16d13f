"""bench_bounded_stage2's figures on hand-made logits: the int8-vs-fp32 comparison (gated and together
top-1, logit error, parity's bound), per-preset fp32 quality and the report that shows both."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_bounded_stage2 import int8_figures, main, markdown, quality  # noqa: E402
from pairedge.compare.comparator import DecisionRule  # noqa: E402


def _rows(n: int = 10) -> SimpleNamespace:
    """n pairs, the first half together; stage-2 rows (the together pairs) from two presets."""
    together = np.arange(n) < n // 2
    groups = np.array(["static-0", "static-0", "moving-3", "moving-3", "moving-3"])
    return SimpleNamespace(
        stage1=SimpleNamespace(y=together.astype(np.int64)),
        stage2=SimpleNamespace(y=np.array([0, 1, 2, 0, 1]), groups=groups),
    )


def test_int8_figures_count_decisions_on_the_gated_and_together_rows_and_judge_the_logit_bound() -> None:
    rows = _rows()
    stage1 = np.zeros((10, 2), np.float32)
    stage1[:8, 1] = 5.0  # the fp32 gate opens rows 0-7 (p_interact ~ 1) and keeps 8-9 closed
    stage1[8:, 0] = 5.0
    fp32 = np.tile(np.array([[3.0, 0.0, 0.0]], np.float32), (10, 1))
    same = int8_figures(rows, stage1, fp32, fp32.copy(), DecisionRule(tau=0.5))
    assert same["top1_gated"] == same["top1_together"] == 1.0 and same["top1_gated_rows"] == 8
    assert same["logit_max"] == 0.0 and same["within_parity_bound"]
    int8 = fp32.copy()
    int8[6, 1] = 4.0  # a gated stranger flips: 7 of 8 gated agree, all 5 together pairs agree
    out = int8_figures(rows, stage1, fp32, int8, DecisionRule(tau=0.5))
    assert out["top1_gated"] == pytest.approx(7 / 8) and out["top1_together"] == 1.0
    assert out["logit_max"] == pytest.approx(4.0) and not out["within_parity_bound"]
    int8 = fp32.copy()
    int8[9, 0] = 0.0  # a row the gate keeps closed: counted nowhere
    assert int8_figures(rows, stage1, fp32, int8, DecisionRule(tau=0.5))["top1_gated"] == 1.0


def test_quality_is_accuracy_and_mpca_per_preset_of_the_together_pairs() -> None:
    rows = _rows()
    z = np.eye(3, dtype=np.float32)[[0, 1, 2, 1, 1]]  # static: both right; moving: 2 of 3 right
    q = quality(rows, z)
    assert set(q) == {"static", "moving"}
    assert q["static"] == {"accuracy": 1.0, "mpca": 1.0, "rows": 2}
    assert q["moving"]["accuracy"] == pytest.approx(2 / 3)
    assert q["moving"]["mpca"] == pytest.approx((0.0 + 1.0 + 1.0) / 3)  # class 0 missed, 1 and 2 right


def test_the_report_shows_every_file_pair_and_its_verdict() -> None:
    figs = {"top1_gated": 0.995, "top1_together": 0.99, "logit_p99": 0.1, "logit_max": 0.4}
    good = {**figs, "within_parity_bound": True}
    bad = {**figs, "logit_max": 5.0, "within_parity_bound": False}
    q = {"validation": {"static": {"accuracy": 0.8, "mpca": 0.7, "rows": 3}}, "test": {}}
    q["test"] = q["validation"]
    res = {
        "command": "python benchmarks/bench_bounded_stage2.py",
        "seconds": 1.0,
        "shipped": {"validation": bad, "held_out": bad, "quality": q},
        "variants": {
            "bounded at 1": {
                "best_epoch": 3,
                "qat_best_epoch": 7,
                "validation": good,
                "held_out": good,
                "quality": q,
                "parity": {
                    "moving:4001": {
                        "verdict": "PASS",
                        "first_failure": None,
                        "stage1_logit_max": 0.2,
                        "stage2_logit_max": 0.5,
                        "gate_agreement": 0.996,
                        "top1_agreement": 1.0,
                    },
                    "PETS det.txt": {"verdict": "ERROR", "summary": "pack failed"},
                },
            }
        },
        "environment": "test",
    }
    text = markdown(res)
    assert "| shipped files | shipped |" in text and text.count("| no |") == 1
    assert "| bounded at 1 | 3 / 7 | 99.50 % / 99.00 % |" in text and text.count("| yes |") == 1
    assert "0.800 / 0.700" in text and "| 0.7000 |" in text
    assert "| bounded at 1 | moving:4001 | PASS | - | 0.200 / 0.500 | 99.60 % / 100.00 % |" in text
    assert "| bounded at 1 | PETS det.txt | ERROR |" in text


def test_a_folder_without_the_model_files_is_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "stage1.onnx").write_bytes(b"")
    with pytest.raises(
        SystemExit, match=r"^error: --model .*: expected a model folder with stage1.int8.onnx, "
    ):
        main(["--model", str(tmp_path), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
