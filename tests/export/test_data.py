"""Training: sequence-level split, balanced sampling, focal loss, determinism, checkpoints and report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pairedge.core.errors import FormatError, InputError, ModelError  # noqa: E402
from pairedge.core.labels import STAGE1  # noqa: E402
from pairedge.export.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from pairedge.export.data import (  # noqa: E402
    FeatureData,
    balanced_indices,
    load_npz,
    split_by_sequence,
    standardization_stats,
)
from pairedge.export.evaluation import classification_metrics  # noqa: E402
from pairedge.export.losses import FocalLoss  # noqa: E402
from pairedge.export.train import TrainConfig, checkpoint_of, predict_logits, train  # noqa: E402
from pairedge.export.train_report import write_report  # noqa: E402


def _toy(n: int = 1200, classes: int = 3, features: int = 7, seed: int = 0, **kw: object) -> FeatureData:
    """Separable-ish classes with badly scaled columns, 40 rows per sequence, class 0 rare."""
    rng = np.random.default_rng(seed)
    y = rng.choice(classes, size=n, p=[0.1] + [0.9 / (classes - 1)] * (classes - 1))
    X = rng.normal(size=(n, features)).astype(np.float32)
    X[:, 0] += 2.0 * y
    X[:, 1] = X[:, 1] * 300 + 1000
    groups = np.array([f"seq{i // 40:02d}" for i in range(n)])
    labels = STAGE1.classes if classes == 2 else tuple(f"c{i}" for i in range(classes))
    return FeatureData.from_arrays(
        X, y, groups, labels, feature_spec="liang2026", feature_spec_version="1", **kw
    )


FAST = TrainConfig(epochs=6, patience=3, batch_size=128)


def test_split_keeps_sequences_whole_and_covers_classes() -> None:
    data = _toy()
    mask = split_by_sequence(data.groups, data.y, 0.25, seed=3)
    assert not set(data.groups[mask]) & set(data.groups[~mask])
    assert 0.2 <= mask.mean() <= 0.4
    assert set(data.y[mask]) == set(data.y[~mask]) == {0, 1, 2}
    assert np.array_equal(mask, split_by_sequence(data.groups, data.y, 0.25, seed=3))
    with pytest.raises(InputError, match="at least 2 sequences"):
        split_by_sequence(np.array(["a", "a"]), np.array([0, 1]))


def test_balanced_sampling_equalises_classes() -> None:
    y = np.array([0] * 10 + [1] * 990)
    idx = balanced_indices(y, 20000, np.random.default_rng(0))
    share = np.bincount(y[idx]) / len(idx)
    assert abs(share[0] - 0.5) < 0.02


def test_focal_loss_matches_formula_and_reduces_to_ce() -> None:
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.1, 0.2, 0.3]])
    target = torch.tensor([0, 2])
    p = torch.softmax(logits, 1)[torch.arange(2), target]
    expected = (-((1 - p) ** 2) * torch.log(p)).mean()
    assert torch.allclose(FocalLoss(2.0)(logits, target), expected)
    ce = torch.nn.functional.cross_entropy(logits, target)
    assert torch.allclose(FocalLoss(0.0)(logits, target), ce)


def test_metrics_use_tp_over_tp_plus_fp_for_precision() -> None:
    m = classification_metrics(np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1]), ["a", "b", "c"])
    assert m["accuracy"] == 0.75
    assert m["mpca"] == pytest.approx(0.75)  # class c absent: averaged over present classes
    assert m["mpca_all_classes"] == pytest.approx(0.5)
    assert m["per_class"]["b"]["precision"] == pytest.approx(2 / 3)
    assert m["confusion"] == [[1, 1, 0], [0, 2, 0], [0, 0, 0]]


def test_standardization_stats_keep_constant_columns() -> None:
    X = np.stack([np.arange(5, dtype=np.float32), np.ones(5, np.float32)], 1)
    mean, std = standardization_stats(X)
    assert std[1] == 1.0 and mean[1] == 1.0 and std[0] == pytest.approx(np.std(np.arange(5)))


def test_training_learns_and_is_deterministic() -> None:
    data = _toy()
    first = train(data, FAST, stage=2, progress=False)
    second = train(data, FAST, stage=2, progress=False)
    assert first.history == second.history
    assert first.val_metrics == second.val_metrics
    for (k, a), (_, b) in zip(
        first.model.state_dict().items(), second.model.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), k
    assert first.val_metrics["mpca"] > 0.6  # chance is 1/3
    assert first.model_config.architecture == "residual_mlp"
    assert torch.get_num_threads() >= 1 and not torch.are_deterministic_algorithms_enabled()
    other = train(data, TrainConfig(epochs=6, patience=3, batch_size=128, seed=1), stage=2, progress=False)
    assert other.history != first.history


def test_stage1_requires_stage1_labels_and_rejects_leaky_split() -> None:
    with pytest.raises(InputError, match="interacting-or-not"):
        train(_toy(), FAST, stage=1, progress=False)
    data = _toy(classes=2)
    result = train(data, FAST, progress=False)
    assert result.stage == 1 and result.model_config.architecture == "stage1_mlp"
    leaky = np.zeros(len(data.y), bool)
    leaky[::2] = True
    with pytest.raises(InputError, match="shares sequences"):
        train(data, FAST, val_mask=leaky, progress=False)


def test_relation_net_chosen_from_layout() -> None:
    data = _toy(features=10, person_features=4, pair_features=2)
    result = train(data, FAST, stage=2, progress=False)
    assert result.model_config.architecture == "relation_net"
    assert result.model_config.person_features == 4


def test_checkpoint_round_trip_and_report(tmp_path: Path) -> None:
    data = _toy()
    result = train(data, FAST, stage=2, progress=False)
    save_checkpoint(checkpoint_of(result, data), tmp_path)
    paths = write_report(result, tmp_path)
    loaded = load_checkpoint(tmp_path)
    assert np.array_equal(predict_logits(loaded.model, data.X), predict_logits(result.model, data.X))
    meta = loaded.metadata()
    assert meta.feature_spec == "liang2026" and meta.labels == data.labels
    assert meta.data_fingerprint == data.fingerprint()
    report = json.loads(paths["json"].read_text())
    assert report["validation"]["confusion"] == result.val_metrics["confusion"]
    assert "Confusion matrix" in paths["markdown"].read_text()
    assert paths["curves"].stat().st_size > 1000
    doc = json.loads((tmp_path / "model.json").read_text())
    assert doc["format"] == "pairedge-checkpoint"
    doc["model"]["hidden"] = [8, 8]
    (tmp_path / "model.json").write_text(json.dumps(doc))
    with pytest.raises(ModelError, match="do not match"):
        load_checkpoint(tmp_path)


def test_npz_round_trip_and_errors(tmp_path: Path) -> None:
    data = _toy(features=10, person_features=4, pair_features=2)
    data.save(tmp_path / "f.npz")
    back = load_npz(tmp_path / "f.npz")
    assert back.fingerprint() == data.fingerprint()
    assert (back.person_features, back.pair_features, back.feature_spec) == (4, 2, "liang2026")
    X = data.X.copy()
    X[5, 2] = np.nan
    np.savez(tmp_path / "nan.npz", X=X, y=data.y, groups=data.groups, labels=np.array(data.labels))
    with pytest.raises(FormatError, match=r"X\[5\]"):
        load_npz(tmp_path / "nan.npz")
    np.savez(tmp_path / "missing.npz", X=X, y=data.y)
    with pytest.raises(FormatError, match="missing"):
        load_npz(tmp_path / "missing.npz")
    np.savez(
        tmp_path / "obj.npz",
        X=data.X,
        y=data.y,
        groups=data.groups.astype(object),
        labels=np.array(data.labels),
    )
    with pytest.raises(FormatError, match="pickle"):
        load_npz(tmp_path / "obj.npz")
