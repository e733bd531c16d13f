"""Train the bundled default model from its recipe: ``python -m pairedge.apps.recipes.default_model``.

Follows :data:`pairedge.core.bundled.RECIPE` exactly: simulator scenes of the listed presets and training
seeds, the ``pairedge`` spec with the runtime's flow, stage 1 (interacting or not) and stage 2 (the paper's
3 classes) trained with the listed configurations, exported to ``stage1.onnx`` / ``stage2.onnx`` with the
recipe in their metadata, and evaluated on held-out seeds of every preset. Writes ``recipe.json`` with the
recipe, the data fingerprints and value summaries, the model sizes and the held-out metrics, then a fresh
``manifest.json`` with the SHA-256 of all three files (:mod:`pairedge.core.modelfolder`). ``recipe.json`` also
records value summaries of a small slice of the training rows (seed :data:`CHECK_SEEDS` of every preset) and
the BLAS kernel that computed them, for a fast reproducibility test that holds on any CPU
(:mod:`pairedge.export.datasets.fingerprint`); ``--record-check`` adds them to an existing folder without
retraining (``--full``: the summaries of all training rows too). ``extra_presets`` add simulator
families with their own seeds (the randomized elevated ``surveillance`` cameras); ``stage1.threshold_beta``
sets the runtime's ``p_interact`` threshold to the one maximising F-beta on the stage-1 validation split
(beta < 1: "interacting" should mean together), with ``threshold_preset`` on that preset's validation rows
only, as far as the other presets' validation MPCA allows (:func:`constrained_threshold`); the held-out
stage-1 metrics use it. ``confirm`` chooses the runtime's link confirmation time on simulator validation
clips (:mod:`pairedge.apps.recipes.link_policy`) and stores it in stage 1's metadata (``extra["confirm_s"]``);
``stage1.operating_points`` adds named operating points (threshold and confirmation chosen together by the
pipeline-level F1 on one preset's validation clips, ``extra["operating_points"]``). ``stage2.aspect_swap``
gives a fraction of stage 2's walking rows the box aspects of standing rows before training
(:mod:`pairedge.export.aspect_swap`; validation rows included, held-out rows never). The last step makes
``stage{1,2}.int8.onnx`` from the final fp32 files by quantization-aware training
(:data:`pairedge.core.bundled.QAT_RECIPE`, :mod:`pairedge.export.qat.build`; every Gemm in int8) and records
it in ``recipe.json["int8"]``; ``--int8-only`` redoes only that step for an existing folder (minutes, no fp32
retraining).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.apps.recipes.link_policy import choose_confirm_s, choose_operating_point
from pairedge.core import limits
from pairedge.core.artefacts import RECIPE_FILE, RECIPE_ROLE, artefact, stage_artefacts
from pairedge.core.bundled import QAT_RECIPE, RECIPE, default_model_dir
from pairedge.core.errors import PairedgeError
from pairedge.core.io.featurefile import concat_rows
from pairedge.core.modelfolder import write_manifest
from pairedge.export.aspect_swap import borrow_standing_aspect
from pairedge.export.datasets import FeatureData
from pairedge.export.datasets.fingerprint import blas_info, value_summary
from pairedge.export.datasets.sim import recipe_feature_sets
from pairedge.export.evaluation import classification_metrics
from pairedge.export.jobs import resolve_data
from pairedge.export.onnx_export import export_checkpoint
from pairedge.export.qat.build import INT8_ROLES, build_int8
from pairedge.export.qat.data import recipe_rows
from pairedge.export.qat.unit_bound import apply_unit_bound, rescore_stage2
from pairedge.export.train import TrainConfig, checkpoint_of, predict_logits, train

TASK_STAGE = {"stage1": 1, "paper3": 2}
#: The files of the default model folder and their roles in its ``manifest.json``.
MANIFEST_ROLES = {**{a.onnx: a.role for a in stage_artefacts("fp32")}, RECIPE_FILE: RECIPE_ROLE}
#: Training seeds whose rows' fingerprints ``recipe.json`` records as a fast reproducibility check.
CHECK_SEEDS = "0"


def feature_sets(recipe: dict[str, Any], seeds: str, presets: list[str]) -> dict[str, FeatureData]:
    """The stage-1 and stage-2 rows of ``presets`` x ``seeds`` (one pass over the scenes)."""
    tasks = (recipe["stage1"]["task"], recipe["stage2"]["task"])
    return recipe_feature_sets(recipe, seeds, presets, tasks)


def training_sets(recipe: dict[str, Any], which: str = "train") -> dict[str, FeatureData]:
    """The rows of every preset of the recipe: ``presets`` x ``{which}_seeds`` plus each ``extra_presets``
    entry with its own seeds (e.g. the randomized ``surveillance`` cameras), concatenated per task."""
    parts = [feature_sets(recipe, recipe[f"{which}_seeds"], list(recipe["presets"]))]
    for extra in recipe.get("extra_presets", ()):
        parts.append(feature_sets(recipe, extra[f"{which}_seeds"], [extra["preset"]]))
    return {task: concat_rows([p[task] for p in parts]) for task in parts[0]}


def held_out_sets(recipe: dict[str, Any]) -> dict[str, dict[str, FeatureData]]:
    """Held-out rows per preset (``test_seeds``; extra presets with their own test seeds)."""
    tests = {p: feature_sets(recipe, recipe["test_seeds"], [p]) for p in recipe["presets"]}
    for extra in recipe.get("extra_presets", ()):
        tests[extra["preset"]] = feature_sets(recipe, extra["test_seeds"], [extra["preset"]])
    return tests


def calibrate_threshold(
    p: np.ndarray, y: np.ndarray, beta: float, taus: Any = None
) -> tuple[float, dict[str, float]]:
    """The stage-1 threshold on ``p_interact`` (N,) maximising F-beta for the positives of ``y`` (N,) on
    validation rows (beta < 1 favours precision: "interacting" should mean together), among ``taus`` (None:
    0.30, 0.31, ..., 0.95). Returns the threshold and its precision / recall / F-beta."""
    best = (0.5, {"precision": 0.0, "recall": 0.0, "f_beta": -1.0})
    for tau in np.round(np.arange(0.30, 0.951, 0.01), 2) if taus is None else taus:
        pred = p >= tau
        tp = float((pred & (y == 1)).sum())
        prec = tp / max(float(pred.sum()), 1.0)
        rec = tp / max(float((y == 1).sum()), 1.0)
        f = (1 + beta**2) * prec * rec / max(beta**2 * prec + rec, 1e-12)
        if f > best[1]["f_beta"]:
            best = (float(tau), {"precision": prec, "recall": rec, "f_beta": f})
    return best


def constrained_threshold(
    p: np.ndarray, y: np.ndarray, presets: np.ndarray, beta: float, target: str, max_drop: float
) -> tuple[float, dict[str, float]]:
    """The threshold maximising F-beta on the ``target`` preset's validation rows, among those that keep every
    other preset's validation MPCA within ``max_drop`` of its MPCA at 0.5.

    A camera that sees many strangers near each other (the elevated ``surveillance`` family) wants a higher
    threshold than a robot among a few groups; this rule raises it only as far as the other presets allow.

    Args:
        p: (N,) stage-1 probabilities; y: (N,) 0/1 labels; presets: (N,) preset name of each row.
    """
    taus = np.round(np.arange(0.30, 0.951, 0.01), 2)
    others = [k for k in np.unique(presets) if k != target]
    floor = {k: _mpca(p[presets == k], y[presets == k], 0.5) - max_drop for k in others}
    allowed = [t for t in taus if all(_mpca(p[presets == k], y[presets == k], t) >= floor[k] for k in others)]
    on = presets == target
    tau, info = calibrate_threshold(p[on], y[on], beta, allowed or [0.5])
    return tau, {**info, "rule": f"F{beta:g} on {target}, others' MPCA within {max_drop:g} of 0.5's"}


def _mpca(p: np.ndarray, y: np.ndarray, tau: float) -> float:
    """Mean per-class recall of ``p >= tau`` against 0/1 labels (classes present only)."""
    pred = p >= tau
    recalls = [float((pred[y == 1]).mean())] if (y == 1).any() else []
    recalls += [float((~pred[y == 0]).mean())] if (y == 0).any() else []
    return float(np.mean(recalls)) if recalls else 0.0


def check_fingerprints(recipe: dict[str, Any], seeds: str = CHECK_SEEDS) -> dict[str, Any]:
    """Value summaries of the training rows of ``seeds`` (every preset): a small slice of the training data.

    ``recipe.json`` records them so a fast test can show that this code still produces the shipped model's
    training data (rebuilding all of it is the opt-in full check). They are compared with a tolerance
    (:func:`pairedge.export.datasets.fingerprint.compare_summaries`), so another CPU's BLAS kernel still
    matches; the exact SHA-256 and the BLAS kernel are recorded for reference only.
    """
    sets = feature_sets(recipe, seeds, list(recipe["presets"]))
    return {
        "seeds": seeds,
        "presets": list(recipe["presets"]),
        "blas": blas_info(),
        **{key: _data_record(sets[recipe[key]["task"]]) for key in ("stage1", "stage2")},
    }


def full_summaries(recipe: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Value summaries of all training rows of both stages (minutes of CPU: the opt-in full check)."""
    sets = training_sets(recipe)
    return {
        key: value_summary(
            resolve_data(sets[recipe[key]["task"]], str(recipe["spec"]), TASK_STAGE[recipe[key]["task"]])
        )
        for key in ("stage1", "stage2")
    }


