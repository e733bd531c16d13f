"""Real data: Collective Activity per-pair interactions, 8 classes, honest nested cross-validation.

Every number here is **nested, sequence-grouped cross-validation** over the 32 shared sequences in
``<data>/cad_choi/annotations`` (the usual 12 CAD test sequences are not in the data folder):

* outer loop: the sequences are partitioned into ``--folds`` folds (:func:`pairedge.export.data.
  sequence_folds`, seeded by the repetition seed); each fold is held out once and scored;
* inner split: on the remaining (training) sequences only, whole sequences are split off for early stopping
  (:func:`pairedge.export.data.split_by_sequence`, ``val_fraction`` of the training rows). The held-out
  fold never chooses an epoch, a threshold or a variant;
* repeated for every seed in ``--seeds``: the inner split and the model's initialisation change with it.
  The outer partition does not, here: ``sequence_folds`` deals the sequences largest first, and its seeded
  shuffle only orders sequences with the same number of rows, which the 32 CAD sequences do not have; every
  seed gets the same four folds (the report says so, from the held-out sequences it records).

Reported, per variant (:data:`RECIPES`):

* **the headline**: accuracy, MPCA and macro-F1 of the pooled out-of-fold predictions (each row predicted
  once per seed, by the model whose outer fold held it out), computed exactly as ``pairedge score`` computes
  them (:func:`pairedge.measure.metrics.pairwise.classification_metrics`, SPEC §7): MPCA over all C = 8
  classes as the seed documents define it (``mpca_over_all_classes``; the present-classes ``mpca`` is
  reported beside it and labelled where the two differ), macro-F1 over all 8 classes (absent ones 0); the
  mean ± std over
  the seeds and each seed's value;
* the per-class recall and precision of the pooled predictions (mean over seeds) and their confusion matrix
  (summed over seeds);
* the fold composition: sequences, rows and classes present in every outer fold (``cad27``, a fold by
  itself, holds 2 of the 8 classes, which is why a per-fold MPCA over present classes reads high);
* secondary, labelled as such: the mean ± std over the (fold, seed) scores, as earlier versions headlined;
* the ``pairedge train`` command that trains the same recipe on all the sequences (the recipe's options,
  as the CLI parses them; a test checks they give the same training config and features).

The variants (every one with a track history of ``--history`` = 30 samples, every 5th frame's rows):

* ``boxes``: boxes and tracks only (``pairedge`` spec v3, box-only mode; the annotated orientation is not
  given, so the orientation columns carry only the motion-direction fallback): spec v2 plus the context
  columns (:mod:`pairedge.core.features.context`: distance change over 1 / 2 / 4 s, camera-compensated motion,
  group line geometry; causal, streaming, appended to the pair block; what ``pairedge train --spec-version 3``
  trains and the runtime computes); the viewpoint columns
  (absolute box height and position: they identify the camera, i.e. the sequence) are hidden from the model
  (``TrainConfig.ignore_features``); relation-net widths (128, 256); the training folds are augmented with
  their horizontal mirror and their time reversal (approaching <-> leaving), never the held-out fold nor the
  inner validation sequences (:func:`fit_relation_net`); once the inner split has chosen the epoch count, a
  fresh net is refit for that many epochs on ALL the training sequences and their copies
  (:func:`pairedge.export.refit.refit`: classes sit in few sequences, so the inner-validation sequences are
  data worth having; the held-out fold still chooses nothing; ``boxes_no_refit`` / ``orientation_no_refit``
  measure the recipe without it);
* ``orientation``: the same plus each person's annotated 8-way body orientation (``attr``) as
  :class:`~pairedge.core.types.Detections` orientation (spec v2 orientation features: does A face B, same
  direction, queue geometry, mask) — what a body-orientation estimator could give; mirrored copies and
  time-reversed copies in which every frame annotated *walking* has its orientation turned by 180 degrees
  (``reverse_sequence(turn_walkers=True)``: a reversed walker faces where they go, standing people keep
  theirs);
* ``boxes_plain``, ``orientation_plain``: the previous recipe (spec v2 columns only, no augmentation,
  default widths, no refit), for comparison;
* ``gbm``: a gradient-boosting baseline (scikit-learn ``HistGradientBoostingClassifier``, balanced class
  weights) on the plain box features, same outer folds (no early stopping to nest).
* ``boxes_sim``, ``orientation_sim`` (not run by default): ``boxes`` / ``orientation`` plus simulator scenes
  as extra training sequences (:mod:`pairedge.export.datasets.sim_cad`; ``--sim-presets``, ``--sim-seeds``,
  ``--sim-frames``, ``--sim-groups``), in every training set, never validated on. They scored lower (see
  docs/training.md).

``--members K`` averages K relation nets per outer fold, each with its own inner split (an ensemble; K = 3
gave no gain over 1 here; ``--refit on/off`` overrides the recipes' refit). Variants are compared by the
pooled numbers only. Writes ``benchmarks/results/bench_cad.json`` and ``.md``::

    OMP_NUM_THREADS=1 nice python benchmarks/bench_cad.py          # about 20-30 minutes on 2 busy cores
    python benchmarks/bench_cad.py --folds 4 --seeds 0 --variants boxes
"""

