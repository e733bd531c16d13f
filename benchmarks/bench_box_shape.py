"""The bundled model under a sliding-window detector: box shape as posture evidence, used or ignored.

A detector such as ACF, HOG or DPM draws every box at one width-to-height ratio; a seated person's box is then
no wider than a walker's, and the fixed ratio (PETS 2009's ACF boxes: 0.44, wider than a tight box around a
walker) still moves the model's stage 2. The runtime's ``PipelineConfig.box_shape="auto"``
(:mod:`pairedge.runtime.boxshape`) recognises such a detector from the stream's boxes and sets the box-shape
columns to the model's training mean. This benchmark measures both on held-out simulator scenes (seeds no
model choice saw) rendered with the simulated detector as it is and redrawn at fixed ratios
(``NoiseConfig.fixed_aspect``):

* stage 2 on the true together pairs (the paper's 3 classes, top class of the shipped ONNX model through
  ONNX Runtime, as ``bench_default_gate.py`` scores it): accuracy, MPCA, recall of ``sitting_together``, and
  the share of walking / standing pairs called ``sitting_together`` (false sitting);
* ``used``: the columns as computed; ``auto``: what the runtime does (the columns at the training mean from
  the frame the monitor judges the detector fixed-ratio); the share of rows where ``auto`` ignored them (it
  must be 0 for the detector as simulated, whose boxes fit the person).

Nothing is chosen here: the monitor's rule (5th-95th percentile spread of the ratios <= 0.5 % of their median,
over at least 50 boxes) is set by what a fixed-ratio detector is, and the replacement value is the model's own
training mean. PETS is not used.

    OMP_NUM_THREADS=1 python benchmarks/bench_box_shape.py          # about 15 minutes on 2 cores

Writes ``benchmarks/results/bench_box_shape.json`` / ``.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _train_bench import RESULTS, environment, write
from pairedge.core.bundled import default_model_dir
from pairedge.core.errors import PairedgeError
from pairedge.core.features import spec_layout
from pairedge.core.labels import PAPER3
from pairedge.core.seeds import parse_seeds
from pairedge.export.datasets.sim import match_labels
from pairedge.export.evaluation import classification_metrics
from pairedge.measure.sim import simulate
from pairedge.measure.sim.config import get_preset
from pairedge.runtime.backends import get_backend
from pairedge.runtime.boxshape import AspectMonitor, neutral_columns
from pairedge.runtime.flow import FlowStream, get_flow_backend
from pairedge.runtime.loading import find_models

#: Held-out scenes: preset -> seeds (the recipe's test seeds; never used for any choice).
HELD_OUT = {"static": "1000-1003", "moving": "1000-1003", "noisy": "1000-1003", "surveillance": "1000-1003"}
#: Detector variants: 0 = the simulated detector as it is; else every box redrawn at this width / height.
ASPECTS = (0.0, 0.41, 0.44, 0.5)
SITTING = PAPER3.classes.index("sitting_together")


def scene_rows(models: Any, preset: str, seed: int, aspect: float, frames: int, stride: int):
    """``(stage-2 rows (M, F) float32, PAPER3 labels (M,), ignored (M,) bool)`` of one scene's together pairs.

    ``ignored`` is the monitor's verdict at the row's frame (what ``box_shape="auto"`` would do there).
    """
    cfg = get_preset(preset, seed)
    if aspect > 0:
        cfg = dataclasses.replace(cfg, noise=dataclasses.replace(cfg.noise, fixed_aspect=aspect))
    spec = spec_layout(models.spec.name, models.spec.version)
    extractor = spec.make_extractor(dict(models.feature_config() or {}))
    stream = FlowStream(get_flow_backend(spec.flow_backend, scale=spec.default_flow_scale))
    monitor = AspectMonitor()
    xs, ys, ign = [], [], []
    for frame in simulate(cfg, seed=seed, frames=frames):
        flow = stream.push(frame.image)
        size = (int(frame.image.shape[1]), int(frame.image.shape[0]))
        monitor.update(frame.detections.boxes, size)
        feats = extractor.step(frame.detections, frame.timestamp, size, flow, stream.scale)
        if frame.index % stride or not len(feats):
            continue
        labels = match_labels(feats.pairs, frame.pairs, frame.pair_labels)
        keep = (labels >= 0) & (labels < len(PAPER3.classes))
        xs.append(feats.stage2[keep])
        ys.append(labels[keep])
        ign.append(np.full(int(keep.sum()), monitor.fixed))
    if not xs:
        return np.zeros((0, spec.stage2_dim), np.float32), np.zeros(0, np.int64), np.zeros(0, bool)
    return np.concatenate(xs), np.concatenate(ys), np.concatenate(ign)


def score(y: np.ndarray, pred: np.ndarray) -> dict[str, Any]:
    m = classification_metrics(y, pred, PAPER3.classes)
    not_sitting = y != SITTING
    return {
        "n": m["n"],
        "accuracy": m["accuracy"],
        "mpca": m["mpca"],
        "sitting_recall": m["per_class"]["sitting_together"]["recall"],
        "sitting_support": m["per_class"]["sitting_together"]["support"],
        "false_sitting": float((pred[not_sitting] == SITTING).mean()) if not_sitting.any() else 0.0,
    }


def run(model: Path, presets: dict[str, str], aspects: tuple[float, ...], frames: int, stride: int):
    models = find_models(model)
    cols, means = neutral_columns(
        models.spec.stage2_names, models.spec.box_shape_names, models.stage2.metadata.norm_mean
    )
    if not len(cols):
        raise PairedgeError(f"{model}: its feature spec has no box-shape columns with training means")
    s2 = get_backend("onnxruntime", models.stage2).activate()
    out: dict[str, Any] = {}
    try:
        for aspect in aspects:
            key = "as simulated" if aspect == 0 else f"fixed {aspect:.2f}"
            out[key] = {}
            for preset, seeds in presets.items():
                parts = [scene_rows(models, preset, s, aspect, frames, stride) for s in parse_seeds(seeds)]
                X = np.concatenate([p[0] for p in parts])
                y = np.concatenate([p[1] for p in parts])
                ignored = np.concatenate([p[2] for p in parts])
                used = s2.infer(X).argmax(1)
                X_auto = X.copy()
                X_auto[np.ix_(ignored, cols)] = means
                auto = s2.infer(X_auto).argmax(1)
                out[key][preset] = {
                    "seeds": seeds,
                    "used": score(y, used),
                    "auto": score(y, auto),
                    "ignored_share": float(ignored.mean()) if len(ignored) else 0.0,
                }
                r = out[key][preset]
                print(
                    f"{key} {preset}: MPCA used {r['used']['mpca']:.3f} auto {r['auto']['mpca']:.3f}, "
                    f"false sitting {r['used']['false_sitting']:.3f} -> {r['auto']['false_sitting']:.3f}, "
                    f"ignored {r['ignored_share']:.2f}",
                    flush=True,
                )
    finally:
        s2.deactivate()
    return {
        "box_shape_columns": [models.spec.stage2_names[i] for i in cols.tolist()],
        "training_means": [float(v) for v in means],
        "variants": out,
    }


def markdown(r: dict[str, Any]) -> str:
    lines = [
        "# Box shape under a sliding-window detector (held-out simulator scenes)",
        "",
        f"`python benchmarks/bench_box_shape.py` — model `{r['model']}`, {r['frames']} frames per scene, "
        f"one frame in {r['stride']} scored. Stage 2 on the true together pairs (paper's 3 classes). "
        f"Box-shape columns {', '.join(f'`{c}`' for c in r['box_shape_columns'])}; training means "
        f"{', '.join(f'{v:.3f}' for v in r['training_means'])}. `used`: as computed; `auto`: the runtime's "
        "default (columns at the training mean once the detector is judged fixed-ratio). Nothing is chosen "
        "here.",
        "",
        "| detector | preset (seeds) | rows | ignored by auto | accuracy used / auto | MPCA used / auto "
        "| sitting recall used / auto | false sitting used / auto |",
        "|---|---|---:|---:|---|---|---|---|",
    ]
    for variant, presets in r["variants"].items():
        for preset, v in presets.items():
            u, a = v["used"], v["auto"]
            lines.append(
                f"| {variant} | {preset} ({v['seeds']}) | {u['n']} | {v['ignored_share']:.0%} "
                f"| {u['accuracy']:.3f} / {a['accuracy']:.3f} | {u['mpca']:.3f} / {a['mpca']:.3f} "
                f"| {u['sitting_recall']:.3f} / {a['sitting_recall']:.3f} ({u['sitting_support']}) "
                f"| {u['false_sitting']:.3f} / {a['false_sitting']:.3f} |"
            )
    lines += ["", f"Run time {r['seconds']:.0f} s. Environment: {r['environment']}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, default=default_model_dir())
    ap.add_argument(
        "--aspects",
        default=",".join(f"{a:g}" for a in ASPECTS),
        help="detector variants: 0 = as simulated, else the fixed width/height ratio",
    )
    ap.add_argument("--presets", default=",".join(HELD_OUT), help=f"any of {', '.join(HELD_OUT)}")
    ap.add_argument("--seeds", default=None, help="seeds for every preset (default: held-out 1000-1003)")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--stride", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    try:
        aspects = tuple(float(a) for a in args.aspects.split(",") if a.strip())
        if not aspects or not all(a == 0 or 0.1 <= a <= 2.0 for a in aspects):
            raise ValueError("each aspect must be 0 or a ratio in [0.1, 2]")
        names = [p.strip() for p in args.presets.split(",") if p.strip()]
        unknown = [p for p in names if p not in HELD_OUT]
        if not names or unknown:
            raise ValueError(f"--presets: expected some of {', '.join(HELD_OUT)}, got {args.presets!r}")
        if args.seeds is not None and not args.seeds.strip():
            raise ValueError("--seeds: expected seeds such as 1000-1003, got an empty value")
        presets = {p: args.seeds or HELD_OUT[p] for p in names}
        for seeds in presets.values():
            parse_seeds(seeds)
        if args.frames < 2 or args.stride < 1:
            raise ValueError("expected --frames >= 2 and --stride >= 1")
    except (ValueError, PairedgeError) as exc:
        print(f"error: bad argument: {exc}", file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    try:
        res = run(args.model, presets, aspects, args.frames, args.stride)
    except PairedgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    res.update(
        model=str(args.model),
        frames=args.frames,
        stride=args.stride,
        seconds=time.perf_counter() - t0,
        environment=environment(),
    )
    text = markdown(res)
    write("bench_box_shape", res, text, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
