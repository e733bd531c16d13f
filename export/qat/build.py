"""The default-model recipe's int8 step: ``stage{1,2}.int8.onnx`` of a model folder by quantization-aware
training.

:func:`build_int8` fine-tunes both stages of the fp32 files in a folder (:mod:`pairedge.export.qat`) on the
rows of the recipe's training scenes and writes ``stage{1,2}.int8.onnx`` beside them, registered in the
folder's manifest. The rows and the split are the fp32 training run's own:

- stage 1: the stage-1 training rows (task ``stage1``), split by sequence as the fp32 run split them
  (``split_by_sequence`` with its ``val_fraction`` and ``seed``): fine-tuning on the training sequences, the
  epoch chosen on the validation sequences;
- stage 2: the pairs the runtime's stage 2 sees: the together pairs plus every pair the fp32 stage 1 gives
  at least ``gate_floor`` (:class:`~pairedge.export.qat.train.QatConfig`), split by the sequences of the fp32
  stage-2 run's split.

A stage whose QAT config has a ``float_budget`` first gets the per-layer sensitivity sweep on its validation
sequences (:mod:`pairedge.export.qat.sensitivity`); the layers it keeps float are fine-tuned and written
float (no Q/DQ: fp16 on TensorRT), named in the file's ``excluded_nodes`` and in ``recipe.json``.

No held-out scene (``test_seeds``, the link settings' ``confirm`` seeds or any benchmark seed) is used.
Deterministic on CPU for the same rows (one thread, seeded).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.artefacts import artefact, stage_artefacts
from pairedge.core.modelfolder import register_files
from pairedge.export.data import split_by_sequence
from pairedge.export.qat import Int8File, config_of, export_int8, import_fp32, stage_info
from pairedge.export.qat.data import RecipeRows, check_fingerprints, recipe_rows
from pairedge.export.qat.sensitivity import float_sweep
from pairedge.export.qat.train import finetune
from pairedge.export.train import predict_logits

#: Manifest roles of the files this step writes.
INT8_ROLES = {a.onnx: a.role for a in stage_artefacts("int8")}
#: Rows ONNX Runtime and the fake-quantized model are compared on after export (per stage).
CHECK_ROWS = 20_000


def _val_mask(groups: np.ndarray, y: np.ndarray, train: dict[str, Any]) -> np.ndarray:
    """The fp32 run's validation rows: ``split_by_sequence`` with its ``val_fraction`` and ``seed``."""
    return split_by_sequence(groups, y, float(train.get("val_fraction", 0.2)), int(train.get("seed", 0)))


def p_interact(model: Any, X: np.ndarray) -> np.ndarray:
    """(N,) stage-1 ``p_interact`` of the fp32 model on raw rows X (N, F1), as the runtime computes it."""
    z = predict_logits(model, X).astype(np.float64)
    return 1.0 / (1.0 + np.exp(-(z[:, 1] - z[:, 0])))


def stage_rows(
    rows: RecipeRows, models: dict[str, Any], metas: dict[str, Any], gate_floor: float
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{"stage1" | "stage2": (training rows, validation rows)}`` (module docstring)."""
    s1 = rows.stage1
    val1 = _val_mask(s1.groups, s1.y, dict(metas["stage1"].extra.get("train", {})))
    s2 = rows.stage2
    val2 = _val_mask(s2.groups, s2.y, dict(metas["stage2"].extra.get("train", {})))
    seen = (s1.y == 1) | (p_interact(models["stage1"], s1.X) >= gate_floor)
    in_val = np.isin(s1.groups, np.unique(s2.groups[val2]))
    X2 = rows.stage2_all
    return {
        "stage1": (s1.X[~val1], s1.X[val1]),
        "stage2": (X2[seen & ~in_val], X2[seen & in_val]),
    }


def build_int8(
    folder: Path,
    recipe: dict[str, Any],
    qat_recipe: dict[str, Any],
    rows: RecipeRows | None = None,
    say: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Write ``stage{1,2}.int8.onnx`` into ``folder`` (module docstring) and register them in its manifest.

    Args:
        folder: a model folder with the fp32 ``stage{1,2}.onnx`` the recipe made.
        recipe: the fp32 recipe (its training scenes); qat_recipe: the QAT recipe (one config per stage).
        rows: the rows of the recipe's training scenes when already built (None: rebuilt, minutes).
        say: progress messages.

    Returns:
        The ``recipe.json`` record of the step: the QAT recipe, per stage the validation history, the best
        epoch, the int8 op count and the export check, whether the rebuilt rows hash to the fp32 files'
        training-data fingerprints, and the seconds it took.
    """

    t0 = time.perf_counter()
    say = say or (lambda _msg: None)
    loaded = {key: import_fp32(folder / f"{key}.onnx") for key in ("stage1", "stage2")}
    models = {k: m for k, (m, _) in loaded.items()}
    metas = {k: meta for k, (_, meta) in loaded.items()}
    if rows is None:
        say("rendering the recipe's training scenes")
        rows = recipe_rows(recipe, "train")
    same_data = check_fingerprints(rows, {k: metas[k].data_fingerprint for k in metas})
    splits = stage_rows(rows, models, metas, config_of(qat_recipe, "stage2").gate_floor)
    tau = float(metas["stage1"].thresholds.get("p_interact", 0.5))
    files: dict[str, Int8File] = {}
    sweeps: dict[str, dict[str, Any]] = {}
    for number, key in ((1, "stage1"), (2, "stage2")):
        X_train, X_val = splits[key]
        config = config_of(qat_recipe, key)
        if config.float_budget > 0:
            say(f"{key}: per-layer sensitivity sweep on the validation sequences")
            sweep = float_sweep(models[key], number, X_train, X_val, config, tau)
            config = replace(config, float_layers=sweep.float_layers)
            sweeps[key] = sweep.to_dict()
            share = f"{100 * sweep.float_mac_share:.1f} % of the multiply-adds"
            say(f"{key}: float: {', '.join(sweep.float_layers) or 'none'} ({share})")
        say(f"{key}: quantization-aware fine-tuning")
        result = finetune(models[key], number, X_train, X_val, config, tau)
        check = X_val[:: max(1, len(X_val) // CHECK_ROWS)]
        out = folder / artefact(number, "int8").onnx
        info = stage_info(qat_recipe, key, result, sweeps.get(key))
        files[key] = export_int8(folder / artefact(number, "fp32").onnx, result, out, info, check)
    register_files(folder, INT8_ROLES)
    return {
        "qat_recipe": qat_recipe,
        "training_data_matches_fp32": same_data,
        "stages": {key: _record(f, splits[key], sweeps.get(key)) for key, f in files.items()},
        "seconds": round(time.perf_counter() - t0, 1),
    }


def _record(
    file: Int8File, split: tuple[np.ndarray, np.ndarray], sweep: dict[str, Any] | None
) -> dict[str, Any]:
    result = file.result
    return {
        "float_layers": list(sweep["float_layers"]) if sweep else [],
        "sensitivity": sweep,
        "file": file.path.name,
        "gemm_matmul_int8": file.quantized_ops,
        "train_rows": len(split[0]),
        "validation_rows": len(split[1]),
        "best_epoch": result.best_epoch,
        "validation": result.validation,
        "history": result.history,
        "activation_ranges": result.ranges,
        "export_max_abs_diff": file.export_max_abs_diff,
        "export_p999_abs_diff": file.export_p999_abs_diff,
        "runtime_max_abs_diff": file.runtime_max_abs_diff,
        "runtime_p999_abs_diff": file.runtime_p999_abs_diff,
        "onnx_bytes": file.path.stat().st_size,
    }