from __future__ import annotations

import argparse
import inspect
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from _train_bench import DEFAULT_DATA, environment, write
from pairedge.core.errors import PairedgeError
from pairedge.core.io.cad import DEFAULT_FPS, read_cad_dir
from pairedge.core.io.featurefile import concat_rows
from pairedge.core.seeds import parse_seeds
from pairedge.export.data import sequence_folds, split_by_sequence
from pairedge.export.datasets.cad import cad_features
from pairedge.export.datasets.cad_context import AUGMENTATIONS
from pairedge.export.datasets.sim_cad import sim_cad_sequence
from pairedge.export.train import TrainConfig, predict_logits
from pairedge.export.train_report import confusion_markdown
from pairedge.measure.metrics.pairwise import classification_metrics
from pairedge.measure.sim import get_preset

#: The ``pairedge`` spec version of the recipes with context: version 2 + the long-horizon / group context.
CONTEXT_SPEC = "3"
#: Per variant: annotated orientation given?, context columns (spec v3,
#: :mod:`pairedge.core.features.context`),
#: augmented copies of the training folds, feature columns the model must not use, relation-net widths,
#: refit on all training sequences for the early-stopped epoch count.
RECIPES: dict[str, dict[str, Any]] = {
    "boxes": {
        "orientation": False,
        "context": True,
        "augment": ("mirror", "reverse"),
        "ignore": ("viewpoint",),
        "hidden": (128, 256),
        "refit": True,
    },
    "orientation": {
        "orientation": True,
        "context": True,
        "augment": ("mirror", "reverse_turned"),
        "ignore": ("viewpoint",),
        "hidden": (128, 256),
        "refit": True,
    },
    "boxes_no_refit": {
        "orientation": False,
        "context": True,
        "augment": ("mirror", "reverse"),
        "ignore": ("viewpoint",),
        "hidden": (128, 256),
        "refit": False,
    },
    "orientation_no_refit": {
        "orientation": True,
        "context": True,
        "augment": ("mirror", "reverse_turned"),
        "ignore": ("viewpoint",),
        "hidden": (128, 256),
        "refit": False,
    },
    "boxes_plain": {
        "orientation": False,
        "context": False,
        "augment": (),
        "ignore": (),
        "hidden": (),
        "refit": False,
    },
    "orientation_plain": {
        "orientation": True,
        "context": False,
        "augment": (),
        "ignore": (),
        "hidden": (),
        "refit": False,
    },
    "gbm": {
        "orientation": False,
        "context": False,
        "augment": (),
        "ignore": (),
        "hidden": (),
        "refit": False,
    },
    "boxes_sim": {
        "orientation": False,
        "context": True,
        "augment": ("mirror", "reverse"),
        "ignore": ("viewpoint",),
        "hidden": (128, 256),
        "refit": True,
        "sim": True,
    },
    "orientation_sim": {
        "orientation": True,
        "context": True,
        "augment": ("mirror", "reverse_turned"),
        "ignore": ("viewpoint",),
        "hidden": (128, 256),
        "refit": True,
        "sim": True,
    },
}
VARIANTS = tuple(RECIPES)
#: Run by default: every recipe but the simulator-augmented ones (a measured negative result).
DEFAULT_VARIANTS = tuple(name for name, recipe in RECIPES.items() if not recipe.get("sim"))
#: The documented recipes (docs/training.md): the variants whose ``pairedge train`` command the report prints.
DOCUMENTED = ("boxes", "orientation")
#: Recipe -> the same recipe with the refit toggled (the measurement that decides whether the refit stays).
REFIT_ABLATIONS = {"boxes": "boxes_no_refit", "orientation": "orientation_no_refit"}
#: The rows ``pairedge train`` builds from a Collective Activity folder: every ``stride``-th frame.
CLI_STRIDE = inspect.signature(cad_features).parameters["stride"].default
#: Pooled metrics kept per seed: the ``pairedge score`` summary names.
POOLED_KEYS = ("accuracy", "mpca_over_all_classes", "mpca", "macro_f1", "macro_f1_present")
#: The class whose recall the headline table shows (queues: the class boxes separate worst).
QUEUE = "standing_in_a_row"
#: Per (fold, seed) metrics of the secondary figure.
FOLD_KEYS = ("accuracy", "mpca", "mpca_over_all_classes", "macro_f1")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder")
    p.add_argument("--stride", type=int, default=CLI_STRIDE, help="keep every N-th frame's rows")
    p.add_argument("--history", type=int, default=30, help="track-history samples of the pairedge spec")
    p.add_argument(
        "--spec-version",
        default="2",
        help="pairedge spec layout of the variants without context (the others use v3)",
    )
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--patience", type=int, default=5)
    p.add_argument("--samples-per-epoch", type=int, default=10000)
    p.add_argument("--members", type=int, default=1, help="relation nets averaged per outer fold (ensemble)")
    p.add_argument(
        "--refit",
        choices=("recipe", "on", "off"),
        default="recipe",
        help="after early stopping, retrain on all training sequences for the chosen epochs "
        "(recipe: as RECIPES says)",
    )
    p.add_argument("--folds", type=int, default=4)
    p.add_argument("--seeds", default="0-2", help="repetitions (fold partition, inner split, model init)")
    p.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))
    p.add_argument("--sim-presets", default="static,moving", help="simulator presets of the *_sim variants")
    p.add_argument("--sim-seeds", default="5000-5011", help="simulator scene seeds (per preset)")
    p.add_argument("--sim-frames", type=int, default=300, help="frames per simulator scene")
    p.add_argument(
        "--sim-groups",
        type=int,
        default=2,
        help="sequence groups the simulator rows are dealt into (their weight in the sequence-balanced "
        "sampler: each group counts as one sequence)",
    )
    p.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    return p.parse_args(argv)


