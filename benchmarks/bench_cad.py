"""Real data: Collective Activity per-pair interactions, 8 classes, boxes and tracks only (box-only mode).

Trains the stage-2 classifier exactly as ``pairedge train`` does (``pairedge`` spec in box-only mode, the
default relation network, focal loss, sequence- and class-balanced sampling, AdamW, early stopping on
validation MPCA) on the 32 sequences in ``<data>/cad_choi/annotations`` with the default sequence-level
validation split (seed 0: 20 % of the rows, whole sequences), and reports accuracy, MPCA and macro-F1 on
the validation sequences with the confusion matrix. The usual CAD test sequences are not in the data folder.

Also reported, for context:

- the same metrics after the runtime's per-pair temporal smoothing (``pairedge.runtime.smoothing`` EMA,
  replayed on every frame of the validation sequences with :func:`pairedge.export.temporal_eval.
  smooth_like_runtime`, evaluated on the same every-``stride``-th-frame rows): the default ``alpha`` of the
  runtime and a slower one; causal, boxes and tracks only, so it is the deployed pipeline's number
  (stage 2 on every labelled pair, i.e. as if every pair passed the stage-1 gate);
- a k-fold cross-validation over sequences: the sequences are partitioned into k folds
  (:func:`pairedge.export.data.sequence_folds`, every sequence held out exactly once), raw and smoothed —
  how much the headline depends on which sequences are held out;
- a gradient-boosting baseline (scikit-learn ``HistGradientBoostingClassifier``, balanced class weights) on
  the same features and split;
- ablations over model seeds (``--ablation-seeds``, same split and CV folds): the box-only model, and the
  same model given each person's **annotated** 8-way body orientation (``attr`` row 1 of ``annoNN.mat``) as
  two extra person columns (cos, sin; 0 when unknown) and the cosine of the two orientations' difference as
  an extra pair column. That input is not boxes and tracks; it is the upper bound of what a body-orientation
  estimator could add, i.e. how much of what box-only misses is orientation.

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
from pairedge.datasets.cad import cad_features, extractor_config, sequence_pair_rows
from pairedge.export.data import sequence_folds, split_by_sequence
from pairedge.export.jobs import resolve_data, train_to_dir
from pairedge.export.report import confusion_markdown
from pairedge.export.temporal_eval import smooth_like_runtime
from pairedge.export.train import TrainConfig, train
from pairedge.io.cad import read_cad_dir
from pairedge.runtime.config import SmoothingConfig

#: smoothing strengths reported: the runtime default (0.6) and a slower EMA
ALPHAS = (SmoothingConfig().alpha, 0.2)


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
    p.add_argument("--ablation-seeds", default="0-2", help="model seeds of the ablations ('' = skip them)")
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


def all_frame_rows(sequences: list[Any], history: int) -> dict[str, np.ndarray]:
    """Every frame's labelled pair rows (stride 1) of all sequences: X, y, frame, pairs, groups."""
    config = extractor_config("pairedge", {"history": history})
    parts = [
        (f"cad{s.sequence or 0:02d}", sequence_pair_rows(s, "pairedge", 2, 1, config)) for s in sequences
    ]
    return {
        "X": np.concatenate([r.X for _, r in parts]),
        "y": np.concatenate([r.y for _, r in parts]),
        "frame": np.concatenate([r.frame for _, r in parts]),
        "pairs": np.concatenate([r.pairs for _, r in parts]),
        "groups": np.concatenate([np.full(len(r.y), g) for g, r in parts]),
    }


