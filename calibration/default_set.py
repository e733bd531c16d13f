"""The calibration set ``pairedge calibrate`` uses when no source is given: scenes of the model's own recipe.

A model trained by a pairedge recipe (the bundled model; ``python -m pairedge.apps.recipes.default_model``)
names it in its metadata (``extra["recipe"]``: presets, training / test seeds, validation seeds). The
default set is the first :data:`SEEDS_PER_PRESET` *training* seeds of every preset of the recipe (its
``presets`` and each ``extra_presets`` entry): scenes of the kind the model was trained for, under its own
camera presets. A seed that the recipe also names for testing or for a choice (``test_seeds``,
``confirm.seeds``) is never used, nor is any seed of :data:`RESERVED_SEEDS` (the held-out seeds of the
project's benchmarks), so no headline number is measured on calibration data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pairedge.core.errors import InputError
from pairedge.core.seeds import parse_seeds

#: Training seeds per preset in the default set (the recipe's first ones).
SEEDS_PER_PRESET = 4

#: Seed ranges that benchmarks hold out for reporting (bench default 2000, bench_precisions 4000-4001,
#: bench_calibrate's test 3000-3002 and selection 6000-6007): never calibration data.
RESERVED_SEEDS = ((2000, 2999), (3000, 3999), (4000, 4999), (6000, 6999))


def recipe_of(models: Any) -> Mapping[str, Any] | None:
    """The training recipe in the model's stage-1 (else stage-2) metadata, or None."""
    for stage in (models.stage1, models.stage2):
        recipe = stage.metadata.extra.get("recipe")
        if isinstance(recipe, Mapping) and recipe.get("presets"):
            return recipe
    return None


def _seeds(text: Any) -> tuple[int, ...]:

    return tuple(parse_seeds(str(text))) if text not in (None, "") else ()


def _reserved(seed: int) -> bool:
    return any(lo <= seed <= hi for lo, hi in RESERVED_SEEDS)


def default_scenes(recipe: Mapping[str, Any]) -> list[tuple[str, tuple[int, ...]]]:
    """``[(preset, seeds), ...]`` of the default calibration set of ``recipe`` (see the module docstring).

    Raises:
        InputError: the recipe names no usable training seed.
    """
    avoid = set(_seeds(recipe.get("test_seeds")))
    confirm = recipe.get("confirm")
    if isinstance(confirm, Mapping):
        avoid |= set(_seeds(confirm.get("seeds")))
    parts: list[tuple[str, Any, Any]] = [
        (str(p), recipe.get("train_seeds"), recipe.get("test_seeds")) for p in recipe.get("presets", ())
    ]
    for extra in recipe.get("extra_presets", ()) or ():
        if isinstance(extra, Mapping) and extra.get("preset"):
            parts.append((str(extra["preset"]), extra.get("train_seeds"), extra.get("test_seeds")))
    out: list[tuple[str, tuple[int, ...]]] = []
    for preset, train, test in parts:
        banned = avoid | set(_seeds(test))
        seeds = [s for s in _seeds(train) if s not in banned and not _reserved(s)][:SEEDS_PER_PRESET]
        if seeds:
            out.append((preset, tuple(seeds)))
    if not out:
        raise InputError(
            "no calibration source given and the model's recipe names no training seed to calibrate on: "
            "pass --scenes PRESET:SEEDS, --video V --detections D, or --features F.npz"
        )
    return out


def scenes_text(scenes: list[tuple[str, tuple[int, ...]]]) -> str:
    """``"static:0+1+2+3,moving:0+1+2+3"`` of ``scenes`` (the ``--scenes`` syntax)."""
    return ",".join(f"{p}:{'+'.join(str(s) for s in seeds)}" for p, seeds in scenes)


def default_source(models: Any) -> str:
    """The ``--scenes`` text of the default calibration set of ``models``.

    Raises:
        InputError: the model's metadata has no recipe (a model not trained by a pairedge recipe), saying
            which sources to give instead.
    """
    recipe = recipe_of(models)
    if recipe is None:
        raise InputError(
            "no calibration source given, and the model's metadata names no training recipe to take "
            "representative scenes from: pass --scenes PRESET:SEEDS (e.g. 'static:0-3,moving:0-3'), "
            "--video V --detections D (as for `pairedge run`), or --features F.npz (the training features)"
        )
    return scenes_text(default_scenes(recipe))