def protocol_metrics(y_true: np.ndarray, y_pred: np.ndarray, labels: tuple[str, ...]) -> dict[str, Any]:
    """Accuracy, both MPCAs, both macro-F1s, per-class table and confusion of predicted class ids, exactly as
    ``pairedge score`` computes them (:func:`pairedge.measure.metrics.pairwise.classification_metrics`; the
    keys are its summary names: ``mpca`` over the classes present in ``y_true``, ``mpca_over_all_classes``
    over all C, ``macro_f1`` over all C, ``macro_f1_present``); ``classes`` = how many classes ``y_true``
    holds."""
    m = classification_metrics(y_true, y_pred, len(labels), labels=labels)
    per_class = {
        name: {
            "precision": float(m.precision[i]),
            "recall": float(m.recall[i]),
            "f1": float(m.f1[i]),
            "support": int(m.support[i]),
        }
        for i, name in enumerate(m.labels)
    }
    return {
        "n": m.n,
        "classes": int((m.support > 0).sum()),
        **{k: float(getattr(m, k)) for k in POOLED_KEYS},
        "per_class": per_class,
        "confusion": m.confusion.tolist(),
    }


def fit_relation_net(
    part: Any,
    augmented: list[Any],
    config: TrainConfig,
    seed: int,
    members: int,
    refit_all: bool = False,
    sim: Any = None,
) -> tuple[Callable[[np.ndarray], np.ndarray], dict[str, Any]]:
    """Train ``members`` relation nets on the training folds ``part``; returns ``predict(X) -> (N, C)
    probabilities`` (the members' mean softmax) and what each member chose.

    Member ``j`` splits the training sequences with its own seed (``seed`` for j = 0, ``1000 * seed + j``
    after) and trains with :func:`pairedge.export.augmented.train_augmented`: early stopping on the ORIGINAL
    rows of its inner validation sequences, training on the other training sequences' rows plus their
    ``augmented`` copies (mirror / time reversal; same group ids); no copy of an inner-validation or
    held-out sequence is trained on while the epoch is chosen. ``refit_all``: then a fresh net for the chosen
    number of epochs on ALL the training sequences (inner validation included) and their copies; the epoch
    still comes from the inner split only. ``sim`` (simulator rows, :mod:`pairedge.export.datasets.sim_cad`)
    is added to every training set, never validated on.
    """
    import torch
    from pairedge.export.augmented import train_augmented

    copies = [a.subset(np.isin(a.groups, np.unique(part.groups))) for a in augmented]
    copies += [] if sim is None else [sim]
    models, chosen = [], {"best_epoch": [], "inner_val_sequences": []}
    for j in range(members):
        s = seed if j == 0 else 1000 * seed + j
        inner = split_by_sequence(part.groups, part.y, config.val_fraction, s)
        result = train_augmented(part, copies, replace(config, seed=s), val_mask=inner, refit=refit_all)
        models.append(result.model)
        chosen["best_epoch"].append(result.best_epoch)
        chosen["inner_val_sequences"].append(sorted(np.unique(part.groups[inner]).tolist()))

    def predict(X: np.ndarray) -> np.ndarray:
        probs = [torch.softmax(torch.from_numpy(predict_logits(m, X)), 1).numpy() for m in models]
        return np.mean(probs, axis=0)

    return predict, chosen


