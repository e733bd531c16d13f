"""build_default_model end to end on a tiny recipe: the fp32 folder without the QAT step (``int8=False``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")


def _tiny_recipe() -> dict:
    """The bundled recipe cut to two 30-frame training scenes of one preset, one epoch, no link policies."""
    from pairedge.core.bundled import RECIPE

    r = copy.deepcopy(RECIPE)
    r.pop("confirm")
    r.pop("extra_presets")
    r["stage1"].pop("operating_points")
    for key in ("threshold_preset", "threshold_max_drop"):
        r["stage1"].pop(key, None)
    r.update(presets=["static"], train_seeds="0-1", test_seeds="1000", frames=30)
    for stage in ("stage1", "stage2"):
        r[stage].update(epochs=1, samples_per_epoch=500, patience=1)
    return r


def test_without_int8_the_folder_is_fp32_with_a_manifest(tmp_path: Path) -> None:
    from pairedge.apps.recipes.default_model import build_default_model
    from pairedge.core.modelfolder import verify_files

    summary = build_default_model(tmp_path, _tiny_recipe(), progress=False, int8=False)
    assert summary["int8"] is None
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "manifest.json",
        "recipe.json",
        "stage1.onnx",
        "stage2.onnx",
    ]
    assert json.loads((tmp_path / "recipe.json").read_text())["int8"] is None
    manifest = verify_files(tmp_path)  # every listed file is there with its SHA-256
    assert sorted(manifest.files) == ["recipe.json", "stage1.onnx", "stage2.onnx"]
