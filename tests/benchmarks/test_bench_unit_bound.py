"""bench_unit_bound's choice of the percentile (validation only, within the fp32 MPCA bound), its report,
and its refusals (a folder without the model files, an unbounded file git cannot show)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_unit_bound import MAX_MPCA_DROP, choose, main, markdown  # noqa: E402


def _run(val_agree: float, val_mpca: float, held_agree: float = 0.5) -> dict:
    figs = {"top1_gated": 0.0, "top1_together": 0.0, "logit_p99": 0.1, "logit_max": 0.2}
    quality = {"static": {"accuracy": 0.8, "mpca": 0.8, "rows": 10}}
    return {
        "validation": {**figs, "top1_gated": val_agree},
        "held_out": {**figs, "top1_gated": held_agree},
        "quality": {"validation": quality, "test": quality},
        "mean_mpca": {"validation": val_mpca, "test": 0.8},
        "sweep": {"float_layers": ["person.0"], "float_mac_share": 0.036},
        "qat_best_epoch": 3,
    }


def test_the_choice_is_the_best_validation_agreement_within_the_mpca_bound_not_held_out() -> None:
    runs = {
        "unbounded": _run(0.98, 0.80),
        "99.9": _run(0.985, 0.80, held_agree=1.0),  # the best held out: not a reason
        "99.5": _run(0.995, 0.80 - MAX_MPCA_DROP / 2),
        "99": _run(0.999, 0.80 - 2 * MAX_MPCA_DROP),  # agrees best, costs too much fp32 MPCA
    }
    assert choose(runs) == ("99.5", ["99.9", "99.5"])
    assert choose({"unbounded": runs["unbounded"], "99": runs["99"]}) == ("unbounded", [])


def test_the_report_names_the_rule_the_choice_the_float_layers_and_every_parity_row() -> None:
    runs = {"unbounded": _run(0.98, 0.80), "99.5": _run(0.995, 0.80)}
    error = {"verdict": "ERROR", "summary": "x"}
    passed = {
        "verdict": "PASS",
        "first_failure": None,
        "stage1_logit_max": 0.2,
        "stage2_logit_max": 0.1,
        "gate_agreement": 0.995,
        "top1_agreement": 1.0,
    }
    res = {
        "command": "c",
        "seconds": 1.0,
        "unbounded": "u.onnx",
        "runs": runs,
        "chosen": "99.5",
        "within": ["99.5"],
        "recipe_is_chosen": True,
        "parity": {"bundled (QAT int8)": {"static:4000": {"int8": passed}}, "ptq": {"p": {"fp16": error}}},
        "environment": "e",
    }
    text = markdown(res)
    assert "Chosen: **99.5**" in text and "is the chosen one: **yes**" in text
    assert "| 99.5 | person.0 (3.6 %) | 3 | 99.50 % / 0.00 % |" in text
    assert (
        "| bundled (QAT int8) | static:4000 | int8 | PASS | - | 0.200 / 0.100 | 99.50 % / 100.00 % |" in text
    )
    assert "| ptq | p | fp16 | ERROR | - | - | - |" in text


def test_a_folder_without_the_model_files_is_one_error_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"^error: --model .*stage1\.onnx$"):
        main(["--model", str(tmp_path), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