def nested_cv(
    data: Any,
    config: TrainConfig,
    folds: int,
    seeds: list[int],
    fit: Any = None,
    *,
    augmented: list[Any] | None = None,
    members: int = 1,
    refit_all: bool = False,
    sim: Any = None,
) -> dict[str, Any]:
    """Nested sequence-grouped CV of ``data`` (a :class:`FeatureData`).

    ``fit(train_data, seed) -> predict(X) -> labels`` replaces the default (:func:`fit_relation_net`:
    relation nets with early stopping on an inner split of the training sequences only, trained on those
    sequences' rows plus their ``augmented`` copies, ``members`` of them averaged; ``refit_all``: refit on all
    training sequences for the chosen epochs; ``sim``: simulator rows added to every training set).

    Returns:
        ``{"folds": [per (seed, fold) metrics], "pooled": {seed: :func:`protocol_metrics` of the out-of-fold
        predictions}}``: every row of ``data`` is predicted once per seed, by the model of the fold that held
        it out.
    """
    rows, pooled = [], {}
    for seed in seeds:
        fold_of = sequence_folds(data.groups, folds, seed=seed)
        oof = np.full(len(data.y), -1, np.int64)
        for k in range(folds):
            test = fold_of == k
            part = data.subset(~test)
            t0 = time.perf_counter()
            if fit is None:
                predict, extra = fit_relation_net(
                    part, augmented or [], config, seed, members, refit_all, sim
                )
                pred = predict(data.X[test]).argmax(1)
                if members == 1:
                    extra = {key: v[0] for key, v in extra.items()}
            else:
                pred, extra = fit(part, seed)(data.X[test]), {}
            oof[test] = pred
            m = protocol_metrics(data.y[test], pred, data.labels)
            rows.append(
                {
                    "seed": seed,
                    "fold": k,
                    "test_sequences": sorted(np.unique(data.groups[test]).tolist()),
                    "seconds": round(time.perf_counter() - t0, 1),
                    **extra,
                    **{x: m[x] for x in ("n", "classes", *FOLD_KEYS)},
                }
            )
            print(
                f"  seed {seed} fold {k}: {m['classes']} classes, MPCA over them {m['mpca']:.3f}, "
                f"acc {m['accuracy']:.3f}",
                flush=True,
            )
        pooled[str(seed)] = protocol_metrics(data.y, oof, data.labels)
    return {"folds": rows, "pooled": pooled}


def fold_composition(
    groups: np.ndarray, y: np.ndarray, labels: tuple[str, ...], folds: int, seeds: list[int]
) -> list[dict[str, Any]]:
    """Per (seed, outer fold): its sequences, rows, the classes present and the ones absent (the same
    partition :func:`nested_cv` makes)."""
    out = []
    for seed in seeds:
        fold_of = sequence_folds(groups, folds, seed=seed)
        for k in range(folds):
            test = fold_of == k
            counts = np.bincount(y[test], minlength=len(labels))
            out.append(
                {
                    "seed": seed,
                    "fold": k,
                    "sequences": len(np.unique(groups[test])),
                    "rows": int(test.sum()),
                    "classes": int((counts > 0).sum()),
                    "rows_per_class": dict(zip(labels, counts.tolist(), strict=True)),
                    "absent": [c for c, n in zip(labels, counts, strict=True) if n == 0],
                }
            )
    return out


def gbm_fit(part: Any, seed: int) -> Any:
    from sklearn.ensemble import HistGradientBoostingClassifier

    clf = HistGradientBoostingClassifier(max_iter=200, class_weight="balanced", random_state=seed)
    clf.fit(part.X, part.y)
    return clf.predict


def spread(values: list[float]) -> dict[str, Any]:
    """``{"per_seed": values, "mean": ..., "std": ...}`` (population std, as numpy's default)."""
    v = np.asarray(values, np.float64)
    return {"per_seed": [float(x) for x in v], "mean": float(v.mean()), "std": float(v.std())}


def summary(cv: dict[str, Any], labels: tuple[str, ...]) -> dict[str, Any]:
    """The pooled out-of-fold metrics per seed and their mean ± std (the headline), the pooled per-class
    recall / precision (mean over seeds) and confusion (summed over seeds); the mean ± std over the (fold,
    seed) scores as the secondary figure (``fold_mean``)."""
    pooled = list(cv["pooled"].values())
    per_class = {
        key: {c: float(np.mean([p["per_class"][c][key] for p in pooled])) for c in labels}
        for key in ("recall", "precision")
    }
    fold_mean = {}
    for key in FOLD_KEYS:
        v = np.array([r[key] for r in cv["folds"]])
        fold_mean[key] = {"mean": float(v.mean()), "std": float(v.std())}
    return {
        "pooled": {key: spread([p[key] for p in pooled]) for key in POOLED_KEYS},
        **per_class,
        "confusion": np.sum([np.asarray(p["confusion"]) for p in pooled], axis=0).tolist(),
        "fold_mean": fold_mean,
    }


def variant_config(name: str, base: TrainConfig) -> TrainConfig:
    """The training config of variant ``name``: ``base`` with the recipe's widths and hidden columns."""
    recipe = RECIPES[name]
    return replace(base, hidden=tuple(recipe["hidden"]), ignore_features=tuple(recipe["ignore"]))


def variant_spec_version(name: str, args: argparse.Namespace) -> str:
    """The ``pairedge`` spec version the variant's features are built with."""
    return CONTEXT_SPEC if RECIPES[name]["context"] else args.spec_version


def variant_refit(name: str, args: argparse.Namespace) -> bool:
    """Whether the variant refits on all training sequences (``--refit`` overrides the recipe)."""
    return bool(RECIPES[name]["refit"]) if args.refit == "recipe" else args.refit == "on"


