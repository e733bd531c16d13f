"""Train the bundled default model from its recipe: ``python -m pairedge.export.default_model``.

Follows :data:`pairedge.default_model.RECIPE` exactly: simulator scenes of the listed presets and training
seeds, the ``pairedge`` spec with the runtime's flow, stage 1 (interacting or not) and stage 2 (the paper's
3 classes) trained with the listed configurations, exported to ``stage1.onnx`` / ``stage2.onnx`` with the
recipe in their metadata, and evaluated on held-out seeds of every preset. Writes ``recipe.json`` with the
recipe, the data fingerprints, the model sizes and the held-out metrics, then a fresh ``manifest.json`` with
the SHA-256 of all three files (:mod:`pairedge.modelfolder`). ``recipe.json`` also records the fingerprints
of a small slice of the training rows (seed :data:`CHECK_SEEDS` of every preset) for a fast reproducibility
test; ``--record-check`` adds them to an existing folder without retraining.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from pairedge.datasets import FeatureData
from pairedge.datasets.sim import SimDataset, sim_feature_sets
from pairedge.datasets.sources import parse_seeds
from pairedge.default_model import RECIPE, default_model_dir
from pairedge.export.evaluation import classification_metrics
from pairedge.export.jobs import resolve_data
from pairedge.export.onnx_export import export_checkpoint
from pairedge.export.train import TrainConfig, checkpoint_of, predict_logits, train
from pairedge.modelfolder import write_manifest

TASK_STAGE = {"stage1": 1, "paper3": 2}
#: The files of the default model folder and their roles in its ``manifest.json``.
MANIFEST_ROLES = {"stage1.onnx": "stage1", "stage2.onnx": "stage2", "recipe.json": "recipe"}
#: Training seeds whose rows' fingerprints ``recipe.json`` records as a fast reproducibility check.
CHECK_SEEDS = "0"


def feature_sets(recipe: dict[str, Any], seeds: str, presets: list[str]) -> dict[str, FeatureData]:
    """The stage-1 and stage-2 rows of ``presets`` x ``seeds`` (one pass over the scenes)."""
    ds = SimDataset(
        presets=tuple(presets),
        seeds=parse_seeds(seeds),
        frames=int(recipe["frames"]),
        stride=int(recipe["stride"]),
        boxes=str(recipe["boxes"]),
        task="stage1",
        feature_config=dict(recipe["feature_config"]),
    )
    tasks = (recipe["stage1"]["task"], recipe["stage2"]["task"])
    return sim_feature_sets(str(recipe["spec"]), ds, tasks)


def check_fingerprints(recipe: dict[str, Any], seeds: str = CHECK_SEEDS) -> dict[str, Any]:
    """Fingerprints of the training rows of ``seeds`` (every preset): a small slice of the training data.

    ``recipe.json`` records them so a fast test can show that this code still produces the shipped model's
    training data (rebuilding all of it is the opt-in full check).
    """
    sets = feature_sets(recipe, seeds, list(recipe["presets"]))
    return {
        "seeds": seeds,
        "presets": list(recipe["presets"]),
        **{key: sets[recipe[key]["task"]].fingerprint() for key in ("stage1", "stage2")},
    }


def record_check(out: Path, recipe: dict[str, Any] = RECIPE) -> dict[str, Any]:
    """Add :func:`check_fingerprints` to an existing ``recipe.json`` (no retraining) and rewrite the manifest."""
    path = out / "recipe.json"
    summary = json.loads(path.read_text())
    if summary.get("recipe") != recipe:
        raise SystemExit(f"{path}: was built from another recipe; rebuild the model instead")
    summary["check"] = check_fingerprints(recipe)
    path.write_text(json.dumps(summary, indent=2) + "\n")
    write_manifest(out, MANIFEST_ROLES)
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
    )


def build_default_model(out: Path, recipe: dict[str, Any] = RECIPE, progress: bool = True) -> dict[str, Any]:
    """Train, export and evaluate both stages into ``out``; returns (and writes) the ``recipe.json`` content."""
    t0 = time.perf_counter()
    spec = str(recipe["spec"])
    train_sets = feature_sets(recipe, recipe["train_seeds"], recipe["presets"])
    tests = {p: feature_sets(recipe, recipe["test_seeds"], [p]) for p in recipe["presets"]}
    summary: dict[str, Any] = {"recipe": recipe, "stages": {}}
    for key in ("stage1", "stage2"):
        stage = recipe[key]
        task, number = stage["task"], TASK_STAGE[stage["task"]]
        data = resolve_data(train_sets[task], spec, number)
        result = train(data, train_config(stage), progress=progress)
        ckpt = checkpoint_of(result, data)
        ckpt = replace(ckpt, label_set=data.label_set, extra={**ckpt.extra, "recipe": recipe})
        exported = export_checkpoint(ckpt, out / f"stage{number}.onnx")
        held_out = {}
        for preset, sets in tests.items():
            test = sets[task]
            held_out[preset] = classification_metrics(
                test.y, predict_logits(result.model, test.X).argmax(1), test.labels
            )
        summary["stages"][key] = {
            "task": task,
            "labels": list(data.labels),
            "train_rows": len(data.y),
            "data_fingerprint": data.fingerprint(),
            "feature_spec_version": data.feature_spec_version,
            "num_parameters": result.num_parameters,
            "onnx_bytes": exported.onnx_bytes,
            "onnx_max_abs_diff": exported.max_abs_diff,
            "best_epoch": result.best_epoch,
            "validation": {k: result.val_metrics[k] for k in ("accuracy", "mpca", "macro_f1")},
            "held_out": {
                p: {k: m[k] for k in ("n", "accuracy", "mpca", "macro_f1")} for p, m in held_out.items()
            },
        }
    summary["check"] = check_fingerprints(recipe)
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    (out / "recipe.json").write_text(json.dumps(summary, indent=2) + "\n")
    write_manifest(out, MANIFEST_ROLES)
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train the bundled default model from its recipe.")
    parser.add_argument("--out", type=Path, default=default_model_dir(), help="output folder")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--record-check",
        action="store_true",
        help="only add the fingerprints of a small slice of the training data to an existing recipe.json "
        "(no retraining) and rewrite manifest.json",
    )
    args = parser.parse_args(argv)
    if args.record_check:
        check = record_check(args.out)["check"]
        print(f"recorded the fingerprints of seeds {check['seeds']} in {args.out / 'recipe.json'}")
        return
    args.out.mkdir(parents=True, exist_ok=True)
    summary = build_default_model(args.out, progress=not args.no_progress)
    for key, stage in summary["stages"].items():
        tests = ", ".join(f"{p} MPCA {m['mpca']:.3f}" for p, m in stage["held_out"].items())
        print(f"{key}: {stage['num_parameters']} parameters, {stage['onnx_bytes']} bytes; held-out {tests}")
    print(f"wrote {args.out} in {summary['seconds']} s")


if __name__ == "__main__":
    main()
