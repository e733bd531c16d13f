"""`pairedge train` on a features .npz: outputs, determinism across two runs, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from pairedge.cli import app  # noqa: E402
from pairedge.export.data import FeatureData  # noqa: E402
from pairedge.labels import PAPER3  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

runner = CliRunner()


def _npz(path: Path, features: int = 10, spec: str = "") -> Path:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 900)
    X = rng.normal(size=(900, features)).astype(np.float32)
    X[:, 0] += 1.5 * y
    groups = np.array([f"s{i // 60}" for i in range(900)])
    FeatureData.from_arrays(X, y, groups, PAPER3.classes, feature_spec=spec).save(path)
    return path


ARGS = ["--spec", "liang2026", "--stage", "2", "--epochs", "4", "--patience", "2", "--no-progress"]


def test_train_writes_checkpoint_report_and_onnx(tmp_path: Path) -> None:
    data = _npz(tmp_path / "f.npz")
    result = runner.invoke(app, ["train", "--data", str(data), "--out", str(tmp_path / "a"), *ARGS])
    assert result.exit_code == 0, result.output
    assert "MPCA" in result.output and "max abs difference" in result.output
    for name in ("model.pt", "model.json", "report.json", "report.md", "curves.png", "stage2.onnx"):
        assert (tmp_path / "a" / name).is_file(), name
    doc = json.loads((tmp_path / "a" / "model.json").read_text())
    assert doc["feature_spec"] == "liang2026" and doc["feature_spec_version"] == "1"
    assert doc["model"]["architecture"] == "residual_mlp"
    # the same command twice gives identical metrics
    again = runner.invoke(app, ["train", "--data", str(data), "--out", str(tmp_path / "b"), *ARGS])
    assert again.exit_code == 0, again.output
    first = json.loads((tmp_path / "a" / "report.json").read_text())
    second = json.loads((tmp_path / "b" / "report.json").read_text())
    assert first["validation"] == second["validation"] and first["history"] == second["history"]
    # and the exported checkpoint can be re-exported by `pairedge export`
    exported = runner.invoke(app, ["export", str(tmp_path / "a"), "--out", str(tmp_path / "re.onnx")])
    assert exported.exit_code == 0, exported.output
    assert "max abs difference ONNX Runtime vs PyTorch" in exported.output


def test_train_errors_are_one_line(tmp_path: Path) -> None:
    wrong_width = _npz(tmp_path / "w.npz", features=9)
    result = runner.invoke(app, ["train", "--data", str(wrong_width), "--out", str(tmp_path / "o"), *ARGS])
    assert result.exit_code == 1
    assert "has 10 features, the file has 9" in result.output and "Traceback" not in result.output
    other_spec = _npz(tmp_path / "s.npz", spec="pairedge")
    result = runner.invoke(app, ["train", "--data", str(other_spec), "--out", str(tmp_path / "o"), *ARGS])
    assert result.exit_code == 1 and "built with spec 'pairedge'" in result.output
    result = runner.invoke(
        app, ["train", "--data", str(tmp_path / "none.npz"), "--out", str(tmp_path / "o"), *ARGS]
    )
    assert result.exit_code == 1 and "not found" in result.output
    stage1 = runner.invoke(
        app, ["train", "--data", str(_npz(tmp_path / "x.npz", features=7)), "--out", str(tmp_path / "o"),
              "--spec", "liang2026", "--stage", "1", "--no-progress"],
    )  # fmt: skip
    assert stage1.exit_code == 1 and "interacting-or-not" in stage1.output


def test_train_a_spec_version(tmp_path: Path) -> None:
    from pairedge.features import spec_layout

    source = "sim:static:seeds=0-1:frames=40:stride=2"
    args = ["--spec", "pairedge", "--stage", "1", "--epochs", "1", "--no-progress", "--no-export"]
    result = runner.invoke(app, ["train", "--data", source, "--spec-version", "3", "--out", str(tmp_path / "v3"), *args])
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "v3" / "model.json").read_text())
    assert doc["feature_spec_version"] == "3"
    assert len(doc["norm_mean"]) == spec_layout("pairedge", "3").stage1_dim == spec_layout("pairedge", "2").stage1_dim + 14
    bad = runner.invoke(app, ["train", "--data", source, "--spec-version", "7", "--out", str(tmp_path / "o"), *args])
    assert bad.exit_code == 1 and "no version '7'" in bad.output and "Traceback" not in bad.output
    assert "implements 1, 2, 3 (current: 2)" in bad.output
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    result = runner.invoke(app, ["train", "--data", str(empty), "--out", str(tmp_path / "o"), *args])
    assert result.exit_code == 1 and "not a readable features .npz" in result.output and "EOFError" not in result.output
    # a features file keeps its version: asking for another one is refused
    v2 = _npz(tmp_path / "v2.npz", features=spec_layout("pairedge", "2").stage1_dim, spec="pairedge")
    result = runner.invoke(app, ["train", "--data", str(v2), "--spec-version", "3", "--out", str(tmp_path / "o"), *args])
    assert result.exit_code == 1 and "features" in result.output