def train_argv(name: str, args: argparse.Namespace, base: TrainConfig) -> list[str] | None:
    """The ``pairedge train`` arguments that train variant ``name`` on every sequence of ``--data``, or None
    when the CLI cannot express it (gradient boosting, simulator rows, an ensemble, another stride).

    The command holds every option that differs from the CLI's defaults; early stopping then uses a 20 %
    sequence split of all the sequences (one model, no outer fold)."""
    recipe = RECIPES[name]
    if name == "gbm" or recipe.get("sim") or args.members != 1 or args.stride != CLI_STRIDE:
        return None
    config = variant_config(name, base)
    argv = [
        "--data",
        str(args.data / "cad_choi" / "annotations"),
        "--spec",
        "pairedge",
        "--spec-version",
        variant_spec_version(name, args),
        "--stage",
        "2",
        "--history",
        str(args.history),
    ]
    argv += [] if recipe["orientation"] else ["--no-orientation"]
    argv += ["--augment", ",".join(recipe["augment"])] if recipe["augment"] else []
    argv += ["--refit"] if variant_refit(name, args) else []
    argv += ["--hidden", ",".join(map(str, config.hidden))] if config.hidden else []
    argv += ["--ignore-features", ",".join(config.ignore_features)] if config.ignore_features else []
    argv += ["--epochs", str(config.epochs), "--patience", str(config.patience)]
    argv += ["--samples-per-epoch", str(config.samples_per_epoch)] if config.samples_per_epoch else []
    return [*argv, "--out", f"runs/cad_{name}"]


def train_command(argv: list[str]) -> str:
    """``pairedge train`` + ``argv`` as one shell line (the data path relative to the repository when it can
    be)."""
    from _train_bench import ROOT

    def shown(a: str) -> str:
        path = Path(a)
        if path.is_absolute() and path.is_relative_to(ROOT.parent):
            return "../" + str(path.relative_to(ROOT.parent))
        return a

    return "pairedge train " + " ".join(shown(a) for a in argv)


def pooled_cell(s: dict[str, Any], key: str) -> str:
    """``"mean ± std"`` of a pooled metric over the seeds."""
    return f"{s['pooled'][key]['mean']:.3f} ± {s['pooled'][key]['std']:.3f}"


def headline_lines(r: dict[str, Any]) -> list[str]:
    """The headline table: pooled out-of-fold metrics by the protocol's definition, mean ± std over seeds."""
    differ = any(
        abs(v["summary"]["pooled"]["mpca"]["mean"] - v["summary"]["pooled"]["mpca_over_all_classes"]["mean"])
        > 5e-4
        for v in r["variants"].values()
    )
    extra = " MPCA over present classes |" if differ else ""
    queue = QUEUE in r["labels"]
    lines = [
        "## Headline: pooled out-of-fold predictions, scored as `pairedge score` scores them",
        "",
        "Each seed's out-of-fold predictions (every row predicted once, by the model whose outer fold held "
        "it out) are scored together by `pairedge.measure.metrics.pairwise.classification_metrics` (the code "
        f"`pairedge score` runs): accuracy; **MPCA over all {len(r['labels'])} classes** (the seed "
        f"documents' definition, `mpca_over_all_classes`); macro-F1 over all {len(r['labels'])} classes (an "
        "absent class counts 0). Mean ± std over the seeds, then each seed's MPCA. "
        + (
            "Where a variant's present-classes MPCA differs, it is in its own column."
            if differ
            else "Every class occurs in the pooled predictions, so the present-classes MPCA "
            "(`pairedge score`'s `mpca`) equals the all-classes one for every variant."
        ),
        "",
        f"| variant | accuracy | MPCA (all {len(r['labels'])} classes) |{extra} macro-F1 | MPCA per seed |"
        + (f" {QUEUE} recall |" if queue else ""),
        "|---|---|---|---|---|" + ("---|" if differ else "") + ("---|" if queue else ""),
    ]
    for name, v in r["variants"].items():
        s = v["summary"]
        per_seed = " / ".join(f"{x:.3f}" for x in s["pooled"]["mpca_over_all_classes"]["per_seed"])
        cells = [
            f"`{name}`: {v['title']}",
            pooled_cell(s, "accuracy"),
            f"**{pooled_cell(s, 'mpca_over_all_classes')}**",
        ]
        cells += [pooled_cell(s, "mpca")] if differ else []
        cells += [pooled_cell(s, "macro_f1"), per_seed] + ([f"{s['recall'][QUEUE]:.3f}"] if queue else [])
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def refit_lines(r: dict[str, Any]) -> list[str]:
    """With and without the refit, by the pooled measure (the variants of :data:`REFIT_ABLATIONS` that
    ran)."""
    pairs = [(a, b) for a, b in REFIT_ABLATIONS.items() if a in r["variants"] and b in r["variants"]]
    if not pairs:
        return []
    lines = [
        "",
        "## The refit, with and without (pooled out-of-fold, mean over seeds)",
        "",
        "| recipe | refit | MPCA | accuracy | macro-F1 | MPCA per seed |",
        "|---|---|---|---|---|---|",
    ]
    for a, b in pairs:
        for name in (a, b):
            v = r["variants"][name]
            s = v["summary"]
            per_seed = " / ".join(f"{x:.3f}" for x in s["pooled"]["mpca_over_all_classes"]["per_seed"])
            lines.append(
                f"| `{a}` | {'yes' if v['refit'] else 'no'} (`{name}`) | "
                f"{pooled_cell(s, 'mpca_over_all_classes')} | "
                f"{pooled_cell(s, 'accuracy')} | {pooled_cell(s, 'macro_f1')} | {per_seed} |"
            )
    gains = []
    for a, b in pairs:
        with_, without = (r["variants"][n]["summary"]["pooled"] for n in (a, b))
        if r["variants"][a]["refit"] == r["variants"][b]["refit"]:
            continue
        if not r["variants"][a]["refit"]:
            with_, without = without, with_
        d = {
            k: with_[k]["mean"] - without[k]["mean"]
            for k in ("mpca_over_all_classes", "macro_f1", "accuracy")
        }
        gains.append(
            f"`{a}` MPCA {d['mpca_over_all_classes']:+.3f}, macro-F1 {d['macro_f1']:+.3f}, "
            f"accuracy {d['accuracy']:+.3f}"
        )
    if gains:
        lines += ["", "With the refit minus without (mean over seeds): " + "; ".join(gains) + "."]
    return lines


