"""Bound the bundled stage 2's hidden units at the source, without retraining its fp32 weights (issue 38).

Every hidden unit of the relation network is clipped at the ``unit_bound`` percentile of its own outputs
on the rows the runtime's stage 2 sees in the recipe's training scenes (the together pairs and every pair the
fp32 stage 1 gives ``p_interact >= gate_floor``, training sequences only: the QAT step's rows), and the
model is rewritten exactly as one with ``activation_bound=1``
(:func:`pairedge.export.qat.equalize.bound_units`): every hidden value in ``[0, 1]``, each unit filling the
same range, so a per-tensor int8 grid resolves every unit of a layer (the unbounded file's rare rows set
ranges ten times the typical one). The fp32 model changes only on the rows beyond a unit's percentile; the
step records how many training rows moved, re-scores the held-out presets and rebuilds both int8 files
by QAT from the new fp32 files. The percentile was chosen on the validation scenes
(``benchmarks/bench_unit_bound.py``): the one whose int8 agrees best with its own fp32 among those that
keep the fp32 validation MPCA within 0.25 point of the unbounded model.

    python -m pairedge.apps.recipes.bound_step --out sdk/models/default

:func:`apply_unit_bound` is also the last fp32 step of a full rebuild
(:func:`pairedge.apps.recipes.default_model.build_default_model`).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.artefacts import artefact
from pairedge.core.bundled import QAT_RECIPE, RECIPE, default_model_dir
from pairedge.core.errors import ModelError
from pairedge.core.modelfolder import write_manifest
from pairedge.export.models import build_model
from pairedge.export.onnx_export import export_model
from pairedge.export.qat import config_of, import_fp32, model_config
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
    from pairedge.export.qat.build import stage_rows as qat_rows

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
    ``tests`` (:func:`pairedge.apps.recipes.default_model.held_out_sets`)."""
    from pairedge.export.evaluation import classification_metrics

    model, _ = import_fp32(out / artefact(2, "fp32").onnx)
    held_out = {}
    for preset, sets in tests.items():
        test = sets[recipe["stage2"]["task"]]
        m = classification_metrics(test.y, predict_logits(model, test.X).argmax(1), test.labels)
        held_out[preset] = {k: m[k] for k in ("n", "accuracy", "mpca", "macro_f1")}
    return held_out


def add_unit_bound(
    out: Path, recipe: dict[str, Any], qat_recipe: dict[str, Any], say: Callable[[str], None] | None = print
) -> dict[str, Any]:
    """The step of the module docstring on the folder ``out`` (its ``recipe.json`` must record ``recipe``
    without the bound); returns (and writes) the new ``recipe.json`` content.

    Raises:
        SystemExit: the folder was built from another recipe, or has the bound already.
    """
    from pairedge.apps.recipes.default_model import folder_roles, held_out_sets, read_summary
    from pairedge.export.qat.build import INT8_ROLES, build_int8
    from pairedge.export.qat.data import recipe_rows

    t0 = time.perf_counter()
    path = out / "recipe.json"
    summary = read_summary(out)
    if summary.get("recipe") == recipe:
        raise SystemExit(f"error: {path}: the folder already has the recipe's unit bound; nothing to do")
    if summary.get("recipe") != without_unit_bound(recipe):
        raise SystemExit(
            f"error: {path}: was not built from this recipe without the unit bound; rebuild the model instead"
        )
    if say:
        say("rendering the recipe's training scenes")
    rows = recipe_rows(recipe, "train")
    record = apply_unit_bound(out, recipe, qat_recipe, rows)
    stage = summary["stages"]["stage2"]
    before = stage["held_out"]
    held_out = rescore_stage2(out, recipe, held_out_sets(recipe))
    record["held_out_before"] = before
    stage.update(
        held_out=held_out, onnx_bytes=record["onnx_bytes"], onnx_max_abs_diff=record["onnx_max_abs_diff"]
    )
    if say:
        moved = ", ".join(f"{p} MPCA {before[p]['mpca']:.4f} -> {m['mpca']:.4f}" for p, m in held_out.items())
        say(
            f"stage2: bounded at the {record['percentile']:g}th percentile per unit, "
            f"{100 * record['rows_moved']:.2f} % of training rows moved, "
            f"{100 * record['rows_top1_changed']:.2f} % changed top-1; {moved}"
        )
    summary["recipe"] = recipe
    summary["unit_bound"] = record
    for name in INT8_ROLES:  # made again from the new fp32 files
        (out / name).unlink(missing_ok=True)
    summary["int8"] = build_int8(out, recipe, qat_recipe, rows=rows, say=say)
    record["seconds"] = round(time.perf_counter() - t0, 1)
    path.write_text(json.dumps(summary, indent=2) + "\n")
    write_manifest(out, folder_roles(out))
    return summary


def main(argv: list[str] | None = None) -> None:
    """``python -m pairedge.apps.recipes.bound_step [--out DIR] [--no-progress]``: the step on a folder (the
    bundled model's by default) built from the recipe without the unit bound."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=default_model_dir(), help="the model folder")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    summary = add_unit_bound(args.out, RECIPE, QAT_RECIPE, say=None if args.no_progress else print)
    print(f"bounded the hidden units of {args.out} in {summary['unit_bound']['seconds']} s")


if __name__ == "__main__":
    main()
