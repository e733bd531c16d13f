"""The shipped default model matches what its recipe (``python -m pairedge.export.default_model``) declares."""

from __future__ import annotations

import json
import os

import onnx
import pytest
from pairedge.default_model import RECIPE, default_model_dir
from pairedge.features import get_spec
from pairedge.labels import PAPER3, STAGE1
from pairedge.modelmeta import ModelMetadata

DIR = default_model_dir()
LABELS = {"stage1": STAGE1.classes, "stage2": PAPER3.classes}


def _meta(stage: int) -> ModelMetadata:
    proto = onnx.load(str(DIR / f"stage{stage}.onnx"))
    return ModelMetadata.from_props(
        {p.key: p.value for p in proto.metadata_props}, source=f"stage{stage}.onnx"
    )


def _summary() -> dict:
    return json.loads((DIR / "recipe.json").read_text())


def test_shipped_files_are_small_and_present() -> None:
    sizes = [(DIR / name).stat().st_size for name in ("stage1.onnx", "stage2.onnx")]
    assert sum(sizes) < 1_000_000, sizes
    assert _summary()["recipe"] == RECIPE


@pytest.mark.parametrize("stage", [1, 2])
def test_shipped_metadata_matches_recipe(stage: int) -> None:
    key = f"stage{stage}"
    meta, declared = _meta(stage), RECIPE[key]
    assert meta.stage == stage
    assert meta.feature_spec == RECIPE["spec"]
    assert meta.feature_spec_version == str(get_spec(RECIPE["spec"]).version), (
        "the feature spec changed since the default model was trained: rerun "
        "`python -m pairedge.export.default_model --out sdk/models/default`"
    )
    assert meta.labels == LABELS[key]
    assert meta.architecture == declared["architecture"]
    assert meta.num_features == (
        get_spec(RECIPE["spec"]).stage1_dim if stage == 1 else get_spec(RECIPE["spec"]).stage2_dim
    )
    assert meta.extra["recipe"] == RECIPE
    assert meta.extra["feature_config"] == RECIPE["feature_config"]
    train = meta.extra["train"]
    for name in ("epochs", "patience", "samples_per_epoch", "seed", "architecture"):
        assert train[name] == declared[name], name
    assert train["hidden"] == declared["hidden"]
    assert meta.data_fingerprint == _summary()["stages"][key]["data_fingerprint"]


def test_runtime_accepts_the_default_model() -> None:
    from pairedge.runtime.loading import find_models

    pair = find_models(DIR)
    assert pair.labels == PAPER3.classes
    assert pair.spec.name == RECIPE["spec"]


@pytest.mark.slow
def test_training_data_slice_fingerprints_reproduce() -> None:
    """Rebuilding a slice of the recipe's training rows (seed 0 of every preset, ~10 s) gives the fingerprints
    recipe.json recorded when the shipped model was built: this code still makes its training data."""
    pytest.importorskip("torch")
    from pairedge.export.default_model import CHECK_SEEDS, check_fingerprints

    recorded = _summary()["check"]
    assert recorded["seeds"] == CHECK_SEEDS and recorded["presets"] == RECIPE["presets"]
    assert check_fingerprints(RECIPE) == recorded, (
        "the features or the simulator changed since the default model was trained: rerun "
        "`python -m pairedge.export.default_model --out sdk/models/default`"
    )


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("PAIREDGE_FULL_CHECKS") != "1",
    reason="rebuilds all training rows of the default model (minutes); opt in with PAIREDGE_FULL_CHECKS=1",
)
def test_training_data_fingerprints_reproduce() -> None:
    """Rebuilding all of the recipe's training rows gives the shipped fingerprints (opt-in: minutes of CPU)."""
    pytest.importorskip("torch")
    from pairedge.export.default_model import feature_sets

    sets = feature_sets(RECIPE, RECIPE["train_seeds"], RECIPE["presets"])
    summary = _summary()["stages"]
    for key in ("stage1", "stage2"):
        assert sets[RECIPE[key]["task"]].fingerprint() == summary[key]["data_fingerprint"]