def per_class_lines(r: dict[str, Any], key: str) -> list[str]:
    """One table of the pooled per-class ``key`` ("recall" or "precision", mean over seeds), a column per
    variant."""
    lines = [
        "",
        f"## Per-class {key} (pooled out-of-fold predictions, mean over seeds)",
        "",
        "| class | " + " | ".join(r["variants"]) + " |",
        "|---|" + "---|" * len(r["variants"]),
    ]
    for c in r["labels"]:
        lines.append(
            f"| {c} | " + " | ".join(f"{v['summary'][key][c]:.3f}" for v in r["variants"].values()) + " |"
        )
    return lines


def same_partition(r: dict[str, Any]) -> bool:
    """Whether every seed held out the same sequences in the same folds (read from the first variant's
    folds)."""
    folds = next(iter(r["variants"].values()))["cv"]["folds"]
    by_seed: dict[int, list[list[str]]] = {}
    for f in folds:
        by_seed.setdefault(f["seed"], []).append(f["test_sequences"])
    return len({repr(v) for v in by_seed.values()}) == 1


def composition_lines(r: dict[str, Any]) -> list[str]:
    """How many sequences, rows and classes each outer fold holds (once when every seed has the same
    partition)."""
    same = same_partition(r)
    seeds = ", ".join(str(s) for s in r["seeds"])
    shown = [f for f in r["fold_composition"] if not same or f["seed"] == r["seeds"][0]]
    note = (
        f"Every seed ({seeds}) has the same partition: `sequence_folds` deals the sequences largest first "
        "and its seeded shuffle only orders sequences with equal row counts, so the seeds change the inner "
        "split and the initialisation only."
        if same and len(r["seeds"]) > 1
        else ""
    )
    lines = [
        "",
        "## Fold composition",
        "",
        f"The outer folds partition the sequences (the same partition for every variant); a fold holds only "
        f"some of the {len(r['labels'])} classes, so a per-fold MPCA averages over those it holds. {note}",
        "",
        "| seeds | fold | sequences | rows | classes present | absent |",
        "|---|---|---|---|---|---|",
    ]
    for f in shown:
        lines.append(
            f"| {seeds if same else f['seed']} | {f['fold']} | {f['sequences']} | {f['rows']} | "
            f"{f['classes']} | {', '.join(f['absent']) or '-'} |"
        )
    return lines


def secondary_lines(r: dict[str, Any]) -> list[str]:
    """The mean ± std over the (fold, seed) scores: secondary, as labelled."""
    held = [f["classes"] for f in r["fold_composition"]]
    lines = [
        "",
        "## Secondary: mean ± std over the (fold, seed) scores (not the protocol's figure)",
        "",
        "Each outer fold scored alone and the scores averaged. `mpca` averages over the classes present in "
        f"the fold ({min(held)}-{max(held)} of them, see the composition), which reads high on folds with "
        "few classes; this was the headline of earlier versions of this report.",
        "",
        "| variant | MPCA over the fold's classes | MPCA over all classes | accuracy | macro-F1 |",
        "|---|---|---|---|---|",
    ]
    for name, v in r["variants"].items():
        f = v["summary"]["fold_mean"]
        cells = [
            f"{f[k]['mean']:.3f} ± {f[k]['std']:.3f}"
            for k in ("mpca", "mpca_over_all_classes", "accuracy", "macro_f1")
        ]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return lines


def command_lines(r: dict[str, Any]) -> list[str]:
    """The ``pairedge train`` commands of the documented recipes."""
    shown = {n: c for n, c in r["train_commands"].items() if n in DOCUMENTED and c}
    if not shown:
        return []
    lines = [
        "",
        "## The same recipe from the command line",
        "",
        "One model on all the sequences (early stopping on a 20 % sequence split, then the refit where the "
        "recipe has it); a test checks that `pairedge train` parses these options into this benchmark's "
        "training config and features:",
        "",
        "```bash",
    ]
    for name, command in shown.items():
        lines += [f"# {name}", command]
    return [*lines, "```"]


