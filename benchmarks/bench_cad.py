"""Real data: Collective Activity per-pair interactions, 8 classes, boxes and tracks only (box-only mode).

Trains the stage-2 classifier exactly as ``pairedge train`` does (``pairedge`` spec in box-only mode, the
default relation network, focal loss, sequence- and class-balanced sampling, AdamW, early stopping on
validation MPCA) on the 32 sequences in ``<data>/cad_choi/annotations`` with the default sequence-level
validation split (seed 0: 20 % of the rows, whole sequences), and reports accuracy, MPCA and macro-F1 on
the validation sequences with the confusion matrix. The usual CAD test sequences are not in the data folder.

Also reported, for context:

- a k-fold cross-validation over sequences (each fold a different seeded sequence-level split, 25 % of the
  rows): how much the headline depends on which sequences are held out;
- a gradient-boosting baseline (scikit-learn ``HistGradientBoostingClassifier``, balanced class weights) on
  the same features and split.

Writes ``benchmarks/results/bench_cad.json`` and ``.md``. Run from the repository root::

    python benchmarks/bench_cad.py                      # about 2-4 minutes on 2 cores
    python benchmarks/bench_cad.py --folds 0 --no-baseline
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from _train_bench import DEFAULT_DATA, environment, evaluate, headline, write
from pairedge.datasets.cad import cad_features
from pairedge.export.data import split_by_sequence
from pairedge.export.jobs import resolve_data, train_to_dir
from pairedge.export.report import confusion_markdown
from pairedge.export.train import TrainConfig, train
from pairedge.io.cad import read_cad_dir


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder")
    p.add_argument("--stride", type=int, default=5, help="keep every N-th frame's rows")
    p.add_argument("--history", type=int, default=30, help="track-history samples of the pairedge spec")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--patience", type=int, default=8)
    p.add_argument("--samples-per-epoch", type=int, default=20000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--folds", type=int, default=4, help="cross-validation folds (0 = skip)")
    p.add_argument("--no-baseline", action="store_true")
    p.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    p.add_argument(
        "--render", type=Path, default=None, help="only re-write the Markdown from this JSON result"
    )
    return p.parse_args()


def baseline(data: Any, val: np.ndarray) -> dict[str, Any]:
    from pairedge.export.evaluation import classification_metrics
    from sklearn.ensemble import HistGradientBoostingClassifier

    clf = HistGradientBoostingClassifier(max_iter=200, class_weight="balanced", random_state=0)
    clf.fit(data.X[~val], data.y[~val])
    return classification_metrics(data.y[val], clf.predict(data.X[val]), data.labels)


def cross_validate(data: Any, config: TrainConfig, folds: int) -> list[dict[str, Any]]:
    rows = []
    for k in range(folds):
        val = split_by_sequence(data.groups, data.y, 0.25, seed=100 + k)
        result = train(data, config, val_mask=val, progress=False)
        m = result.val_metrics
        rows.append(
            {
                "fold": k,
                "val_sequences": result.val_groups,
                **{x: m[x] for x in ("accuracy", "mpca", "macro_f1")},
            }
        )
    return rows


def markdown(r: dict[str, Any]) -> str:
    m = r["validation"]
    lines = [
        "# Collective Activity, 8 interaction classes, boxes and tracks only",
        "",
        f"`python benchmarks/bench_cad.py` — {r['rows']} pair-frames (every {r['stride']}th frame) from "
        f"{len(r['sequences'])} sequences; features `pairedge` v{r['feature_spec_version']} box-only "
        f"(`{r['feature_config']}`), model `{r['model']['architecture']}` ({r['num_parameters']} parameters, "
        f"ONNX {r['onnx_bytes']} bytes), training {r['train_seconds']:.0f} s on CPU.",
        "",
        f"Validation sequences (sequence-level split, seed {r['seed']}): {', '.join(r['val_sequences'])}.",
        "",
        "| | accuracy | MPCA | macro-F1 |",
        "|---|---|---|---|",
        f"| **pairedge relation net** | **{m['accuracy']:.3f}** | **{m['mpca']:.3f}** | **{m['macro_f1']:.3f}** |",
    ]
    if r.get("baseline"):
        b = r["baseline"]
        lines.append(
            f"| gradient boosting, same features | {b['accuracy']:.3f} | {b['mpca']:.3f} | {b['macro_f1']:.3f} |"
        )
    met = "met" if m["mpca"] >= 0.60 else "not met"
    lines += [
        "",
        f"Target of the issue: validation MPCA >= 0.60 — **{met}** ({m['mpca']:.3f}). For scale, the issue quotes a "
        "quick gradient-boosting baseline on simple hand-made pair features at about 0.49 accuracy / 0.46 MPCA / "
        "0.44 macro-F1 on the usual CAD test sequences (kept back, not in this folder, so not comparable one to one).",
    ]
    lines += ["", "| class | precision | recall | F1 | support |", "|---|---|---|---|---|"]
    for name, row in m["per_class"].items():
        lines.append(
            f"| {name} | {row['precision']:.3f} | {row['recall']:.3f} | {row['f1']:.3f} | {row['support']} |"
        )
    lines += [
        "",
        "Confusion matrix (rows = truth, columns = prediction):",
        "",
        confusion_markdown(m["confusion"], m["labels"]),
    ]
    if r.get("cv"):
        cv = r["cv"]
        mp = np.array([f["mpca"] for f in cv])
        lines += [
            "",
            f"## {len(cv)}-fold sequence-level cross-validation (25 % of rows held out per fold)",
            "",
            "| fold | accuracy | MPCA | macro-F1 | held-out sequences |",
            "|---|---|---|---|---|",
        ]
        for f in cv:
            lines.append(
                f"| {f['fold']} | {f['accuracy']:.3f} | {f['mpca']:.3f} | {f['macro_f1']:.3f} | {', '.join(f['val_sequences'])} |"
            )
        lines.append(f"| mean ± std | | {mp.mean():.3f} ± {mp.std():.3f} | | |")
    lines += ["", f"Environment: {r['environment']}"]
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    if args.render:
        report = json.loads(args.render.read_text())
        write("bench_cad", report, markdown(report), args.out or Path(__file__).parent / "results")
        return
    folder = args.data / "cad_choi" / "annotations"
    if not folder.is_dir():
        raise SystemExit(f"Collective Activity annotations not found at {folder}; pass --data")
    sequences = read_cad_dir(folder)
    data = cad_features(sequences, stride=args.stride, feature_config={"history": args.history})
    data = resolve_data(data, "pairedge", 2)
    config = TrainConfig(
        epochs=args.epochs, patience=args.patience, samples_per_epoch=args.samples_per_epoch, seed=args.seed
    )
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        outputs = train_to_dir(data, Path(tmp), spec="pairedge", stage=2, config=config, progress=True)
    seconds = time.perf_counter() - t0
    res = outputs.result
    val = split_by_sequence(data.groups, data.y, config.val_fraction, config.seed)
    assert sorted(np.unique(data.groups[val]).tolist()) == res.val_groups
    again = evaluate(res.model, data.X[val], data.y[val], data.labels)
    assert again["confusion"] == res.val_metrics["confusion"]
    report: dict[str, Any] = {
        "benchmark": "cad8_box_only",
        "sequences": sorted(np.unique(data.groups).tolist()),
        "rows": len(data.y),
        "rows_per_class": dict(zip(data.labels, np.bincount(data.y, minlength=8).tolist(), strict=True)),
        "stride": args.stride,
        "feature_spec": data.feature_spec,
        "feature_spec_version": data.feature_spec_version,
        "feature_config": data.feature_config,
        "model": res.model_config.to_dict(),
        "num_parameters": res.num_parameters,
        "onnx_bytes": outputs.export.onnx_bytes if outputs.export else None,
        "onnx_max_abs_diff": outputs.export.max_abs_diff if outputs.export else None,
        "train_config": config.to_dict(),
        "seed": config.seed,
        "best_epoch": res.best_epoch,
        "train_seconds": seconds,
        "val_sequences": res.val_groups,
        "validation": res.val_metrics,
        "environment": environment(),
    }
    print("validation:", headline(res.val_metrics))
    if not args.no_baseline:
        report["baseline"] = baseline(data, val)
        print("baseline:  ", headline(report["baseline"]))
    if args.folds:
        report["cv"] = cross_validate(data, replace(config), args.folds)
        print("cv MPCA:   ", [round(f["mpca"], 3) for f in report["cv"]])
    paths = write("bench_cad", report, markdown(report), args.out or Path(__file__).parent / "results")
    print("wrote", *paths)


if __name__ == "__main__":
    main()
