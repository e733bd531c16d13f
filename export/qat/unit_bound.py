"""Stage 2's hidden units bounded at the source, as a model-folder step (issue 38).

:func:`bound_model` clips every hidden unit of an fp32 relation-network file at a percentile of its own
outputs on given rows and rewrites the model exactly as one with ``activation_bound=1``
(:func:`pairedge.export.qat.equalize.bound_units`); :func:`apply_unit_bound` does it to a folder's
``stage2.onnx`` on the rows the runtime's stage 2 sees in the recipe's training scenes (the QAT step's
training rows) and stamps both fp32 files with the recipe; :func:`rescore_stage2` re-scores the held-out
presets. The recipe's commands are :mod:`pairedge.apps.recipes.bound_step` (an existing folder) and
:mod:`pairedge.apps.recipes.default_model` (a full rebuild).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.artefacts import artefact
from pairedge.core.errors import ModelError
from pairedge.export.evaluation import classification_metrics
from pairedge.export.models import build_model
from pairedge.export.onnx_export import export_model
from pairedge.export.qat import config_of, import_fp32, model_config
from pairedge.export.qat.build import stage_rows as qat_rows
from pairedge.export.qat.data import RecipeRows
from pairedge.export.qat.equalize import bound_units, clip_units, unit_bounds
from pairedge.export.train import predict_logits

#: Largest |logit| difference between the rewritten model and the clipped original (float rounding).
REWRITE_TOLERANCE = 1e-4
#: A training row whose logits moved by more than this counts as changed by the bound.
MOVED = 1e-3


def without_unit_bound(recipe: dict[str, Any]) -> dict[str, Any]:
    """``recipe`` without stage 2's ``unit_bound``: what a folder made before the bound records."""
    return {**recipe, "stage2": {k: v for k, v in recipe["stage2"].items() if k != "unit_bound"}}


def bound_model(path: Path, percentile: float, X: np.ndarray) -> tuple[Any, Any, dict[str, Any]]:
    """The stage-2 fp32 file ``path`` with its hidden units bounded at ``percentile`` of their outputs on
    (N, F) rows ``X``: the bounded model, its metadata and the record of the step.

    Raises:
        ModelError: the file is bounded already, or the rewrite differs from the clipped original beyond
            :data:`REWRITE_TOLERANCE`.
    """
    plain, meta = import_fp32(path)
    train = dict(meta.extra.get("train", {}))
    if train.get("activation_bound") is not None:
        raise ModelError(f"{path}: its hidden activations are bounded already ({train['activation_bound']})")
    bounds = unit_bounds(plain, X, percentile)
    target = build_model(replace(model_config(meta, plain.state_dict()), activation_bound=1.0))
    model = bound_units(plain, target, bounds)
    check = X[:: max(1, len(X) // 20_000)]
    clipped = predict_logits(clip_units(plain, bounds), check)
    rewrite = float(np.abs(predict_logits(model, check) - clipped).max())
    if not rewrite <= REWRITE_TOLERANCE:
        raise ModelError(f"{path}: the bounded rewrite differs from the clipped model by {rewrite:.2e}")
    before, after = predict_logits(plain, X), predict_logits(model, X)
    moved = np.abs(after - before).max(axis=1)
    record = {
        "percentile": float(percentile),
        "rows": len(X),
        "rewrite_max_abs_diff": rewrite,
        "rows_moved": float((moved > MOVED).mean()),
        "rows_top1_changed": float((after.argmax(1) != before.argmax(1)).mean()),
        "bounds": {
            f"layer {i}": {
                "units": len(c),
                "min": round(float(c.min()), 4),
                "median": round(float(np.median(c)), 4),
                "max": round(float(c.max()), 4),
            }
            for i, c in enumerate(bounds)
        },
    }
    meta = replace(
        meta, extra={**meta.extra, "train": {**train, "activation_bound": 1.0}, "unit_bound": record}
    )
    return model, meta, record


def apply_unit_bound(
    out: Path, recipe: dict[str, Any], qat_recipe: dict[str, Any], rows: RecipeRows
) -> dict[str, Any]:
    """Bound ``out``'s fp32 stage 2 at ``recipe["stage2"]["unit_bound"]`` (module docstring) and stamp both
    fp32 files with ``recipe``; ``rows``: the recipe's training rows. Returns the step's record."""
    loaded = {k: import_fp32(out / artefact(n, "fp32").onnx) for n, k in ((1, "stage1"), (2, "stage2"))}
    models = {k: m for k, (m, _) in loaded.items()}
    metas = {k: meta for k, (_, meta) in loaded.items()}
    X_train, _ = qat_rows(rows, models, metas, config_of(qat_recipe, "stage2").gate_floor)["stage2"]
    path2 = out / artefact(2, "fp32").onnx
    model, meta, record = bound_model(path2, float(recipe["stage2"]["unit_bound"]), X_train)
    check = X_train[:: max(1, len(X_train) // 4096)]
    meta = replace(meta, extra={**meta.extra, "recipe": recipe})
    exported = export_model(model, meta, path2, check_inputs=check)
    record["onnx_bytes"], record["onnx_max_abs_diff"] = exported.onnx_bytes, exported.max_abs_diff
    s1, meta1 = loaded["stage1"]
    export_model(
        s1,
        replace(meta1, extra={**meta1.extra, "recipe": recipe}),
        out / artefact(1, "fp32").onnx,
        check_inputs=rows.stage1.X[:: max(1, len(rows.stage1.X) // 4096)],
    )
    return record


def rescore_stage2(out: Path, recipe: dict[str, Any], tests: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Held-out metrics (n, accuracy, MPCA, macro-F1 per preset) of ``out``'s fp32 stage-2 file on
    ``tests`` (preset -> task -> rows: :func:`pairedge.apps.recipes.default_model.held_out_sets`)."""
    model, _ = import_fp32(out / artefact(2, "fp32").onnx)
    held_out = {}
    for preset, sets in tests.items():
        test = sets[recipe["stage2"]["task"]]
        m = classification_metrics(test.y, predict_logits(model, test.X).argmax(1), test.labels)
        held_out[preset] = {k: m[k] for k in ("n", "accuracy", "mpca", "macro_f1")}
    return held_out