def markdown(r: dict[str, Any]) -> str:
    lines = [
        "# Collective Activity, 8 interaction classes: nested sequence-grouped cross-validation",
        "",
        f"`{r['command']}` — {r['rows']} pair-frames (every {r['stride']}th frame) of {len(r['sequences'])} "
        f"sequences; `pairedge` spec v{CONTEXT_SPEC} (recipes with context) / v{r['spec_version']} (the "
        f"others), box-only mode, track history {r['history']} samples; {r['folds']} outer folds (sequences "
        f"partitioned) x seeds {r['seeds']}; early stopping on an inner split of the training folds' "
        f"sequences only (original rows); model `relation_net`, {r['train_config']['epochs']} epochs max, "
        f"patience {r['train_config']['patience']}, {r.get('members', 1)} net(s) per outer fold. The usual "
        "CAD test sequences are not in the data folder.",
        "",
        "Recipes: `boxes` / `orientation` use spec v3, whose context columns "
        "(`pairedge.core.features.context`: distance change over 1 / 2 / 4 s, camera-compensated motion, "
        "group line geometry; causal, computed by the streaming extractor) follow the v2 pair block, hide "
        "the viewpoint columns (absolute box height / position) from the model, use relation-net widths "
        "(128, 256), add mirrored and time-reversed copies of the TRAINING sequences (`orientation`: "
        "walkers in the reversed copy turned 180 degrees), and refit a fresh net on all training sequences "
        "for the epoch count the inner split chose (`*_no_refit`: the same without the refit); `*_plain` "
        "are the previous recipe (spec v2 columns only, no augmentation, default widths, no refit). The "
        "recipes were compared by nested-CV numbers of seeds 0-2 among about 30 tried; the chosen recipe's "
        "number is therefore slightly optimistic (see docs/training.md).",
        "",
        *headline_lines(r),
        *refit_lines(r),
        *per_class_lines(r, "recall"),
        *per_class_lines(r, "precision"),
    ]
    lines += composition_lines(r) + secondary_lines(r) + command_lines(r)
    for name, v in r["variants"].items():
        lines += [
            "",
            f"Confusion of `{name}` (rows = truth, columns = prediction; out-of-fold, summed over seeds):",
            "",
            confusion_markdown(v["summary"]["confusion"], r["labels"]),
        ]
    lines += [
        "",
        "Per fold:",
        "",
        "| variant | seed | fold | classes | MPCA over them | MPCA over all | accuracy | best epoch | "
        "held-out sequences |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, v in r["variants"].items():
        for f in v["cv"]["folds"]:
            lines.append(
                f"| {name} | {f['seed']} | {f['fold']} | {f['classes']} | {f['mpca']:.3f} | "
                f"{f['mpca_over_all_classes']:.3f} | {f['accuracy']:.3f} | {f.get('best_epoch', '-')} | "
                f"{', '.join(f['test_sequences'])} |"
            )
    lines += ["", f"Environment: {r['environment']}"]
    return "\n".join(lines)


TITLES = {
    "boxes": "boxes and tracks (relation net; context columns, mirror + time-reversal augmentation, refit)",
    "orientation": (
        "boxes and tracks + annotated body orientation (relation net; context columns, mirror + time "
        "reversal with walkers turned, refit)"
    ),
    "boxes_no_refit": "`boxes` without the refit",
    "orientation_no_refit": "`orientation` without the refit",
    "boxes_plain": "boxes and tracks, previous recipe (spec v2 only, no augmentation)",
    "orientation_plain": "boxes + annotated orientation, previous recipe (spec v2 only, no augmentation)",
    "gbm": "gradient boosting on the plain box features",
    "boxes_sim": "`boxes` + simulator scenes as extra training sequences "
    "(`pairedge.export.datasets.sim_cad`)",
    "orientation_sim": "`orientation` + simulator scenes (with their body orientation) as extra training "
    "sequences",
}


def check_inputs(args: argparse.Namespace) -> tuple[list[int], list[str], TrainConfig]:
    """The seeds, the variants and the training config; raises PairedgeError / ValueError for anything
    unusable (the simulator options only when a ``*_sim`` variant is asked for)."""
    folder = args.data / "cad_choi" / "annotations"
    if not folder.is_dir():
        raise ValueError(f"Collective Activity annotations not found at {folder}; pass --data")
    seeds = list(parse_seeds(args.seeds))
    wanted = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(wanted) - set(RECIPES))
    if unknown or not wanted:
        raise ValueError(
            f"--variants: unknown {unknown or args.variants!r}; expected some of {list(RECIPES)}"
        )
    if not 2 <= args.folds or args.stride < 1 or args.history < 2:
        raise ValueError(
            f"expected --folds >= 2, --stride >= 1 and --history >= 2, got {args.folds}, {args.stride} and "
            f"{args.history}"
        )
    if any(RECIPES[w].get("sim") for w in wanted):
        for preset in args.sim_presets.split(","):
            if get_preset(preset.strip()).camera.kind == "panorama":
                raise ValueError(
                    f"--sim-presets: {preset.strip()!r} is a panorama; CAD sequences need a flat image"
                )
        parse_seeds(args.sim_seeds)
        if args.sim_groups < 1 or args.sim_frames < 2:
            raise ValueError(
                f"expected --sim-groups >= 1 and --sim-frames >= 2, got {args.sim_groups}, {args.sim_frames}"
            )
    return seeds, wanted, base_config(args)