def _data_record(data: FeatureData) -> dict[str, Any]:
    return {"sha256": data.fingerprint(), "summary": value_summary(data)}


def record_check(out: Path, recipe: dict[str, Any] = RECIPE, full: bool = False) -> dict[str, Any]:
    """Add :func:`check_fingerprints` (and with ``full`` every stage's :func:`full_summaries`) to an existing
    ``recipe.json`` (no retraining) and rewrite the manifest."""
    path = out / "recipe.json"
    summary = read_summary(out)
    if summary.get("recipe") != recipe:
        raise SystemExit(f"error: {path}: was built from another recipe; rebuild the model instead")
    summary["check"] = check_fingerprints(recipe)
    if full:
        for key, values in full_summaries(recipe).items():
            summary["stages"][key]["data_summary"] = values
    path.write_text(json.dumps(summary, indent=2) + "\n")
    write_manifest(out, folder_roles(out))
    return summary


def read_summary(out: Path) -> dict[str, Any]:
    """The ``recipe.json`` of the model folder ``out`` (a regular file within
    :data:`pairedge.core.limits.MAX_SIDECAR_BYTES`, a JSON object).

    Raises:
        SystemExit: one line saying what is wrong with it (missing, not a regular file, too large, not JSON).
    """

    path = out / "recipe.json"
    try:
        summary = json.loads(limits.read_text(path, "a model folder's recipe.json", limits.MAX_SIDECAR_BYTES))
    except PairedgeError as exc:
        raise SystemExit(f"error: {exc}") from None
    except json.JSONDecodeError as exc:
        raise SystemExit(f"error: {path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(summary, dict):
        raise SystemExit(f"error: {path}: expected a JSON object, got {type(summary).__name__}")
    return summary


def folder_roles(out: Path) -> dict[str, str]:
    """The manifest roles of the folder: the fp32 files and the recipe, plus the int8 files
    (:data:`INT8_ROLES`, made by the QAT step) when present."""
    return {**MANIFEST_ROLES, **{name: role for name, role in INT8_ROLES.items() if (out / name).is_file()}}


def build_int8_step(
    out: Path, recipe: dict[str, Any] = RECIPE, qat_recipe: dict[str, Any] = QAT_RECIPE, progress: bool = True
) -> dict[str, Any]:
    """Only the QAT step on an existing folder: ``stage{1,2}.int8.onnx`` from its fp32 files, recorded in its
    ``recipe.json["int8"]``, and a fresh manifest (the fp32 files are not retrained)."""
    path = out / "recipe.json"
    summary = read_summary(out)
    if summary.get("recipe") != recipe:
        raise SystemExit(f"error: {path}: was built from another recipe; rebuild the model instead")
    summary["int8"] = build_int8(out, recipe, qat_recipe, say=print if progress else None)
    path.write_text(json.dumps(summary, indent=2) + "\n")
    write_manifest(out, folder_roles(out))
    return summary


def train_config(stage: dict[str, Any]) -> TrainConfig:
    """The :class:`TrainConfig` of one stage of the recipe."""
    return TrainConfig(
        architecture=stage["architecture"],
        hidden=tuple(stage["hidden"]),
        epochs=int(stage["epochs"]),
        patience=int(stage["patience"]),
        samples_per_epoch=int(stage["samples_per_epoch"]),
        seed=int(stage["seed"]),
        ignore_features=tuple(stage.get("ignore_features", ())),
        input_squash=stage.get("input_squash"),
        activation_bound=stage.get("activation_bound"),
    )


def stage_rows(
    recipe: dict[str, Any], key: str, train_sets: dict[str, FeatureData]
) -> tuple[FeatureData, dict[str, Any] | None]:
    """The training rows of stage ``key`` (``"stage1"`` / ``"stage2"``) from :func:`training_sets`, with its
    ``aspect_swap`` applied, and the swap's record (None without one)."""
    stage = recipe[key]
    data = resolve_data(train_sets[stage["task"]], str(recipe["spec"]), TASK_STAGE[stage["task"]])
    if "aspect_swap" not in stage:
        return data, None
    swap = stage["aspect_swap"]  # stage 2's walking rows borrow standing rows' box aspects (some of them)
    data, rows = borrow_standing_aspect(data, float(swap["fraction"]), int(swap["seed"]))
    return data, {**swap, "rows": rows}


def build_default_model(
    out: Path, recipe: dict[str, Any] = RECIPE, progress: bool = True, int8: bool = True
) -> dict[str, Any]:
    """Train, export and evaluate both stages into ``out``; returns (and writes) the ``recipe.json`` content.
    ``int8=False`` skips the QAT step (``recipe.json["int8"]`` None): for a baseline that is only run at fp32,
    or an architecture the QAT import does not take (``residual_mlp``'s BatchNorm counters)."""
    t0 = time.perf_counter()
    (out / "manifest.json").unlink(
        missing_ok=True
    )  # stale once any file is rewritten; written again at the end
    train_sets = training_sets(recipe)
    tests = held_out_sets(recipe)
    summary: dict[str, Any] = {"recipe": recipe, "stages": {}}
    for key in ("stage1", "stage2"):
        stage = recipe[key]
        task, number = stage["task"], TASK_STAGE[stage["task"]]
        data, swapped = stage_rows(recipe, key, train_sets)
        result = train(data, train_config(stage), progress=progress)
        ckpt = checkpoint_of(result, data)
        ckpt = replace(ckpt, label_set=data.label_set, extra={**ckpt.extra, "recipe": recipe})
        tau, calibration = 0.5, None
        if number == 1 and "threshold_beta" in stage:  # calibrated on the training run's validation split
            tau, calibration = stage1_threshold(stage, result, data)
            ckpt = replace(ckpt, thresholds={**ckpt.thresholds, "p_interact": tau})
        if number == 1:
            stage1_ckpt = ckpt
        exported = export_checkpoint(ckpt, out / artefact(number, "fp32").onnx)
        held_out = {}
        for preset, sets in tests.items():
            test = sets[task]
            pred = (
                (_p1(result.model, test.X) >= tau).astype(np.int64)
                if number == 1
                else (predict_logits(result.model, test.X).argmax(1))
            )
            held_out[preset] = classification_metrics(test.y, pred, test.labels)
        summary["stages"][key] = {
            "task": task,
            "labels": list(data.labels),
            "train_rows": len(data.y),
            "data_fingerprint": data.fingerprint(),
            "data_summary": value_summary(data),
            "feature_spec_version": data.feature_spec_version,
            "num_parameters": result.num_parameters,
            "onnx_bytes": exported.onnx_bytes,
            "onnx_max_abs_diff": exported.max_abs_diff,
            "best_epoch": result.best_epoch,
            "aspect_swap": swapped,
            "p_interact_threshold": tau if number == 1 else None,
            "threshold_calibration": calibration,
            "validation": {k: result.val_metrics[k] for k in ("accuracy", "mpca", "macro_f1")},
            "held_out": {
                p: {k: m[k] for k in ("n", "accuracy", "mpca", "macro_f1")} for p, m in held_out.items()
            },
        }
    if "confirm" in recipe:  # the runtime's link confirmation times, chosen on validation clips
        extra, summary["confirm"] = link_settings(out, recipe)
        export_checkpoint(
            replace(stage1_ckpt, extra={**stage1_ckpt.extra, **extra}), out / artefact(1, "fp32").onnx
        )
    rows = None
    if "unit_bound" in recipe["stage2"]:  # the last fp32 step: stage 2's hidden units bounded at the source
        rows = recipe_rows(recipe, "train")
        summary["unit_bound"] = apply_unit_bound(out, recipe, QAT_RECIPE, rows)
        summary["stages"]["stage2"]["held_out"] = rescore_stage2(out, recipe, tests)
    summary["check"] = check_fingerprints(recipe)
    for name in INT8_ROLES:  # made from the fp32 files just written, never left from an older model
        (out / name).unlink(missing_ok=True)
    say = print if progress else None
    summary["int8"] = build_int8(out, recipe, QAT_RECIPE, rows=rows, say=say) if int8 else None
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    (out / "recipe.json").write_text(json.dumps(summary, indent=2) + "\n")
    write_manifest(out, folder_roles(out))
    return summary


def link_settings(out: Path, recipe: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The recipe's ``confirm`` and ``stage1.operating_points``, chosen by running the model folder ``out``
    through the pipeline on the validation clips (:mod:`pairedge.apps.recipes.link_policy`).

    Returns:
        Stage 1's metadata additions (``confirm_s``, ``operating_points``) and the ``recipe.json`` record
        (the choices and every validation row behind them).
    """

    c = recipe["confirm"]
    seeds, grid, frames = (
        str(c["seeds"]),
        [float(x) for x in c["grid"]],
        int(c.get("frames", recipe["frames"])),
    )
    presets = list(recipe["presets"]) + [e["preset"] for e in recipe.get("extra_presets", ())]
    confirm_s, table = choose_confirm_s(out, presets, seeds, grid, frames)
    record: dict[str, Any] = {"confirm_s": confirm_s, "validation": table, "operating_points": {}}
    points = {}
    for name, spec in recipe["stage1"].get("operating_points", {}).items():  # on its own preset's clips
        preset, taus = str(spec["preset"]), [float(t) for t in spec["taus"]]
        op_tau, op_confirm, op_table = choose_operating_point(out, preset, seeds, taus, grid, frames)
        points[name] = {"p_interact": op_tau, "confirm_s": op_confirm, "preset": preset}
        if "min_camera_height" in spec:  # chosen automatically above this camera height (body heights)
            points[name]["min_camera_height"] = float(spec["min_camera_height"])
        record["operating_points"][name] = {**points[name], "validation": op_table}
    return {"confirm_s": confirm_s, **({"operating_points": points} if points else {})}, record


def stage1_threshold(stage: dict[str, Any], result: Any, data: FeatureData) -> tuple[float, dict[str, Any]]:
    """The recipe's stage-1 threshold from the training run's validation split: F-beta over all its rows, or,
    with ``threshold_preset``, :func:`constrained_threshold` (``threshold_max_drop``, default 0.01)."""
    val = np.isin(data.groups, result.val_groups)
    p, y, beta = _p1(result.model, data.X[val]), data.y[val], float(stage["threshold_beta"])
    if "threshold_preset" not in stage:
        return calibrate_threshold(p, y, beta)
    presets = np.array([str(g).rsplit("-", 1)[0] for g in data.groups[val]])
    return constrained_threshold(
        p, y, presets, beta, str(stage["threshold_preset"]), float(stage.get("threshold_max_drop", 0.01))
    )


def _p1(model: Any, X: np.ndarray) -> np.ndarray:
    """Stage-1 probability of "interacting" (N,) as the runtime computes it (sigmoid of the logit gap)."""
    logits = predict_logits(model, X).astype(np.float64)
    return 1.0 / (1.0 + np.exp(-(logits[:, 1] - logits[:, 0])))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train the bundled default model from its recipe.")
    parser.add_argument("--out", type=Path, default=default_model_dir(), help="output folder")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--record-check",
        action="store_true",
        help="only add the value summaries of a small slice of the training data to an existing recipe.json "
        "(no retraining) and rewrite manifest.json",
    )
    parser.add_argument(
        "--full", action="store_true", help="with --record-check: also summarise all training rows (minutes)"
    )
    parser.add_argument(
        "--int8-only",
        action="store_true",
        help="only (re)build stage{1,2}.int8.onnx of an existing folder by quantization-aware training from "
        "its fp32 files (minutes; no fp32 retraining), record it in recipe.json and rewrite manifest.json",
    )
    args = parser.parse_args(argv)
    if args.int8_only:
        record = build_int8_step(args.out, progress=not args.no_progress)["int8"]
        for key, st in record["stages"].items():
            print(
                f"{key}: {st['file']}, {st['gemm_matmul_int8']} Gemm/MatMul in int8, validation agreement "
                f"{st['validation']['agreement']:.4f} (epoch {st['best_epoch']})"
            )
        print(f"wrote the int8 files of {args.out} in {record['seconds']} s")
        return
    if args.record_check:
        check = record_check(args.out, full=args.full)["check"]
        print(f"recorded the value summaries of seeds {check['seeds']} in {args.out / 'recipe.json'}")
        return
    args.out.mkdir(parents=True, exist_ok=True)
    summary = build_default_model(args.out, progress=not args.no_progress)
    for key, stage in summary["stages"].items():
        tests = ", ".join(f"{p} MPCA {m['mpca']:.3f}" for p, m in stage["held_out"].items())
        print(f"{key}: {stage['num_parameters']} parameters, {stage['onnx_bytes']} bytes; held-out {tests}")
    if "confirm" in summary:
        print(f"link confirmation: {summary['confirm']['confirm_s']:g} s (best mean F1 on validation clips)")
    print(f"wrote {args.out} in {summary['seconds']} s")


if __name__ == "__main__":
    main()
