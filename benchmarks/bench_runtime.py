"""Latency of the streaming runtime: per-stage p50/p90/p99 and FPS, overhead over the flow, scaling, memory.

1. Per-stage latency (validate, track, flow, features, stage 1, stage 2, smoothing, groups, total) and FPS
   at 640 x 480 for 2, 10, 30 and 100 people, single thread (OpenCV and ONNX Runtime limited to 1 thread).
   The scene has exactly N people: textured boxes moving at constant speed over a textured background, so
   the flow backend works on real image content (use ``--sim`` for simulator frames instead, whose visible
   people fall short of N in crowds).
2. Overhead: in the same loop, the flow alone (a second backend instance with the same settings fed the
   same frames through the same ``FlowStream``), and the ratio ``median(step) / median(flow)`` at 10 people.
3. Scaling: ``median(step at 100 people) / median(step at 10 people)``.
4. Optional long run (``--long-frames N``): a small stream (5 people at 160 x 120, ids renewed every 50
   frames so tracks keep appearing and disappearing): the growth of the resident memory (sampled every 500
   frames) over its value after warm-up.

Classifiers: ``--model DIR`` (``stage1.onnx`` + ``stage2.onnx``); without it, *toy* MLPs with random weights
of the spec's widths are generated (stage 1: F1-32-16-2, stage 2: F2-128-64-3). Their gate lets a random
~half of the pairs through to stage 2 — far more than a trained stage 1 — so stage 2 and group costs are
upper bounds there.

Writes ``benchmarks/results/bench_runtime.json`` and ``.md``. Run from the repository root::

    python benchmarks/bench_runtime.py                          # ~1 minute on 2 cores
    python benchmarks/bench_runtime.py --spec liang2026 --frames 40
    python benchmarks/bench_runtime.py --long-frames 100000     # memory check, ~3 minutes
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper
from pairedge.features import get_spec
from pairedge.modelmeta import ModelMetadata
from pairedge.runtime import FlowConfig, Pipeline, PipelineConfig
from pairedge.runtime.backends.ort import OrtOptions
from pairedge.runtime.flow import FlowStream, get_flow_backend
from pairedge.types import Detections

HERE = Path(__file__).resolve().parent
W, H = 640, 480
STAGES = ("validate", "track", "flow", "features", "stage1", "stage2", "smooth", "groups", "total")


# -- inputs -------------------------------------------------------------------------------------------------
def toy_mlp(path: Path, spec_name: str, stage: int, seed: int) -> None:
    """An MLP classifier with random weights and valid pairedge metadata."""
    spec = get_spec(spec_name)
    f = spec.stage1_dim if stage == 1 else spec.stage2_dim
    labels = (
        ("not_interacting", "interacting")
        if stage == 1
        else ("walking_together", "standing_together", "sitting_together")
    )
    widths = [f, 32, 16, 2] if stage == 1 else [f, 128, 64, 3]
    rng = np.random.default_rng(seed)
    nodes, inits, prev = [], [], "features"
    for i, (a, b) in enumerate(zip(widths, widths[1:], strict=False)):
        inits += [
            numpy_helper.from_array((rng.normal(size=(a, b)) / np.sqrt(a)).astype(np.float32), f"w{i}"),
            numpy_helper.from_array(rng.normal(0, 0.1, b).astype(np.float32), f"b{i}"),
        ]
        out = "logits" if i == len(widths) - 2 else f"h{i}"
        nodes.append(helper.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [out]))
        if out != "logits":
            nodes.append(helper.make_node("Relu", [out], [f"r{i}"]))
            prev = f"r{i}"
    graph = helper.make_graph(
        nodes,
        "toy",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["pairs", f])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["pairs", len(labels)])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    meta = ModelMetadata(
        stage=stage, feature_spec=spec.name, feature_spec_version=spec.version, labels=labels, num_features=f,
        norm_mean=(0.0,) * f, norm_std=(1.0,) * f, thresholds={"p_interact": 0.5, "tau_group": 0.5},
        architecture="toy_mlp",
    )  # fmt: skip
    helper.set_model_props(model, meta.to_props())
    onnx.save_model(model, str(path))


def boxes_scene(people: int, frames: int, size: tuple[int, int] = (W, H), seed: int = 0) -> Iterator[tuple]:
    """``(image, detections, timestamp)`` of ``people`` textured boxes moving over a textured background."""
    w, h = size
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 255, (h // 8, w // 8, 3), dtype=np.uint8)
    background = cv2.GaussianBlur(cv2.resize(noise, (w, h), interpolation=cv2.INTER_CUBIC), (5, 5), 1.5)
    bh = rng.uniform(0.15, 0.35, people) * h
    bw = 0.4 * bh
    start = np.column_stack([rng.uniform(0, w - bw), rng.uniform(0, h - bh)])
    velocity = rng.normal(0, 30, (people, 2))
    patches = [
        cv2.resize(rng.integers(0, 255, (8, 4, 3), dtype=np.uint8), (int(a), int(b)))
        for a, b in zip(bw, bh, strict=True)
    ]
    image = np.empty_like(background)
    for k in range(frames):
        t = k / 15.0
        xy = np.abs(start + velocity * t) % np.maximum(
            [w, h] - np.column_stack([bw, bh]), 1
        )  # bounce-free wrap
        np.copyto(image, background)
        for (x, y), patch in zip(xy.astype(int), patches, strict=True):
            ph, pw = patch.shape[:2]
            image[y : y + ph, x : x + pw] = patch[: h - y, : w - x]
        boxes = np.column_stack([xy, bw, bh]).astype(np.float32)
        yield image.copy(), Detections.from_arrays(boxes, np.arange(1, people + 1)), t


def sim_scene(people: int, frames: int, seed: int = 0) -> Iterator[tuple]:
    from pairedge.sim import get_preset, simulate
    from pairedge.sim.config import with_people

    for f in simulate(with_people(get_preset("static"), people), seed=seed, frames=frames):
        yield f.image, f.truth, f.timestamp


# -- measurements ---------------------------------------------------------------------------------------------
def percentiles(values: list[float]) -> dict[str, float]:
    a = np.asarray(values)
    return {
        "p50": float(np.percentile(a, 50)),
        "p90": float(np.percentile(a, 90)),
        "p99": float(np.percentile(a, 99)),
    }


def bench_people(
    model: Path, people: int, frames: int, warmup: int, config: PipelineConfig, sim: bool
) -> dict[str, Any]:
    scene = list(sim_scene(people, frames + warmup) if sim else boxes_scene(people, frames + warmup))
    with Pipeline.load(model, config=config) as pipe:
        alone = (
            FlowStream(get_flow_backend(pipe.flow.name, **_flow_options(pipe.flow))) if pipe.flow else None
        )
        rows: list[dict[str, float]] = []
        flow_ms: list[float] = []
        pairs = gated = 0
        for k, (image, dets, t) in enumerate(scene):
            result = pipe.step(image, dets, t)
            if alone is not None:
                start = time.perf_counter_ns()
                alone.push(image)
                flow_ms.append((time.perf_counter_ns() - start) / 1e6)
            if k >= warmup:
                rows.append(dict(result.timings_ms))
                pairs += len(result.pairs)
                gated += int(result.interacting.sum())
        describe = pipe.describe()
    stages = {s: percentiles([r[s] for r in rows]) for s in STAGES}
    mean_total = float(np.mean([r["total"] for r in rows]))
    out = {
        "people": people,
        "frames": len(rows),
        "pairs_per_frame": pairs / len(rows),
        "stage2_pairs_per_frame": gated / len(rows),
        "stages_ms": stages,
        "fps": 1000.0 / mean_total,
        "pipeline": describe,
    }
    if flow_ms:
        out["flow_alone_ms"] = percentiles(flow_ms[warmup + 1 :])
    return out


def _flow_options(flow: Any) -> dict[str, Any]:
    options: dict[str, Any] = {"scale": flow.scale}
    if hasattr(flow, "preset"):
        options["preset"] = flow.preset
    return options


def rss_mb() -> float:
    """Current resident set size of this process, MiB (``/proc/self/statm``; peak RSS where absent)."""
    statm = Path("/proc/self/statm")
    if statm.exists():
        return int(statm.read_text().split()[1]) * resource.getpagesize() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def bench_long(model: Path, total: int, config: PipelineConfig) -> dict[str, Any]:
    base = list(boxes_scene(5, 50, size=(160, 120), seed=7))
    warm = min(2000, total // 10)
    with Pipeline.load(model, config=config) as pipe:
        start = time.perf_counter()
        samples: list[float] = []
        for k in range(total):
            image, dets, _ = base[k % 50]
            renewed = Detections(dets.boxes, dets.track_ids + 10 * (k // 50), dets.scores)
            pipe.step(image, renewed, k / 15.0)
            if k >= warm and (k - warm) % 500 == 0:
                samples.append(rss_mb())
        seconds = time.perf_counter() - start
        state = {"smoothed_pairs": len(pipe._smoother), "tracker_tracks": pipe._tracker.num_tracks}
    return {
        "frames": total, "warmup_frames": warm, "rss_after_warmup_mb": samples[0], "peak_rss_after_warmup_mb": max(samples),
        "rss_end_mb": samples[-1], "growth_mb": max(samples) - samples[0], "seconds": seconds, "state_at_end": state,
    }  # fmt: skip


# -- report ---------------------------------------------------------------------------------------------------
def markdown(res: dict[str, Any]) -> str:
    lines = [
        "# Streaming runtime benchmark",
        "",
        f"Machine: {res['machine']}",
        "",
        f"Models: {res['models']}",
        "",
    ]
    first = res["people"][0]["pipeline"]
    lines += [
        f"Pipeline: spec {first['feature_spec']}, flow {first['flow']}, classifier {first['stage1']}",
        "",
    ]
    lines += [
        "## Per-stage latency at 640 x 480, single thread (ms, p50 / p90 / p99)",
        "",
        "| people | pairs | stage-2 pairs | " + " | ".join(STAGES) + " | flow alone | FPS |",
        "|---:|---:|---:|" + "---:|" * (len(STAGES) + 2),
    ]
    for r in res["people"]:
        cells = [
            f"{r['stages_ms'][s]['p50']:.2f} / {r['stages_ms'][s]['p90']:.2f} / {r['stages_ms'][s]['p99']:.2f}"
            for s in STAGES
        ]
        fa = r.get("flow_alone_ms")
        flow = f"{fa['p50']:.2f}" if fa else "-"
        lines.append(
            f"| {r['people']} | {r['pairs_per_frame']:.0f} | {r['stage2_pairs_per_frame']:.0f} | "
            + " | ".join(cells) + f" | {flow} | {r['fps']:.0f} |"
        )  # fmt: skip
    c = res["criteria"]
    lines += [
        "",
        "## Criteria",
        "",
        f"- Overhead at 10 people: median step {c['step_10_ms']:.2f} ms / median flow alone {c['flow_10_ms']:.2f} ms "
        f"= **{c['overhead_ratio']:.2f}x** (target <= 1.2x).",
        f"- Scaling: median step at 100 people {c['step_100_ms']:.2f} ms / at 10 people {c['step_10_ms']:.2f} ms "
        f"= **{c['scaling_ratio']:.2f}x** (target <= 2x).",
        f"- Runtime's own work at 10 people (validate + track + stage 1 + stage 2 + smoothing + groups, p50 sum): "
        f"{c['own_10_ms']:.2f} ms; features {c['features_10_ms']:.2f} ms.",
    ]
    if "long_run" in res:
        lr = res["long_run"]
        lines += [
            f"- Long run: {lr['frames']} frames in {lr['seconds']:.0f} s; resident memory {lr['rss_after_warmup_mb']:.1f} "
            f"MiB after {lr['warmup_frames']} warm-up frames, peak {lr['peak_rss_after_warmup_mb']:.1f} MiB afterwards "
            f"(sampled every 500 frames): growth **{lr['growth_mb']:.2f} MiB** (target < 5 MB); state at the end "
            f"{lr['state_at_end']}.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--model", type=Path, help="model directory (stage1.onnx + stage2.onnx); default: toy MLPs"
    )
    ap.add_argument("--spec", default="pairedge", help="feature spec of the toy models (without --model)")
    ap.add_argument("--people", default="2,10,30,100")
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--flow", default="auto", help="flow backend (default: the spec's)")
    ap.add_argument("--flow-preset", default=None)
    ap.add_argument("--flow-scale", type=float, default=None)
    ap.add_argument("--sim", action="store_true", help="simulator frames instead of the box scene")
    ap.add_argument(
        "--long-frames", type=int, default=0, help="also run the memory check over this many frames"
    )
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    cv2.setNumThreads(1)
    config = PipelineConfig(
        flow=FlowConfig(backend=args.flow, preset=args.flow_preset, scale=args.flow_scale),
        backend_options=OrtOptions(intra_op_threads=1),
    )
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            model = Path(tmp)
            toy_mlp(model / "stage1.onnx", args.spec, 1, seed=1)
            toy_mlp(model / "stage2.onnx", args.spec, 2, seed=2)
        people = [
            bench_people(model, int(n), args.frames, args.warmup, config, args.sim)
            for n in args.people.split(",")
        ]
        by_n = {r["people"]: r for r in people}
        res: dict[str, Any] = {
            "machine": f"{platform.processor() or platform.machine()}, Python {sys.version.split()[0]}, numpy "
            f"{np.__version__}, OpenCV {cv2.__version__}, ONNX Runtime {onnxruntime.__version__}, 1 thread, "
            f"load average at start {open('/proc/loadavg').read().split()[0] if Path('/proc/loadavg').exists() else '?'}",
            "models": str(args.model) if args.model else f"toy MLPs with random weights ({args.spec} widths)",
            "scene": "simulator (static preset, truth boxes)"
            if args.sim
            else "textured boxes, exactly N people",
            "people": people,
        }
        if 10 in by_n and 100 in by_n and "flow_alone_ms" in by_n[10]:
            s10, s100 = by_n[10]["stages_ms"], by_n[100]["stages_ms"]
            own = sum(s10[s]["p50"] for s in ("validate", "track", "stage1", "stage2", "smooth", "groups"))
            res["criteria"] = {
                "step_10_ms": s10["total"]["p50"], "flow_10_ms": by_n[10]["flow_alone_ms"]["p50"],
                "overhead_ratio": s10["total"]["p50"] / by_n[10]["flow_alone_ms"]["p50"],
                "step_100_ms": s100["total"]["p50"], "scaling_ratio": s100["total"]["p50"] / s10["total"]["p50"],
                "own_10_ms": own, "features_10_ms": s10["features"]["p50"],
            }  # fmt: skip
        if args.long_frames:
            res["long_run"] = bench_long(model, args.long_frames, config)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_runtime.json").write_text(json.dumps(res, indent=2) + "\n")
    (args.out / "bench_runtime.md").write_text(
        markdown(res) if "criteria" in res else json.dumps(res, indent=2)
    )
    print(markdown(res) if "criteria" in res else json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