def base_config(args: argparse.Namespace) -> TrainConfig:
    """The training config every variant starts from (:func:`variant_config` adds the recipe's)."""
    return TrainConfig(epochs=args.epochs, patience=args.patience, samples_per_epoch=args.samples_per_epoch)


def main(argv: list[str] | None = None) -> None:
    import sys

    args = parse_args(argv)
    try:  # every input refused in one line, before any work
        seeds, wanted, base = check_inputs(args)
    except (PairedgeError, ValueError) as exc:
        raise SystemExit(f"error: {exc}") from None
    sequences = read_cad_dir(args.data / "cad_choi" / "annotations")
    if args.folds > len(sequences):
        raise SystemExit(f"error: --folds {args.folds}: only {len(sequences)} sequences to partition")
    cache: dict[tuple[bool, str, str], Any] = {}
    features = {"history": args.history}

    def rows(orientation: bool, spec_version: str, augment: str = "") -> Any:
        key = (orientation, spec_version, augment)
        if key not in cache:
            seqs = [AUGMENTATIONS[augment](q) for q in sequences] if augment else sequences
            cache[key] = cad_features(
                seqs,
                stride=args.stride,
                feature_config=features,
                orientation=orientation,
                spec_version=spec_version,
            )
        return cache[key]

    sim_sequences: list[Any] = []

    def sim_rows(orientation: bool) -> Any:
        """Simulator scenes as CAD rows (every scene at about the CAD rows' rate per second), dealt into
        ``--sim-groups`` sequence groups ``sim0``, ``sim1``, ..."""
        key = (orientation, "sim", "")
        if key not in cache:
            if not sim_sequences:
                scenes = [
                    (p_.strip(), s_)
                    for p_ in args.sim_presets.split(",")
                    for s_ in parse_seeds(args.sim_seeds)
                ]
                sim_sequences.extend(
                    sim_cad_sequence(p_, s_, args.sim_frames, 100 + i) for i, (p_, s_) in enumerate(scenes)
                )
            parts = []
            for i, q in enumerate(sim_sequences):
                stride = max(1, round(args.stride * q.fps / DEFAULT_FPS))
                d = cad_features(
                    [q],
                    stride=stride,
                    feature_config=features,
                    orientation=orientation,
                    spec_version=CONTEXT_SPEC,
                )
                parts.append(replace(d, groups=np.full(len(d.y), f"sim{i % args.sim_groups}")))
            cache[key] = concat_rows(parts)
        return cache[key]

    report: dict[str, Any] = {
        "command": "python benchmarks/bench_cad.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "stride": args.stride,
        "history": args.history,
        "spec_version": args.spec_version,
        "folds": args.folds,
        "seeds": seeds,
        "members": args.members,
        "refit": args.refit,
        "train_config": base.to_dict(),
        "recipes": {n: RECIPES[n] for n in wanted},
        "train_commands": {},
        "variants": {},
    }
    for name in wanted:
        recipe = RECIPES[name]
        version = variant_spec_version(name, args)
        data = rows(recipe["orientation"], version)
        augmented = [rows(recipe["orientation"], version, a) for a in recipe["augment"]]
        config = variant_config(name, base)
        refit = variant_refit(name, args)
        print(name, flush=True)
        t0 = time.perf_counter()
        sim = sim_rows(recipe["orientation"]) if recipe.get("sim") else None
        cv = nested_cv(
            data,
            config,
            args.folds,
            seeds,
            gbm_fit if name == "gbm" else None,
            augmented=augmented,
            members=args.members,
            refit_all=refit,
            sim=sim,
        )
        report["variants"][name] = {
            "title": TITLES[name],
            "cv": cv,
            "summary": summary(cv, data.labels),
            "train_config": config.to_dict(),
            "refit": refit,
            "seconds": round(time.perf_counter() - t0),
        }
        cli = train_argv(name, args, base)
        report["train_commands"][name] = None if cli is None else train_command(cli)
        s = report["variants"][name]["summary"]["pooled"]
        print(
            f"{name}: pooled MPCA {s['mpca_over_all_classes']['mean']:.3f} ± "
            f"{s['mpca_over_all_classes']['std']:.3f}, accuracy {s['accuracy']['mean']:.3f}, macro-F1 "
            f"{s['macro_f1']['mean']:.3f}",
            flush=True,
        )
    plain = rows(False, args.spec_version)
    report.update(
        {
            "rows": len(plain.y),
            "sequences": sorted(np.unique(plain.groups).tolist()),
            "labels": list(plain.labels),
            "environment": environment(),
            "fold_composition": fold_composition(plain.groups, plain.y, plain.labels, args.folds, seeds),
        }
    )
    paths = write("bench_cad", report, markdown(report), args.out or Path(__file__).parent / "results")
    print("wrote", *paths)


if __name__ == "__main__":
    main()
