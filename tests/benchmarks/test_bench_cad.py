"""bench_cad: the nested CV never trains on a copy of an inner-validation or held-out sequence, its headline
is the pooled out-of-fold metric as `pairedge score` computes it, and the `pairedge train` command it prints
is the recipe it benchmarks (fast, synthetic)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_cad  # noqa: E402
import pairedge.export.augmented as augmented_module  # noqa: E402
from pairedge.core.io.featurefile import FeatureData  # noqa: E402
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
    sim = FeatureData.from_arrays(
        np.full((30, 6), 500.0, np.float32),
        np.arange(30) % 3,
        np.full(30, "sim0"),
        ("a", "b", "c"),
        person_features=2,
        pair_features=2,
        stage=2,
    )
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
        (["--history", "1"], "--history >= 2"),
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
    assert not (
        tmp_path / "out"
    ).exists()  # no results written (an empty --variants used to write empty ones)


def test_missing_data_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="^error: Collective Activity annotations not found"):
        bench_cad.main(["--data", str(tmp_path / "[red]none")])


def test_headline_is_the_pooled_protocol_metric_not_the_fold_mean():
    """Two folds, each holding one class: every fold's present-classes MPCA is 1.0 for a model that always
    answers that fold's class, but pooled over all C = 3 classes the same predictions score as `pairedge
    score` scores them (2 of 3 classes right -> MPCA 2/3; macro-F1 over all 3 classes)."""
    from pairedge.measure.metrics.pairwise import classification_metrics  # what `pairedge score` runs

    y = np.array([0] * 10 + [1] * 10 + [2] * 5)
    groups = np.array(["s0"] * 10 + ["s1"] * 10 + ["s1"] * 5)
    data = FeatureData.from_arrays(
        np.zeros((25, 6), np.float32), y, groups, ("a", "b", "c"), person_features=2, pair_features=2, stage=2
    )

    def fit(part, seed):  # answers the class the OTHER sequence does not hold: 0 on s0, 1 on s1
        answer = 1 if 0 in part.y else 0
        return lambda X: np.full(len(X), answer)

    cv = bench_cad.nested_cv(data, TrainConfig(), 2, [0], fit)
    s = bench_cad.summary(cv, data.labels)
    oof = np.where(groups == "s0", 0, 1)
    m = classification_metrics(y, oof, 3)
    pooled = s["pooled"]
    assert pooled["mpca_over_all_classes"]["per_seed"] == [pytest.approx(m.mpca_over_all_classes)]
    assert pooled["mpca_over_all_classes"]["mean"] == pytest.approx(2 / 3)
    assert pooled["accuracy"]["mean"] == pytest.approx(20 / 25)
    assert pooled["macro_f1"]["mean"] == pytest.approx(m.macro_f1)
    assert s["recall"] == {"a": 1.0, "b": 1.0, "c": 0.0}
    # the secondary figure averages fold scores over the classes each fold holds: s0 holds one (MPCA 1),
    # s1 two (MPCA 0.5)
    assert sorted(f["classes"] for f in cv["folds"]) == [1, 2]
    assert s["fold_mean"]["mpca"]["mean"] == pytest.approx(0.75)
    composition = bench_cad.fold_composition(groups, y, data.labels, 2, [0])
    assert sorted((c["sequences"], c["rows"], c["classes"]) for c in composition) == [(1, 10, 1), (1, 15, 2)]
    assert sorted(tuple(c["absent"]) for c in composition) == [("a",), ("b", "c")]


@pytest.mark.parametrize(
    "name", ["boxes", "orientation", "boxes_no_refit", "orientation_no_refit", "boxes_plain"]
)
def test_the_printed_train_command_is_the_benchmarked_recipe(monkeypatch, tmp_path, name):
    """`pairedge train` parses the command the report prints into the training config, features (spec
    version, track history, orientation, stride), augmentation and refit the benchmark uses."""
    import pairedge.export.datasets.training_data as sources
    import pairedge.export.jobs as jobs
    from pairedge.apps.cli import app
    from typer.testing import CliRunner

    class Stop(Exception):
        """Ends the command once the training call is seen (the CLI reports it as one error line)."""

    seen = {}

    def fake_load(source, **kwargs):
        seen["source"], seen["load"] = source, kwargs
        return "rows", ["copy"]

    def fake_train(rows, out, **kwargs):
        seen["train"] = kwargs
        raise Stop

    monkeypatch.setattr(sources, "load_with_copies", fake_load)
    monkeypatch.setattr(jobs, "train_to_dir", fake_train)
    args = bench_cad.parse_args(["--data", str(tmp_path)])
    base = bench_cad.base_config(args)
    argv = bench_cad.train_argv(name, args, base)
    assert argv is not None
    result = CliRunner().invoke(app, ["train", *argv])
    assert "train" in seen and "Stop" in result.output, result.output
    recipe = bench_cad.RECIPES[name]
    assert seen["source"] == str(tmp_path / "cad_choi" / "annotations")
    assert seen["load"] == {
        "spec": "pairedge",
        "stage": 2,
        "labels": None,
        "spec_version": bench_cad.variant_spec_version(name, args),
        "augment": tuple(recipe["augment"]),
        "orientation": recipe["orientation"],
        "feature_config": {"history": args.history},
    }
    assert args.stride == bench_cad.CLI_STRIDE  # the rows `pairedge train` builds from a CAD folder
    assert seen["train"]["config"] == bench_cad.variant_config(name, base)
    assert seen["train"]["refit"] is bench_cad.variant_refit(name, args) is recipe["refit"]
    assert seen["train"]["spec_version"] == bench_cad.variant_spec_version(name, args)


def test_no_train_command_where_the_cli_cannot_express_the_variant(tmp_path):
    args = bench_cad.parse_args(["--data", str(tmp_path)])
    base = bench_cad.base_config(args)
    assert bench_cad.train_argv("gbm", args, base) is None
    assert bench_cad.train_argv("boxes_sim", args, base) is None
    other = bench_cad.parse_args(["--data", str(tmp_path), "--stride", "3"])
    assert bench_cad.train_argv("boxes", other, bench_cad.base_config(other)) is None
    ensemble = bench_cad.parse_args(["--data", str(tmp_path), "--members", "3"])
    assert bench_cad.train_argv("boxes", ensemble, bench_cad.base_config(ensemble)) is None
    assert "--refit" not in bench_cad.train_argv(
        "boxes", bench_cad.parse_args(["--data", str(tmp_path), "--refit", "off"]), base
    )


def _report(y: np.ndarray, groups: np.ndarray, seeds: list[int]) -> dict:
    """A bench_cad report of one variant ("boxes") whose model always answers class 0, as main() assembles
    it."""
    labels = ("a", "b", "c")
    data = FeatureData.from_arrays(
        np.zeros((len(y), 6), np.float32), y, groups, labels, person_features=2, pair_features=2, stage=2
    )
    cv = bench_cad.nested_cv(
        data, TrainConfig(), 2, seeds, lambda part, seed: lambda X: np.zeros(len(X), np.int64)
    )
    return {
        "command": "python benchmarks/bench_cad.py",
        "rows": len(y),
        "stride": 5,
        "sequences": sorted(set(groups)),
        "spec_version": "2",
        "history": 30,
        "folds": 2,
        "seeds": seeds,
        "members": 1,
        "train_config": TrainConfig().to_dict(),
        "labels": list(labels),
        "environment": {},
        "train_commands": {"boxes": "pairedge train --history 30"},
        "variants": {
            "boxes": {"title": "t", "cv": cv, "summary": bench_cad.summary(cv, labels), "refit": True}
        },
        "fold_composition": bench_cad.fold_composition(groups, y, labels, 2, seeds),
    }


def test_the_report_labels_the_present_classes_mpca_where_it_differs():
    groups = np.repeat(["s0", "s1", "s2", "s3"], 6)
    everything = bench_cad.markdown(_report(np.tile([0, 1, 2], 8), groups, [0, 1]))
    assert "| variant | accuracy | MPCA (all 3 classes) | macro-F1 |" in everything
    assert "equals the all-classes one for every variant" in everything
    # 4 sequences of 6 rows each: the seeded shuffle orders them, so the partitions differ and are listed per
    # seed
    assert "has the same partition" not in everything and "| 1 | 1 | 2 | 12 | 3 | - |" in everything
    sizes = np.repeat(["s0", "s1", "s2", "s3"], [3, 5, 7, 9])  # distinct sizes: every seed, the same folds
    no_c = bench_cad.markdown(_report(np.tile([0, 1], 12), sizes, [0, 1]))
    assert "Every seed (0, 1) has the same partition" in no_c
    assert "| MPCA (all 3 classes) | MPCA over present classes | macro-F1 |" in no_c
    # answering class 0 everywhere: recall 1 / 0 over the 2 present classes, divided by C = 3 in the headline
    assert "**0.333 ± 0.000** | 0.500 ± 0.000 |" in no_c
    assert (
        "pairedge train --history 30" in no_c and "Secondary: mean ± std over the (fold, seed) scores" in no_c
    )


@pytest.mark.parametrize("name", ["boxes", "orientation"])
def test_docs_training_shows_the_benchmarked_command(name):
    """docs/training.md quotes, flag for flag, the `pairedge train` command the committed CAD benchmark
    printed for its recipe (so the doc and the benchmark cannot drift apart again)."""
    import json
    import shlex

    root = Path(__file__).resolve().parents[2]
    command = json.loads((root / "benchmarks" / "results" / "bench_cad.json").read_text())["train_commands"][
        name
    ]
    doc = (root / "docs" / "training.md").read_text().replace("\\\n", " ")
    quoted = [
        " ".join(line.split()) for line in doc.splitlines() if line.strip().startswith("pairedge train ")
    ]
    assert shlex.split(command) in [shlex.split(line) for line in quoted], command
