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

:func:`pairedge.export.qat.unit_bound.apply_unit_bound` does the bounding; it is also the last fp32 step of a
full rebuild (:func:`pairedge.apps.recipes.default_model.build_default_model`).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pairedge.apps.recipes.default_model import folder_roles, held_out_sets, read_summary
from pairedge.core.bundled import QAT_RECIPE, RECIPE, default_model_dir
from pairedge.core.modelfolder import write_manifest
from pairedge.export.qat.build import INT8_ROLES, build_int8
from pairedge.export.qat.data import recipe_rows
from pairedge.export.qat.unit_bound import apply_unit_bound, rescore_stage2, without_unit_bound


def add_unit_bound(
    out: Path, recipe: dict[str, Any], qat_recipe: dict[str, Any], say: Callable[[str], None] | None = print
) -> dict[str, Any]:
    """The step of the module docstring on the folder ``out`` (its ``recipe.json`` must record ``recipe``
    without the bound); returns (and writes) the new ``recipe.json`` content.

    Raises:
        SystemExit: the folder was built from another recipe, or has the bound already.
    """
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