def orientation_columns(seq: Any, rows: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Annotated body orientation of A and B as (M, 2) ``cos, sin`` (0, 0 when unknown) and the cosine of
    their difference (M, 1; 0 when either is unknown), for the rows of ``sequence_pair_rows``."""
    pose = np.zeros((seq.num_frames + 1, len(seq.people) + 1), np.int64)  # [frame, track id], 0 = unknown
    for person in seq.people:
        pose[person.frames, person.track_id] = np.maximum(person.pose, 0)
    a, b = pose[rows.frame, rows.pairs[:, 0]], pose[rows.frame, rows.pairs[:, 1]]

    def unit(o: np.ndarray) -> np.ndarray:
        angle = (o - 1) * np.pi / 4
        return np.where((o > 0)[:, None], np.stack([np.cos(angle), np.sin(angle)], axis=1), 0.0)

    known = (a > 0) & (b > 0)
    return unit(a), unit(b), np.where(known, np.cos((a - b) * np.pi / 4), 0.0)[:, None]


def orientation_data(sequences: list[Any], history: int, stride: int) -> Any:
    """Stage-2 box-only rows of all sequences with the annotated orientation columns added."""
    from pairedge.datasets.arrays import FeatureData
    from pairedge.features import get_spec
    from pairedge.labels import CAD8

    config = extractor_config("pairedge", {"history": history})
    fp = get_spec("pairedge").person_dim  # stage 2 = [a (fp), b (fp), pair]
    xs, ys, gs = [], [], []
    for seq in sequences:
        rows = sequence_pair_rows(seq, "pairedge", 2, stride, config)
        oa, ob, rel = orientation_columns(seq, rows)
        xs.append(
            np.concatenate([rows.X[:, :fp], oa, rows.X[:, fp : 2 * fp], ob, rows.X[:, 2 * fp :], rel], axis=1)
        )
        ys.append(rows.y)
        gs.append(np.full(len(rows.y), f"cad{seq.sequence or 0:02d}"))
    person = fp + 2
    x = np.concatenate(xs)
    return FeatureData.from_arrays(
        x, np.concatenate(ys), np.concatenate(gs), CAD8.classes, feature_spec="pairedge",
        feature_spec_version="1", stage=2, label_set=CAD8.name, person_features=person,
        pair_features=x.shape[1] - 2 * person,
    )  # fmt: skip


def ablations(
    sequences: list[Any], box_only: Any, args: argparse.Namespace, config: TrainConfig
) -> list[dict[str, Any]]:
    """Validation MPCA per model seed and CV MPCA (seed 0) for the benchmark's box-only rows and for the same
    rows with the annotated orientation added."""
    from pairedge.datasets.sources import parse_seeds

    out = []
    for name, data in (
        ("boxes and tracks (box-only)", box_only),
        (
            "boxes and tracks + annotated body orientation",
            orientation_data(sequences, args.history, args.stride),
        ),
    ):
        val = split_by_sequence(data.groups, data.y, config.val_fraction, config.seed)
        seeds = [
            {
                "seed": seed,
                **headline_metrics(train(data, replace(config, seed=seed), val_mask=val, progress=False)),
            }
            for seed in parse_seeds(args.ablation_seeds)
        ]
        fold_of = sequence_folds(data.groups, args.folds, seed=config.seed) if args.folds else None
        cv = [
            headline_metrics(train(data, config, val_mask=fold_of == k, progress=False))
            for k in range(args.folds)
        ]
        out.append({"variant": name, "person_features": data.person_features, "seeds": seeds, "cv": cv})
        print(
            name, "seeds MPCA", [round(r["mpca"], 3) for r in seeds], "cv", [round(r["mpca"], 3) for r in cv]
        )
    return out


def headline_metrics(result: Any) -> dict[str, float]:
    """Accuracy, MPCA and macro-F1 of a training result's validation."""
    return {k: float(result.val_metrics[k]) for k in ("accuracy", "mpca", "macro_f1")}


def smoothed_metrics(
    model: Any, rows: dict[str, np.ndarray], val_groups: list[str], stride: int, labels: tuple[str, ...]
) -> dict[str, dict[str, Any]]:
    """Metrics of the runtime-smoothed predictions on the validation sequences, per ALPHAS value."""
    import torch
    from pairedge.export.evaluation import classification_metrics
    from pairedge.export.train import predict_logits

    sel = np.isin(rows["groups"], val_groups)
    probs = torch.softmax(torch.from_numpy(predict_logits(model, rows["X"][sel])), 1).numpy()
    scored = (rows["frame"][sel] - 1) % stride == 0  # the rows the raw metrics use
    out = {}
    for alpha in ALPHAS:
        s = smooth_like_runtime(
            rows["groups"][sel], rows["frame"][sel], rows["pairs"][sel], probs, SmoothingConfig(alpha=alpha)
        )
        out[f"{alpha:g}"] = classification_metrics(rows["y"][sel][scored], s[scored].argmax(1), labels)
    return out


def cross_validate(
    data: Any, config: TrainConfig, folds: int, rows: dict[str, np.ndarray], stride: int
) -> list[dict[str, Any]]:
    """k-fold CV with the sequences partitioned into ``folds`` folds; raw and smoothed metrics per fold."""
    fold_of = sequence_folds(data.groups, folds, seed=config.seed)
    out = []
    for k in range(folds):
        result = train(data, config, val_mask=fold_of == k, progress=False)
        m = result.val_metrics
        smooth = smoothed_metrics(result.model, rows, result.val_groups, stride, data.labels)
        out.append(
            {
                "fold": k,
                "val_sequences": result.val_groups,
                "val_rows": int((fold_of == k).sum()),
                **{x: m[x] for x in ("accuracy", "mpca", "macro_f1")},
                "smoothed": {
                    a: {x: v[x] for x in ("accuracy", "mpca", "macro_f1")} for a, v in smooth.items()
                },
            }
        )
    return out


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
    for alpha, sm in r.get("smoothed", {}).items():
        default = " (runtime default)" if float(alpha) == SmoothingConfig().alpha else ""
        lines.append(
            f"| + runtime per-pair EMA smoothing, alpha {alpha}{default} | {sm['accuracy']:.3f} | {sm['mpca']:.3f} | "
            f"{sm['macro_f1']:.3f} |"
        )
    best = max([m["mpca"]] + [sm["mpca"] for sm in r.get("smoothed", {}).values()])
    met = "met" if best >= 0.60 else "not met"
    lines += [
        "",
        "Smoothed rows: the model's per-frame probabilities on every frame of the validation sequences, replayed "
        "through the runtime's `PairSmoother` (causal, per pair, state dropped when the pair is not present), "
        "scored on the same every-5th-frame rows as the raw numbers.",
        "",
        f"Target of the issue: validation MPCA >= 0.60 — **{met}** (best {best:.3f}). For scale, the issue quotes a "
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
            f"## {len(cv)}-fold sequence-level cross-validation (sequences partitioned: each held out exactly once)",
            "",
            "Early stopping uses the held-out fold (as `pairedge train` uses its validation split). Folds are "
            "balanced by rows, so one very large sequence can form a fold alone; its MPCA then covers only the "
            "classes that sequence contains (rows per fold: "
            + ", ".join(str(f.get("val_rows", "?")) for f in cv)
            + ").",
            "",
            "| fold | accuracy | MPCA | macro-F1 | MPCA smoothed (alpha "
            + " / ".join(cv[0].get("smoothed", {}))
            + ") | held-out sequences |",
            "|---|---|---|---|---|---|",
        ]
        for f in cv:
            sm = " / ".join(f"{v['mpca']:.3f}" for v in f.get("smoothed", {}).values())
            lines.append(
                f"| {f['fold']} | {f['accuracy']:.3f} | {f['mpca']:.3f} | {f['macro_f1']:.3f} | {sm} | "
                f"{', '.join(f['val_sequences'])} |"
            )
        smo = [
            f"{np.mean([f['smoothed'][a]['mpca'] for f in cv]):.3f} ± {np.std([f['smoothed'][a]['mpca'] for f in cv]):.3f}"
            for a in cv[0].get("smoothed", {})
        ]
        lines.append(f"| mean ± std | | {mp.mean():.3f} ± {mp.std():.3f} | | {' / '.join(smo)} | |")
    if r.get("ablations"):
        lines += [
            "",
            "## Ablations: model seeds, and what annotated body orientation would add",
            "",
            "Same split and CV folds. The orientation row gives each person its **annotated** 8-way body "
            "orientation (cos, sin) and the pair the cosine of the orientation difference: not boxes and tracks "
            "(so not a valid entry for the target above), but the upper bound of a body-orientation estimator.",
            "",
            "| variant | validation MPCA per seed | mean ± std | CV MPCA (seed 0) mean ± std |",
            "|---|---|---|---|",
        ]
        for a in r["ablations"]:
            mp = np.array([s["mpca"] for s in a["seeds"]])
            cv = np.array([f["mpca"] for f in a["cv"]])
            cv_cell = f"{cv.mean():.3f} ± {cv.std():.3f}" if len(cv) else "-"
            lines.append(
                f"| {a['variant']} | {' / '.join(f'{v:.3f}' for v in mp)} | {mp.mean():.3f} ± {mp.std():.3f} | "
                f"{cv_cell} |"
            )
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
    rows = all_frame_rows(sequences, args.history)
    report["smoothed"] = smoothed_metrics(res.model, rows, res.val_groups, args.stride, data.labels)
    print("validation:", headline(res.val_metrics))
    for alpha, sm in report["smoothed"].items():
        print(f"smoothed {alpha}:", headline(sm))
    if not args.no_baseline:
        report["baseline"] = baseline(data, val)
        print("baseline:  ", headline(report["baseline"]))
    if args.folds:
        report["cv"] = cross_validate(data, replace(config), args.folds, rows, args.stride)
        print("cv MPCA:   ", [round(f["mpca"], 3) for f in report["cv"]])
    if args.ablation_seeds:
        report["ablations"] = ablations(sequences, data, args, config)
    paths = write("bench_cad", report, markdown(report), args.out or Path(__file__).parent / "results")
    print("wrote", *paths)


if __name__ == "__main__":
    main()
