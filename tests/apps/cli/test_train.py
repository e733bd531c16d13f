"""`pairedge train` on a features .npz: outputs, determinism across two runs, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from pairedge.apps.cli import app  # noqa: E402
from pairedge.core.labels import PAPER3  # noqa: E402
from pairedge.export.data import FeatureData  # noqa: E402
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
        app,
        [
            "train",
            "--data",
            str(_npz(tmp_path / "x.npz", features=7)),
            "--out",
            str(tmp_path / "o"),
            "--spec",
            "liang2026",
            "--stage",
            "1",
            "--no-progress",
        ],
    )
    assert stage1.exit_code == 1 and "interacting-or-not" in stage1.output


def test_train_a_spec_version(tmp_path: Path) -> None:
    from pairedge.core.features import spec_layout

    source = "sim:static:seeds=0-1:frames=40:stride=2"
    args = ["--spec", "pairedge", "--stage", "1", "--epochs", "1", "--no-progress", "--no-export"]
    result = runner.invoke(
        app, ["train", "--data", source, "--spec-version", "3", "--out", str(tmp_path / "v3"), *args]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "v3" / "model.json").read_text())
    assert doc["feature_spec_version"] == "3"
    assert (
        len(doc["norm_mean"])
        == spec_layout("pairedge", "3").stage1_dim
        == spec_layout("pairedge", "2").stage1_dim + 14
    )
    bad = runner.invoke(
        app, ["train", "--data", source, "--spec-version", "7", "--out", str(tmp_path / "o"), *args]
    )
    assert bad.exit_code == 1 and "no version '7'" in bad.output and "Traceback" not in bad.output
    assert "implements 1, 2, 3 (current: 2)" in bad.output
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    result = runner.invoke(app, ["train", "--data", str(empty), "--out", str(tmp_path / "o"), *args])
    assert (
        result.exit_code == 1
        and "not a readable features .npz" in result.output
        and "EOFError" not in result.output
    )
    # a features file keeps its version: asking for another one is refused
    v2 = _npz(tmp_path / "v2.npz", features=spec_layout("pairedge", "2").stage1_dim, spec="pairedge")
    result = runner.invoke(
        app, ["train", "--data", str(v2), "--spec-version", "3", "--out", str(tmp_path / "o"), *args]
    )
    assert result.exit_code == 1 and "features" in result.output


def test_train_history_reaches_the_features_and_the_model(tmp_path: Path) -> None:
    """`--history K` builds the features with K samples of track history and stores it in the model (the
    runtime reads it back); the CAD recipe of docs/training.md uses it."""
    source = "sim:static:seeds=0-1:frames=40:stride=2"
    args = ["--spec", "pairedge", "--stage", "1", "--epochs", "1", "--no-progress", "--no-export"]
    result = runner.invoke(
        app, ["train", "--data", source, "--history", "12", "--out", str(tmp_path / "h"), *args]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "h" / "model.json").read_text())
    assert doc["extra"]["feature_config"]["history"] == 12
    plain = runner.invoke(app, ["train", "--data", source, "--out", str(tmp_path / "d"), *args])
    assert plain.exit_code == 0, plain.output
    assert "history" not in json.loads((tmp_path / "d" / "model.json").read_text())["extra"]["feature_config"]


def test_train_history_is_refused_where_it_cannot_apply(tmp_path: Path) -> None:
    data = _npz(tmp_path / "f.npz", features=10)
    result = runner.invoke(
        app, ["train", "--data", str(data), "--out", str(tmp_path / "o"), "--history", "30", *ARGS]
    )
    assert result.exit_code == 1 and "pairedge spec" in result.output and "Traceback" not in result.output
    other = runner.invoke(
        app, ["train", "--data", str(data), "--out", str(tmp_path / "o"), "--history", "1", *ARGS]
    )
    assert other.exit_code == 2 and "--history" in other.output
    assert not (tmp_path / "o").exists()


def test_load_with_copies_builds_every_copy_with_the_feature_options(tmp_path: Path) -> None:
    """A Collective Activity folder: the rows and their augmented copies see the given track history."""
    from cad_synth import person, write_mat
    from pairedge.core.errors import InputError
    from pairedge.export.datasets.training_data import load_with_copies

    folder = tmp_path / "cad"
    folder.mkdir()
    people = [person([1, 2, 3, 4, 5, 6], 10), person([2, 3, 4, 5], 100), person([4, 5, 6], 200)]
    inter = np.array([[6, 6, 6, 6, 6, 1], [2, 2, 2, 2, 3, 3], [8, 8, 8, 8, 8, 8]])
    write_mat(folder / "anno20.mat", people, inter, [1, 5, 5, 5, 6, 6], 6)
    kwargs = {"spec": "pairedge", "stage": 2, "augment": ("mirror", "reverse"), "orientation": False}
    rows, copies = load_with_copies(str(folder), feature_config={"history": 2}, **kwargs)
    default, _ = load_with_copies(str(folder), **kwargs)
    fill = rows.feature_names.index("a_history_fill")
    assert len(rows.y) and len(copies) == 2
    for d in (rows, *copies):
        assert json.loads(d.feature_config)["history"] == 2
    assert rows.X[:, fill].tolist() != default.X[:, fill].tolist()  # 6 samples fill a history of 2, not of 8
    with pytest.raises(InputError, match="is a features file"):
        load_with_copies(
            str(_npz(tmp_path / "f.npz")), spec="pairedge", stage=2, feature_config={"history": 2}
        )


def test_aspect_swap_is_recorded_and_refused_where_it_cannot_apply(tmp_path: Path) -> None:
    from pairedge.core.features import get_spec

    names = get_spec("pairedge").stage2_names
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 600)
    X = rng.normal(size=(600, len(names))).astype(np.float32)
    X[:, 0] += 1.5 * y
    X[:, [names.index("a_aspect"), names.index("b_aspect")]] = 0.3 + 0.1 * (y == 0)[:, None]
    groups = np.array([f"s{i // 50}" for i in range(600)])
    path = tmp_path / "p.npz"
    FeatureData.from_arrays(
        X, y, groups, PAPER3.classes, feature_spec="pairedge", feature_names=names, stage=2
    ).save(path)
    args = [
        "train",
        "--data",
        str(path),
        "--spec",
        "pairedge",
        "--epochs",
        "2",
        "--patience",
        "2",
        "--no-progress",
    ]
    ok = runner.invoke(app, [*args, "--stage", "2", "--out", str(tmp_path / "m"), "--aspect-swap", "0.5"])
    assert ok.exit_code == 0, ok.output
    swap = json.loads((tmp_path / "m" / "model.json").read_text())["extra"]["aspect_swap"]
    walking = int((y == 0).sum())
    assert swap["fraction"] == 0.5 and swap["seed"] == 0 and 0.3 * walking < swap["rows"] < 0.7 * walking
    assert f"aspect swap: {swap['rows']} walking rows" in ok.output
    stage1 = runner.invoke(
        app, [*args, "--stage", "1", "--out", str(tmp_path / "s1"), "--aspect-swap", "0.5"]
    )
    assert stage1.exit_code == 1 and "stage 2 only" in stage1.output and "Traceback" not in stage1.output
    liang = runner.invoke(
        app,
        [
            "train",
            "--data",
            str(_npz(tmp_path / "l.npz")),
            "--out",
            str(tmp_path / "l"),
            *ARGS,
            "--aspect-swap",
            "0.5",
        ],
    )
    assert liang.exit_code == 1 and "no a_aspect" in liang.output and "Traceback" not in liang.output
    assert (
        runner.invoke(
            app, [*args, "--stage", "2", "--out", str(tmp_path / "x"), "--aspect-swap", "2"]
        ).exit_code
        == 2
    )


def test_train_bounds_the_hidden_activations_when_asked(tmp_path: Path) -> None:
    """``--activation-bound 1`` on stage1_mlp: Clip(0, 1) in the exported graph, recorded in the checkpoint;
    on the paper's residual_mlp (BatchNorm + SiLU, no ReLU to bound) one error line."""
    import onnx

    data = _npz(tmp_path / "f.npz")
    args = ["train", "--data", str(data), "--arch", "stage1_mlp", "--activation-bound", "1", *ARGS]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    ops = [n.op_type for n in onnx.load(str(tmp_path / "a" / "stage2.onnx")).graph.node]
    assert ops.count("Clip") == 2 and "Relu" not in ops
    assert json.loads((tmp_path / "a" / "model.json").read_text())["model"]["activation_bound"] == 1.0
    refused = runner.invoke(app, [*args[:3], "--activation-bound", "1", *ARGS, "--out", str(tmp_path / "b")])
    assert refused.exit_code == 1 and "activation_bound applies to" in refused.output
    assert "Traceback" not in refused.output and len(refused.output.strip().splitlines()) == 1
