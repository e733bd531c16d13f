"""`pairedge export` on the paper's checkpoints and on bad input; the runtime accepts what it writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pairedge.apps.cli import app  # noqa: E402
from paper_checkpoints import paper_stage1  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

runner = CliRunner()


def test_export_paper_stage1_and_load_in_runtime(tmp_path: Path) -> None:
    ckpt = paper_stage1(tmp_path / "stage1.pth")
    out = tmp_path / "m" / "stage1.onnx"
    result = runner.invoke(app, ["export", str(ckpt), "--paper-stage1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "max abs difference ONNX Runtime vs PyTorch" in result.output
    diff = float(result.output.split("PyTorch:")[1].split()[0])
    assert diff <= 1e-5
    from pairedge.runtime.backends.model import load_model

    model = load_model(out, stage=1)
    assert model.metadata.feature_spec == "liang2026" and model.num_classes == 2
    assert np.isfinite(model.metadata.norm_std).all()


def test_export_errors_are_one_line(tmp_path: Path) -> None:
    ckpt = paper_stage1(tmp_path / "stage1.pth")
    both = runner.invoke(app, ["export", str(ckpt), "--paper-stage1", "--paper-stage2", "--out", "x.onnx"])
    assert both.exit_code == 1 and "at most one" in both.output
    wrong = runner.invoke(app, ["export", str(ckpt), "--paper-stage2", "--out", str(tmp_path / "x.onnx")])
    assert wrong.exit_code == 1 and "model_state_dict" in wrong.output
    plain = runner.invoke(app, ["export", str(ckpt), "--out", str(tmp_path / "x.onnx")])
    assert plain.exit_code == 1 and "model.json" in plain.output and "Traceback" not in plain.output
