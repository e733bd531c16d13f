"""Give a trained default-model folder the recipe's input squash without retraining its fp32 weights.

With the knee at each column's training maximum (:data:`pairedge.export.models.KNEE_QUANTILE` 1.0) the squash
leaves every training row's z-scores exactly as they were: training with it computes the same loss and the
same gradients on every row, so it ends at the same weights as training without it. Retraining would only add
this CPU's float noise (the BLAS kernels of another machine give other last bits and another run). This step
therefore takes the shipped fp32 weights, sets the knees from the rebuilt training rows, re-exports both
stages with the squash in the graph, checks that the logits of every training row are unchanged, re-scores
the held-out presets, and rebuilds the int8 files by QAT from the new fp32 files.

    python -m pairedge.apps.recipes.squash_step --out sdk/models/default
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
from pairedge.apps.recipes.default_model import (
    TASK_STAGE,
    _p1,
    folder_roles,
    held_out_sets,
    read_summary,
    stage_rows,
    training_sets,
)
from pairedge.core.artefacts import artefact
from pairedge.core.bundled import QAT_RECIPE, RECIPE, default_model_dir
from pairedge.core.errors import ModelError
from pairedge.core.modelfolder import write_manifest
from pairedge.export.evaluation import classification_metrics
from pairedge.export.models import KNEE_QUANTILE, build_model
from pairedge.export.onnx_export import export_model
from pairedge.export.qat import import_fp32, model_config
from pairedge.export.train import predict_logits

#: Largest |logit| change accepted on a training row when the squash is added (float32 rounding of the
#: same arithmetic; a knee at the maximum leaves the z-scores bit for bit, the graph's extra ops may not).
TRAIN_ROW_TOLERANCE = 1e-4


def without_squash(recipe: dict[str, Any]) -> dict[str, Any]:
    """``recipe`` with no ``input_squash`` in its stages: what a folder trained before the squash records."""
    return {
        k: ({n: v for n, v in s.items() if n != "input_squash"} if k in ("stage1", "stage2") else s)
        for k, s in recipe.items()
    }


def squash_model(path: Path, squash: float, X: np.ndarray) -> tuple[Any, Any, float]:
    """The model of the fp32 file ``path`` with the input squash ``squash`` and knees from its (N, F) raw
    training rows ``X``, its metadata, and the largest |logit| change on those rows."""
    plain, meta = import_fp32(path)
    train = dict(meta.extra.get("train", {}))
    if train.get("input_squash") is not None:
        raise ModelError(f"{path}: already has an input squash ({train['input_squash']})")
    state = plain.state_dict()
    model = build_model(replace(model_config(meta, state), input_squash=float(squash)))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or set(missing) != {"norm.knee"}:
        raise ModelError(
            f"{path}: the squashed model's state differs beyond the knee: {missing} {unexpected}"
        )
    model.norm.set_knee(X)
    model.eval()
    change = float(np.abs(predict_logits(model, X) - predict_logits(plain, X)).max()) if len(X) else 0.0
    return (
        model,
        replace(meta, extra={**meta.extra, "train": {**train, "input_squash": float(squash)}}),
        change,
    )


def add_input_squash(
    out: Path, recipe: dict[str, Any], qat_recipe: dict[str, Any], say: Callable[[str], None] | None = print
) -> dict[str, Any]:
    """The step of the module docstring on the folder ``out`` (its ``recipe.json`` must record ``recipe``
    without the squash); returns (and writes) the new ``recipe.json`` content.

    Raises:
        SystemExit: the folder was built from another recipe, or the knee is not at the training maximum.
        ModelError: a training row's logits moved beyond :data:`TRAIN_ROW_TOLERANCE`.
    """
    from pairedge.export.qat.build import INT8_ROLES, build_int8

    if KNEE_QUANTILE != 1.0:
        raise SystemExit(
            f"error: the knee is the {KNEE_QUANTILE} quantile of the training rows, not their maximum: "
            "the trained weights are not those of a squashed model; retrain instead"
        )
    t0 = time.perf_counter()
    path = out / "recipe.json"
    summary = read_summary(out)
    if summary.get("recipe") == recipe:
        raise SystemExit(f"error: {path}: the folder already has the recipe's input squash; nothing to do")
    if summary.get("recipe") != without_squash(recipe):
        raise SystemExit(
            f"error: {path}: was not built from this recipe without the squash; rebuild the model instead"
        )
    train_sets, tests = training_sets(recipe), held_out_sets(recipe)
    record: dict[str, Any] = {"knee_quantile": KNEE_QUANTILE, "stages": {}}
    for key in ("stage1", "stage2"):
        stage = recipe[key]
        task, number = stage["task"], TASK_STAGE[stage["task"]]
        data, _ = stage_rows(recipe, key, train_sets)
        fp32 = out / artefact(number, "fp32").onnx
        model, meta, change = squash_model(fp32, float(stage["input_squash"]), data.X)
        if not change <= TRAIN_ROW_TOLERANCE:
            raise ModelError(f"{fp32}: the squash moved a training row's logits by {change:.2e}")
        meta = replace(meta, extra={**meta.extra, "recipe": recipe})
        exported = export_model(model, meta, fp32, check_inputs=data.X[:: max(1, len(data.X) // 4096)])
        tau = float(meta.thresholds.get("p_interact", 0.5)) if number == 1 else 0.5
        st = summary["stages"][key]
        before = st["held_out"]
        held_out = {}
        for preset, sets in tests.items():
            test = sets[task]
            pred = (
                (_p1(model, test.X) >= tau).astype(np.int64)
                if number == 1
                else (predict_logits(model, test.X).argmax(1))
            )
            m = classification_metrics(test.y, pred, test.labels)
            held_out[preset] = {k: m[k] for k in ("n", "accuracy", "mpca", "macro_f1")}
        knee = model.norm.knee.numpy()
        record["stages"][key] = {
            "train_rows": len(data.y),
            "rows_fingerprint": data.fingerprint(),
            "train_rows_max_logit_change": change,
            "knee_min": round(float(knee.min()), 4),
            "knee_median": round(float(np.median(knee)), 4),
            "knee_max": round(float(knee.max()), 4),
            "held_out_before": before,
        }
        st.update(held_out=held_out, onnx_bytes=exported.onnx_bytes, onnx_max_abs_diff=exported.max_abs_diff)
        if say:
            moved = ", ".join(
                f"{p} MPCA {before[p]['mpca']:.4f} -> {m['mpca']:.4f}" for p, m in held_out.items()
            )
            say(
                f"{key}: knees {knee.min():.1f}-{knee.max():.1f} std, training rows moved by {change:.1e}; "
                f"{moved}"
            )
    summary["recipe"] = recipe
    summary["input_squash"] = record
    for name in INT8_ROLES:  # made again from the new fp32 files
        (out / name).unlink(missing_ok=True)
    summary["int8"] = build_int8(out, recipe, qat_recipe, say=say)
    record["seconds"] = round(time.perf_counter() - t0, 1)
    path.write_text(json.dumps(summary, indent=2) + "\n")
    write_manifest(out, folder_roles(out))
    return summary


def main(argv: list[str] | None = None) -> None:
    """``python -m pairedge.apps.recipes.squash_step [--out DIR] [--no-progress]``: the step on a folder (the
    bundled model's by default) that :mod:`pairedge.apps.recipes.default_model` built without the squash."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=default_model_dir(), help="the model folder")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    summary = add_input_squash(args.out, RECIPE, QAT_RECIPE, say=None if args.no_progress else print)
    print(f"added the input squash to {args.out} in {summary['input_squash']['seconds']} s")


if __name__ == "__main__":
    main()
