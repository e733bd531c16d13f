"""The rows quantization-aware training of the bundled model learns from: the recipe's own training scenes.

One pass over the recipe's scenes (the ``presets`` x ``{which}_seeds`` plus every ``extra_presets`` entry,
exactly as :func:`pairedge.apps.recipes.default_model.training_sets` renders them) gives, for every labelled
pair: the stage-1 features, the stage-2 features and the SIM7 label. From them:

- ``stage1``: the stage-1 training rows (task ``stage1``), identical to the fp32 model's;
- ``stage2``: the stage-2 training rows (task ``paper3``: the together pairs), identical to the fp32 model's
  (with the recipe's ``stage2.aspect_swap`` applied, as the fp32 run applied it);
- ``stage2_all``: stage-2 features of *every* pair (task ``sim7``), row-aligned with ``stage1``: the runtime
  runs stage 2 on whatever stage 1 gates, strangers included, so the int8 stage 2 must follow fp32 there too.

:func:`check_fingerprints` compares the rebuilt rows with the training-data fingerprints the fp32 files
declare, so the fine-tuning provably starts from the data the shipped model was trained on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from pairedge.core.errors import ModelError
from pairedge.core.io.featurefile import concat_rows
from pairedge.core.labels import PAPER3
from pairedge.export.aspect_swap import borrow_standing_aspect
from pairedge.export.datasets import FeatureData
from pairedge.export.datasets.sim import recipe_feature_sets

#: The tasks of one pass: stage-1 rows and stage-2 rows of every pair (the paper3 rows are a subset).
_TASKS = ("stage1", "sim7")


@dataclass(frozen=True)
class RecipeRows:
    """Row-aligned features of the recipe's scenes.

    Attributes:
        stage1: stage-1 rows (N, F1) float32, 0/1 labels, groups ``"<preset>-<seed>"``.
        stage2: the together pairs' stage-2 rows (M, F2) float32, PAPER3 labels (the fp32 training data).
        stage2_all: stage-2 features of every pair (N, F2) float32, aligned with ``stage1``'s rows.
    """

    stage1: FeatureData
    stage2: FeatureData
    stage2_all: np.ndarray


def _one_pass(recipe: dict[str, Any], seeds: str, presets: list[str]) -> dict[str, FeatureData]:
    return recipe_feature_sets(recipe, seeds, presets, _TASKS)


def scene_parts(recipe: dict[str, Any], which: str = "train") -> list[tuple[str, list[str]]]:
    """``(seeds, presets)`` of every part of the recipe's ``which`` scenes, in training-set order."""
    parts = [(str(recipe[f"{which}_seeds"]), list(recipe["presets"]))]
    parts += [(str(e[f"{which}_seeds"]), [str(e["preset"])]) for e in recipe.get("extra_presets", ())]
    return parts


def recipe_rows(recipe: dict[str, Any], which: str = "train") -> RecipeRows:
    """The rows of the recipe's ``which`` scenes (``"train"`` or ``"test"``), see the module docstring."""
    return scene_rows(recipe, scene_parts(recipe, which))


def scene_rows(recipe: dict[str, Any], parts: list[tuple[str, list[str]]]) -> RecipeRows:
    """The rows of the scenes ``parts`` (``(seeds, presets)`` each) rendered with the recipe's settings."""

    passes = [_one_pass(recipe, seeds, presets) for seeds, presets in parts]
    stage1 = concat_rows([p["stage1"] for p in passes])
    sim7 = concat_rows([p["sim7"] for p in passes])
    together = sim7.y < len(PAPER3.classes)
    paper3 = FeatureData.from_arrays(
        sim7.X[together],
        sim7.y[together],
        sim7.groups[together],
        PAPER3.classes,
        feature_spec=sim7.feature_spec,
        feature_spec_version=sim7.feature_spec_version,
        feature_names=sim7.feature_names,
        stage=2,
        label_set=PAPER3.name,
        feature_config=sim7.feature_config,
    )
    if not np.array_equal(stage1.groups, sim7.groups):  # pragma: no cover - one pass makes both
        raise ModelError("stage-1 and stage-2 rows of the recipe's scenes are not aligned")
    swap = recipe.get("stage2", {}).get("aspect_swap")
    if swap:  # the fp32 stage 2 trained on these rows with some walking rows' box aspects swapped
        paper3, _ = borrow_standing_aspect(paper3, float(swap["fraction"]), int(swap["seed"]))
    return RecipeRows(stage1, paper3, sim7.X)


def check_fingerprints(rows: RecipeRows, declared: dict[str, str]) -> dict[str, bool]:
    """Whether the rebuilt training rows hash to what the fp32 files declare (``data_fingerprint`` per stage).

    The hash is exact: another CPU's BLAS kernel can change the last bits of some features and so the hash,
    while the value summaries still match (:func:`pairedge.export.datasets.fingerprint.compare_summaries`);
    the result is recorded, not required.
    """
    got = {"stage1": rows.stage1.fingerprint(), "stage2": rows.stage2.fingerprint()}
    return {key: got[key] == declared.get(key) for key in got}
