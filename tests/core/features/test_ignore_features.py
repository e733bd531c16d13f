"""Ignored feature columns: masked inside the model (torch, checkpoint, ONNX), resolved from names."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from pairedge.apps.cli import app  # noqa: E402
from pairedge.core.errors import InputError  # noqa: E402
from pairedge.core.features import get_spec  # noqa: E402
from pairedge.core.labels import PAPER3  # noqa: E402
from pairedge.export.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from pairedge.export.data import FeatureData  # noqa: E402
from pairedge.export.models import ARCHITECTURES, ModelConfig, build_model, with_default_hidden  # noqa: E402
from pairedge.export.onnx_export import export_checkpoint  # noqa: E402
from pairedge.export.train import TrainConfig, checkpoint_of, ignored_columns, train  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

PAIREDGE = get_spec("pairedge")


def _config(arch: str, ignored: tuple[int, ...]) -> ModelConfig:
    f = 2 * 4 + 3 if arch == "relation_net" else 11
    person, pair = (4, 3) if arch == "relation_net" else (0, 0)
    return with_default_hidden(
        ModelConfig(arch, f, 3, person_features=person, pair_features=pair, ignored_features=ignored)
    )


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_ignored_columns_cannot_change_the_output(arch: str) -> None:
    torch.manual_seed(0)
    model = build_model(_config(arch, (1, 5))).eval()
    x = torch.randn(16, 11)
    changed = x.clone()
    changed[:, [1, 5]] = torch.randn(16, 2) * 1e3
    other = x.clone()
    other[:, 0] += 3.0
    with torch.no_grad():
        assert torch.equal(model(x), model(changed))
        assert not torch.allclose(model(x), model(other))


def test_model_config_validates_and_round_trips() -> None:
    config = _config("stage1_mlp", (5, 1, 5))
    assert config.ignored_features == (1, 5)  # sorted, unique
    assert ModelConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert (
        ModelConfig.from_dict(
            {"architecture": "stage1_mlp", "num_features": 3, "num_classes": 2}
        ).ignored_features
        == ()
    )
    with pytest.raises(InputError, match=r"column indices in \[0, 11\)"):
        _config("stage1_mlp", (11,))
    with pytest.raises(InputError, match="every input column is ignored"):
        ModelConfig("stage1_mlp", 2, 2, ignored_features=(0, 1))
    # the mask is derived from the config: the state dict keeps its keys (older checkpoints still load)
    assert "norm.keep" not in build_model(_config("stage1_mlp", (1,))).state_dict()


def _pairedge_rows(stage: int, n: int = 600) -> FeatureData:
    names = PAIREDGE.stage1_names if stage == 1 else PAIREDGE.stage2_names
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, n)
    X = rng.normal(size=(n, len(names))).astype(np.float32)
    X[:, 0] += 1.5 * y
    layout = (
        {} if stage == 1 else {"person_features": PAIREDGE.person_dim, "pair_features": PAIREDGE.pair_dim}
    )
    return FeatureData.from_arrays(
        X,
        y,
        np.array([f"s{i // 50}" for i in range(n)]),
        PAPER3.classes,
        feature_spec="pairedge",
        feature_spec_version=PAIREDGE.version,
        feature_names=names,
        **layout,
    )


def test_viewpoint_expands_to_the_spec_columns_of_the_stage() -> None:
    stage2 = _pairedge_rows(2)
    cols = ignored_columns(stage2, ("viewpoint",))
    assert [stage2.feature_names[i] for i in cols] == [
        "a_height",
        "a_bottom",
        "b_height",
        "b_bottom",
        "pair_mean_height",
        "pair_mean_bottom",
        "pair_mean_width",
    ]
    stage1 = _pairedge_rows(1)
    assert [stage1.feature_names[i] for i in ignored_columns(stage1, ("viewpoint", "iou"))] == [
        "iou",
        "mean_height",
        "mean_bottom",
        "mean_width",
    ]
    liang = get_spec("liang2026")
    assert liang.viewpoint_names <= set(liang.stage2_names)
    liang_stage1 = FeatureData.from_arrays(
        stage1.X[:, :7],
        stage1.y,
        stage1.groups,
        stage1.labels,
        feature_spec="liang2026",
        feature_names=liang.stage1_names,
    )
    with pytest.raises(InputError, match="'viewpoint' matches no column"):
        ignored_columns(liang_stage1, ("viewpoint",))
    with pytest.raises(InputError, match=r"unknown feature names \['nope'\]"):
        ignored_columns(stage1, ("nope",))
    unnamed = FeatureData.from_arrays(
        stage1.X, stage1.y, stage1.groups, stage1.labels, feature_spec="pairedge"
    )
    with pytest.raises(InputError, match="needs feature names"):
        ignored_columns(unnamed, ("viewpoint",))


def test_trained_mask_survives_checkpoint_and_onnx(tmp_path: Path) -> None:
    data = _pairedge_rows(2)
    config = TrainConfig(epochs=2, patience=2, batch_size=128, ignore_features=("viewpoint",))
    result = train(data, config, progress=False)
    cols = ignored_columns(data, ("viewpoint",))
    assert result.model_config.ignored_features == cols
    ckpt = checkpoint_of(result, data)
    save_checkpoint(ckpt, tmp_path / "ckpt")
    loaded = load_checkpoint(tmp_path / "ckpt")
    assert loaded.config.ignored_features == cols
    exported = export_checkpoint(loaded, tmp_path / "m.onnx")
    assert exported.max_abs_diff <= 1e-5
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    x = data.X[:32].copy()
    changed = x.copy()
    changed[:, list(cols)] = np.random.default_rng(1).normal(size=(32, len(cols))) * 100
    a, b = (session.run(None, {"features": v})[0] for v in (x, changed))
    np.testing.assert_array_equal(a, b)
    with torch.no_grad():
        np.testing.assert_allclose(a, loaded.model(torch.from_numpy(x)).numpy(), atol=1e-5)
    assert json.loads(json.dumps(ckpt.metadata().extra["train"]))["ignore_features"] == ["viewpoint"]


def test_cli_ignore_features(tmp_path: Path) -> None:
    path = tmp_path / "rows.npz"
    _pairedge_rows(2).save(path)
    args = [
        "train",
        "--data",
        str(path),
        "--spec",
        "pairedge",
        "--stage",
        "2",
        "--epochs",
        "2",
        "--patience",
        "1",
        "--no-progress",
        "--no-export",
        "--arch",
        "residual_mlp",
    ]
    runner = CliRunner()
    ok = runner.invoke(app, [*args, "--out", str(tmp_path / "a"), "--ignore-features", "viewpoint, pair_iou"])
    assert ok.exit_code == 0, ok.output
    doc = json.loads((tmp_path / "a" / "model.json").read_text())
    names = PAIREDGE.stage2_names
    assert [names[i] for i in doc["model"]["ignored_features"]] == [
        "a_height",
        "a_bottom",
        "b_height",
        "b_bottom",
        "pair_iou",
        "pair_mean_height",
        "pair_mean_bottom",
        "pair_mean_width",
    ]
    bad = runner.invoke(app, [*args, "--out", str(tmp_path / "b"), "--ignore-features", "speed_of_light"])
    assert bad.exit_code == 1 and "unknown feature names ['speed_of_light']" in bad.output
