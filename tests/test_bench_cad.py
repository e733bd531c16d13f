"""bench_cad's nested CV never trains on a copy of an inner-validation or held-out sequence (fast, synthetic)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_cad  # noqa: E402
import pairedge.export.augmented as augmented_module  # noqa: E402
from pairedge.datasets.arrays import FeatureData  # noqa: E402
from pairedge.export.train import TrainConfig  # noqa: E402


def synthetic(offset: float) -> FeatureData:
    """8 sequences x 40 rows, 3 classes, layout [a (2), b (2), pair (2)]; ``offset`` marks the copy."""
    rng = np.random.default_rng(0)
    y = np.tile(np.arange(3), 107)[:320]
    X = rng.normal(size=(320, 6)).astype(np.float32) + y[:, None] + offset
    groups = np.repeat([f"cad{k:02d}" for k in range(8)], 40)
    return FeatureData.from_arrays(X, y, groups, ("a", "b", "c"), person_features=2, pair_features=2, stage=2)


def test_augmented_rows_of_validation_and_test_sequences_are_never_trained_on(monkeypatch):
    data, copy = synthetic(0.0), synthetic(100.0)
    seen = []
    real_train = augmented_module.train

    def spy(combined, config, *, stage, val_mask, progress):
        seen.append((combined.groups.copy(), combined.X[:, 0].copy(), np.asarray(val_mask).copy()))
        return real_train(combined, config, stage=stage, val_mask=val_mask, progress=progress)

    monkeypatch.setattr(augmented_module, "train", spy)
    config = TrainConfig(epochs=1, patience=1, samples_per_epoch=64)
    cv = bench_cad.nested_cv(data, config, 2, [0], augmented=[copy], members=2)
    assert len(seen) == 4  # 2 outer folds x 2 members
    for (groups, x0, val), fold in zip(seen, [r for r in cv["folds"] for _ in range(2)], strict=True):
        is_copy = x0 > 50
        trained = ~val
        val_groups = set(groups[val])
        assert not is_copy[val].any()  # validation = original rows only
        assert val_groups and not val_groups & set(groups[trained])
        assert not set(fold["test_sequences"]) & set(groups)  # the held-out fold is absent entirely
        # every training sequence comes with its copy
        assert set(groups[trained & is_copy]) == set(groups[trained & ~is_copy])
    assert all(len(f["best_epoch"]) == 2 for f in cv["folds"])


def test_refit_uses_every_training_sequence_and_its_copies_but_not_the_held_out_fold(monkeypatch):
    import pairedge.export.refit as refit_module

    data, copy = synthetic(0.0), synthetic(100.0)
    seen = []
    real_refit = refit_module.refit

    def spy(everything, config, epochs, stage=None):
        seen.append((everything.groups.copy(), everything.X[:, 0].copy(), epochs))
        return real_refit(everything, config, epochs, stage)

    monkeypatch.setattr(refit_module, "refit", spy)
    config = TrainConfig(epochs=2, patience=1, samples_per_epoch=64)
    cv = bench_cad.nested_cv(data, config, 2, [0], augmented=[copy], refit_all=True)
    assert len(seen) == 2
    for (groups, x0, epochs), fold in zip(seen, cv["folds"], strict=True):
        held_out = set(fold["test_sequences"])
        training = set(data.groups) - held_out
        assert set(groups[x0 < 50]) == training and set(groups[x0 > 50]) == training
        assert epochs == fold["best_epoch"]


def test_simulator_rows_are_trained_on_in_every_fold_and_never_validated(monkeypatch):
    import pairedge.export.refit as refit_module

    data = synthetic(0.0)
    sim = FeatureData.from_arrays(np.full((30, 6), 500.0, np.float32), np.arange(30) % 3, np.full(30, "sim0"),
                                  ("a", "b", "c"), person_features=2, pair_features=2, stage=2)  # fmt: skip
    seen, refits = [], []
    real_train, real_refit = augmented_module.train, refit_module.refit

    def spy(combined, config, *, stage, val_mask, progress):
        seen.append((combined.X[:, 0].copy(), np.asarray(val_mask).copy()))
        return real_train(combined, config, stage=stage, val_mask=val_mask, progress=progress)

    def spy_refit(everything, config, epochs, stage=None):
        refits.append(everything.X[:, 0].copy())
        return real_refit(everything, config, epochs, stage)

    monkeypatch.setattr(augmented_module, "train", spy)
    monkeypatch.setattr(refit_module, "refit", spy_refit)
    config = TrainConfig(epochs=1, patience=1, samples_per_epoch=64)
    bench_cad.nested_cv(data, config, 2, [0], refit_all=True, sim=sim)
    assert len(seen) == len(refits) == 2
    for x0, val in seen:
        is_sim = x0 > 250
        assert is_sim.sum() == 30 and not is_sim[val].any()
    assert all((x0 > 250).sum() == 30 for x0 in refits)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--variants", ""], "--variants"),
        (["--variants", "[b]x"], "unknown ['[b]x']"),
        (["--seeds", "x"], "seeds"),
        (["--folds", "1"], "--folds >= 2"),
        (["--variants", "boxes_sim", "--sim-seeds", "a-b"], "seeds"),
        (["--variants", "boxes_sim", "--sim-presets", "[red]nope"], "unknown simulator preset"),
        (["--variants", "boxes_sim", "--sim-presets", "panorama"], "panorama"),
        (["--variants", "boxes_sim", "--sim-groups", "0"], "--sim-groups >= 1"),
    ],
)
def test_bad_arguments_are_refused_in_one_line_before_any_work(tmp_path, args, message):
    (tmp_path / "cad_choi" / "annotations").mkdir(parents=True)
    with pytest.raises(SystemExit) as exc:
        bench_cad.main(["--data", str(tmp_path), "--out", str(tmp_path / "out"), *args])
    text = str(exc.value)
    assert text.startswith("error: ") and message in text and "\n" not in text
    assert not (tmp_path / "out").exists()  # no results written (an empty --variants used to write empty ones)


def test_missing_data_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="^error: Collective Activity annotations not found"):
        bench_cad.main(["--data", str(tmp_path / "[red]none")])
