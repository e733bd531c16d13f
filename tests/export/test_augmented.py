"""train_augmented: copies of validation sequences never trained on while the epoch is chosen; refit on all;
``pairedge train --augment / --refit / --hidden`` and their one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

import pairedge.export.augmented as augmented_module  # noqa: E402
import pairedge.export.refit as refit_module  # noqa: E402
from pairedge.apps.cli import app  # noqa: E402
from pairedge.core.errors import InputError  # noqa: E402
from pairedge.core.io.featurefile import FeatureData  # noqa: E402
from pairedge.export.augmented import train_augmented  # noqa: E402
from pairedge.export.train import TrainConfig  # noqa: E402
from typer.testing import CliRunner  # noqa: E402


def rows(offset: float) -> FeatureData:
    """8 sequences x 40 rows, 3 classes; ``offset`` marks a copy in column 0."""
    rng = np.random.default_rng(0)
    y = np.tile(np.arange(3), 107)[:320]
    X = rng.normal(size=(320, 6)).astype(np.float32) + y[:, None]
    X[:, 0] += offset
    groups = np.repeat([f"s{k}" for k in range(8)], 40)
    return FeatureData.from_arrays(X, y, groups, ("a", "b", "c"), person_features=2, pair_features=2, stage=2)


def test_copies_of_validation_sequences_are_left_out_and_refit_uses_everything(monkeypatch) -> None:
    data, copy = rows(0.0), rows(100.0)
    seen, refits = [], []
    real_train, real_refit = augmented_module.train, refit_module.refit

    def spy(combined, config, *, stage, val_mask, progress):
        seen.append((combined.groups.copy(), combined.X[:, 0].copy(), np.asarray(val_mask).copy()))
        return real_train(combined, config, stage=stage, val_mask=val_mask, progress=progress)

    def spy_refit(everything, config, epochs, stage=None):
        refits.append((everything.groups.copy(), everything.X[:, 0].copy(), epochs))
        return real_refit(everything, config, epochs, stage)

    monkeypatch.setattr(augmented_module, "train", spy)
    monkeypatch.setattr(refit_module, "refit", spy_refit)
    config = TrainConfig(epochs=2, patience=1, samples_per_epoch=64)
    result = train_augmented(data, [copy], config, refit=True)
    ((groups, x0, val),) = seen
    is_copy = x0 > 50
    assert not is_copy[val].any()
    assert not set(groups[val]) & set(groups[is_copy])  # no copy of a validation sequence
    assert set(groups[is_copy]) == set(groups[~val & ~is_copy])  # every training sequence has its copy
    ((rg, rx, epochs),) = refits
    assert len(rg) == 640 and (rx > 50).sum() == 320 and epochs == result.best_epoch
    assert result.info["refit"] == {"epochs": result.best_epoch, "rows": 640}
    assert result.info["augmented_rows"] == int(is_copy.sum())
    plain = train_augmented(data, [copy], config)
    assert plain.info["refit"] is None


def test_copies_must_match_the_layout() -> None:
    data = rows(0.0)
    other = FeatureData.from_arrays(data.X[:, :5], data.y, data.groups, data.labels)
    with pytest.raises(InputError, match="layout"):
        train_augmented(data, [other], TrainConfig(epochs=1))


def test_cli_options_and_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    base = [
        "train",
        "--spec",
        "pairedge",
        "--stage",
        "1",
        "--out",
        str(tmp_path / "m"),
        "--epochs",
        "1",
        "--no-progress",
        "--no-export",
    ]
    sim = "sim:static:seeds=0-1:frames=30:stride=3"
    result = runner.invoke(app, [*base, "--data", sim, "--augment", "mirror"])
    assert result.exit_code == 1 and "Collective Activity folder" in result.output
    result = runner.invoke(app, [*base, "--data", sim, "--augment", "sideways"])
    assert result.exit_code == 1 and "unknown augmentation 'sideways'" in result.output
    result = runner.invoke(app, [*base, "--data", sim, "--no-orientation"])
    assert result.exit_code == 1 and "Collective Activity folder" in result.output
    for bad in ("0,8", "a,b"):
        result = runner.invoke(app, [*base, "--data", sim, "--hidden", bad])
        assert result.exit_code == 1 and "--hidden" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, [*base, "--data", sim, "--hidden", "16", "--refit"])
    assert result.exit_code == 0, result.output
    assert "refit: a fresh model trained on all" in result.output
    doc = json.loads((tmp_path / "m" / "model.json").read_text())
    assert doc["extra"]["refit"]["rows"] > 0 and doc["extra"]["train"]["hidden"] == [16]
    assert "**refit**" in (tmp_path / "m" / "report.md").read_text()


@pytest.mark.data
@pytest.mark.slow
def test_cli_augments_a_cad_folder(tmp_path: Path, shared_data: Path) -> None:
    folder = shared_data / "cad_choi" / "annotations"
    if not folder.is_dir():
        pytest.skip("Collective Activity annotations not present")
    small = tmp_path / "cad"
    small.mkdir()
    for name in ("anno01.mat", "anno02.mat", "anno03.mat", "anno04.mat", "anno12.mat", "anno13.mat"):
        (small / name).symlink_to(folder / name)
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--data",
            str(small),
            "--spec",
            "pairedge",
            "--spec-version",
            "3",
            "--stage",
            "2",
            "--out",
            str(tmp_path / "m"),
            "--epochs",
            "1",
            "--augment",
            "mirror,reverse",
            "--refit",
            "--no-orientation",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "m" / "model.json").read_text())
    assert doc["feature_spec_version"] == "3" and doc["extra"]["augmented_rows"] > 0
    from pairedge.export.datasets.training_data import load_with_copies

    for orientation in (True, False):
        data, copies = load_with_copies(
            str(small), spec="pairedge", stage=2, augment=("mirror",), orientation=orientation
        )
        conf = data.X[:, data.feature_names.index("a_ori_conf")].max()
        # annotated orientation has confidence 1; without it only the walking fallback (0.5) remains
        assert conf == (1.0 if orientation else 0.5)
        assert len(copies) == 1 and copies[0].X.shape == data.X.shape
