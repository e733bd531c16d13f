"""Default-model recipe with and without the camera-placement ("viewpoint") feature columns.

The ``pairedge`` spec has columns that encode where the camera is rather than what people do: absolute box
height and bottom of each person, the pair's mean height / bottom / width (``FeatureSpec.viewpoint_names``).
``pairedge train --ignore-features viewpoint`` masks them inside the model. This benchmark trains the bundled
default model's recipe (:data:`pairedge.core.bundled.RECIPE`: presets static + moving + noisy, training
seeds 0-11) once as shipped and once with the viewpoint columns ignored, for both stages and several model
seeds, and tests on held-out seeds of the training presets **and of two presets whose cameras training never
saw**: ``panorama`` (360-degree, 3760 x 480, camera at 1 m: JRDB-like) and ``crowd`` (960 x 540, camera at
2.5 m, 80 people). Pairwise-protocol accuracy and MPCA; stage 1 on all true pairs, stage 2 on the true
together pairs (the paper's 3 classes).

Writes ``benchmarks/results/bench_viewpoint.json`` and ``.md``. Run from the repository root::

    python benchmarks/bench_viewpoint.py               # about 6 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
from _train_bench import environment, evaluate, write
from pairedge.apps.recipes.default_model import TASK_STAGE, feature_sets, train_config
from pairedge.core.bundled import RECIPE
from pairedge.core.seeds import parse_seeds
from pairedge.export.jobs import resolve_data
from pairedge.export.train import train

UNSEEN = ("panorama", "crowd")
VARIANTS = {"as shipped": (), "viewpoint ignored": ("viewpoint",)}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--test-seeds", default=RECIPE["test_seeds"])
    p.add_argument("--unseen-frames", type=int, default=150, help="frames per unseen-preset test scene")
    p.add_argument("--model-seeds", default="0-1")
    p.add_argument("--out", type=Path, default=None)
    return p.parse_args()


def test_sets(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Held-out rows per preset: the recipe's presets, then the unseen ones (shorter scenes: 30-80 people)."""
    sets = {p: feature_sets(RECIPE, args.test_seeds, [p]) for p in RECIPE["presets"]}
    unseen_recipe = {**RECIPE, "frames": args.unseen_frames}
    sets.update({p: feature_sets(unseen_recipe, args.test_seeds, [p]) for p in UNSEEN})
    return sets


def markdown(report: dict[str, Any]) -> str:
    presets = report["presets"]
    lines = [
        "# Default-model recipe with and without the viewpoint columns",
        "",
        "`python benchmarks/bench_viewpoint.py` — the recipe of the bundled default model (presets "
        f"{', '.join(RECIPE['presets'])}, training seeds {RECIPE['train_seeds']}), trained as shipped and "
        f"with `ignore_features=('viewpoint',)`; tested on held-out seeds {report['args']['test_seeds']} of "
        "the training presets and of `panorama` and `crowd`, whose cameras training never saw (unseen "
        f"presets: {report['args']['unseen_frames']} frames per scene). Mean ± std over model seeds "
        f"{report['args']['model_seeds']}; accuracy / MPCA.",
        "",
    ]
    for stage in ("stage1", "stage2"):
        what = (
            "interacting or not, all true pairs"
            if stage == "stage1"
            else "the paper's 3 classes, true together pairs"
        )
        lines += [
            f"## {stage} ({what})",
            "",
            "| columns | " + " | ".join(f"{p}{' (unseen)' if p in UNSEEN else ''}" for p in presets) + " |",
            "|---|" + "---|" * len(presets),
        ]
        for variant in VARIANTS:
            runs = report["results"][stage][variant]
            cells = []
            for p in presets:
                acc = np.array([r[p]["accuracy"] for r in runs])
                mpca = np.array([r[p]["mpca"] for r in runs])
                cells.append(f"{acc.mean():.3f} ± {acc.std():.3f} / {mpca.mean():.3f} ± {mpca.std():.3f}")
            lines.append(f"| {variant} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "Test pairs: " + ", ".join(f"{p} {n}" for p, n in report["test_rows"].items()) + " (stage-2 rows).",
        "",
        f"Environment: {report['environment']}",
    ]
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    t0 = time.perf_counter()
    spec = str(RECIPE["spec"])
    train_sets = feature_sets(RECIPE, RECIPE["train_seeds"], RECIPE["presets"])
    tests = test_sets(args)
    print(f"built training and test rows in {time.perf_counter() - t0:.0f} s")
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for stage in ("stage1", "stage2"):
        task = RECIPE[stage]["task"]
        data = resolve_data(train_sets[task], spec, TASK_STAGE[task])
        results[stage] = {}
        for variant, ignore in VARIANTS.items():
            runs = []
            for seed in parse_seeds(args.model_seeds):
                config = train_config({**RECIPE[stage], "seed": seed, "ignore_features": list(ignore)})
                model = train(data, config, progress=False).model
                run: dict[str, Any] = {"seed": seed}
                for preset, sets in tests.items():
                    test = sets[task]
                    m = evaluate(model, test.X, test.y, test.labels)
                    run[preset] = {k: m[k] for k in ("n", "accuracy", "mpca", "macro_f1")}
                runs.append(run)
                print(stage, variant, seed, {p: round(run[p]["mpca"], 3) for p in tests})
            results[stage][variant] = runs
    report = {
        "benchmark": "viewpoint_columns",
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "recipe": RECIPE,
        "presets": list(tests),
        "test_rows": {p: len(s[RECIPE["stage2"]["task"]].y) for p, s in tests.items()},
        "results": results,
        "seconds": round(time.perf_counter() - t0, 1),
        "environment": environment(),
    }
    paths = write("bench_viewpoint", report, markdown(report), args.out or Path(__file__).parent / "results")
    print("wrote", *paths)


if __name__ == "__main__":
    main()
