"""Latency of the streaming runtime: per-stage p50/p90/p99 and FPS, overhead over the flow, scaling, memory.

1. Per-stage latency (validate, track, flow, features, stage 1, stage 2, smoothing, groups, total) and FPS
   at 640 x 480 for 2, 10, 30 and 100 people, single thread (OpenCV and ONNX Runtime limited to 1 thread),
   for each flow setting of ``--flows`` (default: DIS ``fast`` at scale 0.5, the runtime's default, DIS
   ``medium`` at scale 0.5, and DIS ``medium`` at scale 1.0, the most accurate). The scene has exactly N
   people: textured boxes moving at constant speed over a textured background, so the flow backend works on
       real image content
   (``--sim`` for simulator frames instead, whose visible people fall short of N in crowds).
2. Overhead: in the same loop, the flow alone (a second backend instance with the same settings fed the
   same frames through the same ``FlowStream``), and the ratio ``median(step) / median(flow)`` at 10 people.
3. Scaling: ``median(step at 100 people) / median(step at 10 people)``.
4. Allocator: the process runs with :func:`pairedge.runtime.memory.tune_allocator` (as ``pairedge run`` and
   ``pairedge demo`` do); a subprocess repeats 10 and 100 people with glibc's default allocator for
   comparison (``--allocator default`` runs everything that way).
5. Accuracy per flow setting (real models only): the model through the runtime on held-out simulator scenes
   (``--accuracy-scenes``, ground-truth boxes), pooled pairwise metrics (``_runtime_accuracy.py``).
6. Optional long run (``--long-frames N``): a small stream (5 people at 160 x 120, ids renewed every 50
   frames so tracks keep appearing and disappearing): the growth of the resident memory (sampled every 500
   frames) over its value after warm-up.

Classifiers: ``--model DIR``; default: the bundled default model when it is installed, else (or with
``--toy``) *toy* MLPs with random weights of the spec's widths (stage 1: F1-32-16-2, stage 2: F2-128-64-3),
whose gate lets a random ~half of the pairs through to stage 2 — far more than a trained stage 1 — so
stage 2 and group costs are upper bounds there.

Writes ``benchmarks/results/bench_runtime.json`` and ``.md``. Run from the repository root::

    python benchmarks/bench_runtime.py                          # ~2 minutes on 2 cores
    python benchmarks/bench_runtime.py --toy --spec liang2026 --flows farneback:-:1.0 --frames 40
    python benchmarks/bench_runtime.py --long-frames 100000     # plus the memory check, ~5 more minutes
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnx
import onnxruntime
from _runtime_report import markdown, plot
from onnx import TensorProto, helper, numpy_helper
from pairedge.apps.bench.measure import boxes_scene
from pairedge.core.bundled import default_model_dir
from pairedge.core.features import get_spec
from pairedge.core.modelmeta import ModelMetadata
from pairedge.core.types import Detections
from pairedge.runtime import Deployment, FlowConfig, Pipeline, PipelineConfig
from pairedge.runtime.backends.ort import OrtOptions
from pairedge.runtime.flow import FlowStream, get_flow_backend
from pairedge.runtime.memory import tune_allocator

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
        stage=stage,
        feature_spec=spec.name,
        feature_spec_version=spec.version,
        labels=labels,
        num_features=f,
        norm_mean=(0.0,) * f,
        norm_std=(1.0,) * f,
        thresholds={"p_interact": 0.5, "tau_group": 0.5},
        architecture="toy_mlp",
    )
    helper.set_model_props(model, meta.to_props())
    onnx.save_model(model, str(path))


def sim_scene(people: int, frames: int, seed: int = 0) -> Iterator[tuple]:
    from pairedge.measure.sim import get_preset, simulate
    from pairedge.measure.sim.config import with_people

    for f in simulate(with_people(get_preset("static"), people), seed=seed, frames=frames):
        yield f.image, f.truth, f.timestamp


# -- measurements
# ---------------------------------------------------------------------------------------------
def percentiles(values: list[float]) -> dict[str, float]:
    a = np.asarray(values)
    return {
        "p50": float(np.percentile(a, 50)),
        "p90": float(np.percentile(a, 90)),
        "p99": float(np.percentile(a, 99)),
    }


def bench_people(
    deployment: Deployment, people: int, frames: int, warmup: int, config: PipelineConfig, sim: bool
) -> dict[str, Any]:
    scene = list(sim_scene(people, frames + warmup) if sim else boxes_scene(people, frames + warmup))
    with deployment.load(config) as pipe:
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
        peak = step_allocations(pipe, scene[-MEMORY_FRAMES:])
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
        "step_peak_alloc_mib": peak,
    }
    if flow_ms:
        out["flow_alone_ms"] = percentiles(flow_ms[warmup + 1 :])
    return out


MEMORY_FRAMES = 5


def step_allocations(pipe: Pipeline, frames: list[tuple]) -> float:
    """The largest memory a step allocates above what the stream holds between frames, MiB: Python and numpy
    allocations traced by ``tracemalloc`` over the last few frames (after the timed ones, so tracing costs no
    latency). OpenCV's and ONNX Runtime's own buffers are not traced: they are sized once per session."""
    tracemalloc.start()
    try:
        peak = 0
        for image, dets, t in frames:
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            pipe.step(image, dets, t + 1e3)  # later than every timed frame: the stream goes on
            peak = max(peak, tracemalloc.get_traced_memory()[1] - base)
    finally:
        tracemalloc.stop()
    return peak / 2**20


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


def bench_long(deployment: Deployment, total: int, config: PipelineConfig) -> dict[str, Any]:
    base = list(boxes_scene(5, 50, size=(160, 120), seed=7))
    warm = min(2000, total // 10)
    with deployment.load(config) as pipe:
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
        "frames": total,
        "warmup_frames": warm,
        "rss_after_warmup_mb": samples[0],
        "peak_rss_after_warmup_mb": max(samples),
        "rss_end_mb": samples[-1],
        "growth_mb": max(samples) - samples[0],
        "seconds": seconds,
        "state_at_end": state,
    }


# -- sweeps -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FlowSetting:
    """One flow setting of a sweep: the flow backend (``Deployment.flow``) and its preset and scale."""

    name: str
    config: FlowConfig

    @property
    def backend(self) -> str:
        return self.name

    @property
    def preset(self) -> str | None:
        return self.config.preset

    @property
    def scale(self) -> float | None:
        return self.config.scale

    def label(self) -> str:
        return f"{self.name} {self.preset or 'default'} / scale {self.scale if self.scale else 'default'}"


def flow_label(flow: FlowSetting) -> str:
    return flow.label()


def parse_flows(text: str) -> list[FlowSetting]:
    """``"dis:fast:0.5,dis:medium:1.0"`` -> flow settings (``-`` = default preset / scale)."""
    out = []
    for item in text.split(","):
        name, preset, scale = (item.split(":") + ["-", "-"])[:3]
        config = FlowConfig(
            preset=None if preset == "-" else preset, scale=None if scale == "-" else float(scale)
        )
        out.append(FlowSetting(name, config))
    return out


def criteria(by_n: dict[int, dict[str, Any]]) -> dict[str, float] | None:
    """Overhead (step / flow alone at 10 and at 100 people) and scaling (100 vs 10 people) of one sweep."""
    if 10 not in by_n or 100 not in by_n or "flow_alone_ms" not in by_n[10]:
        return None
    s10, s100 = by_n[10]["stages_ms"], by_n[100]["stages_ms"]
    own = sum(s10[s]["p50"] for s in ("validate", "track", "stage1", "stage2", "smooth", "groups"))
    return {
        "step_10_ms": s10["total"]["p50"],
        "flow_10_ms": by_n[10]["flow_alone_ms"]["p50"],
        "overhead_ratio": s10["total"]["p50"] / by_n[10]["flow_alone_ms"]["p50"],
        "step_100_ms": s100["total"]["p50"],
        "scaling_ratio": s100["total"]["p50"] / s10["total"]["p50"],
        "own_10_ms": own,
        "features_10_ms": s10["features"]["p50"],
        "flow_100_ms": by_n[100]["flow_alone_ms"]["p50"],
        "overhead_ratio_100": s100["total"]["p50"] / by_n[100]["flow_alone_ms"]["p50"],
        "features_100_ms": s100["features"]["p50"],
    }


def sweep(model: Path, flow: FlowSetting, args: argparse.Namespace) -> dict[str, Any]:
    config = PipelineConfig(
        flow=flow.config, backend_options=OrtOptions(intra_op_threads=1), pair_radius=args.pair_radius
    )
    people = [
        bench_people(Deployment(model, flow=flow.name), int(n), args.frames, args.warmup, config, args.sim)
        for n in args.people.split(",")
    ]
    return {
        "flow": flow.label(),
        "people": people,
        "criteria": criteria({r["people"]: r for r in people}),
    }


def default_allocator_run(model: Path, args: argparse.Namespace) -> dict[str, Any] | None:
    """10 and 100 people with the first flow setting, in a subprocess with glibc's default allocator."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            __file__,
            "--model",
            str(model),
            "--allocator",
            "default",
            "--no-accuracy",
            "--flows",
            args.flows.split(",")[0],
            "--people",
            "10,100",
            "--frames",
            str(args.frames),
            "--out",
            tmp,
        ] + ([] if args.pair_radius is None else ["--pair-radius", str(args.pair_radius)])
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stderr[-2000:], file=sys.stderr)
            return None
        res = json.loads((Path(tmp) / "bench_runtime.json").read_text())
    return res["sweeps"][0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, help="model directory (default: the bundled model, else toy MLPs)")
    ap.add_argument("--toy", action="store_true", help="use toy MLPs with random weights")
    ap.add_argument("--spec", default="pairedge", help="feature spec of the toy models")
    ap.add_argument("--people", default="2,10,30,100")
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument(
        "--flows", default="dis:fast:0.5,dis:medium:0.5,dis:medium:1.0", help="backend:preset:scale list"
    )
    ap.add_argument("--sim", action="store_true", help="simulator frames instead of the box scene")
    ap.add_argument("--allocator", choices=("tuned", "default"), default="tuned")
    ap.add_argument("--no-accuracy", action="store_true", help="skip the accuracy per flow setting")
    ap.add_argument("--accuracy-scenes", default="static:1000,moving:1000,noisy:1000")
    ap.add_argument("--accuracy-frames", type=int, default=150)
    ap.add_argument("--long-frames", type=int, default=0, help="also run the memory check over N frames")
    ap.add_argument(
        "--pair-radius",
        type=float,
        default=None,
        help="PipelineConfig.pair_radius for the latency sweeps (default: every pair)",
    )
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    cv2.setNumThreads(1)
    tuned = tune_allocator() if args.allocator == "tuned" else False
    flows = parse_flows(args.flows)
    with tempfile.TemporaryDirectory() as tmp:
        model, label = choose_model(args, Path(tmp))
        res: dict[str, Any] = {
            "machine": machine(),
            "models": label,
            "allocator_tuned": tuned,
            "scene": "simulator (static preset, truth boxes)"
            if args.sim
            else "textured boxes, exactly N people",
        }
        res["sweeps"] = [sweep(model, flow, args) for flow in flows]
        if tuned:
            res["default_allocator"] = default_allocator_run(model, args)
        if not args.no_accuracy and not label.startswith("toy"):
            from _runtime_accuracy import parse_scenes, scene_accuracy

            scenes = parse_scenes(args.accuracy_scenes)
            res["accuracy"] = [
                scene_accuracy(
                    model, scenes, args.accuracy_frames, PipelineConfig(flow=f.config), flow=f.name
                )
                for f in flows
            ]
        if args.long_frames:
            config = PipelineConfig(flow=flows[0].config, backend_options=OrtOptions(intra_op_threads=1))
            res["long_run"] = bench_long(Deployment(model, flow=flows[0].name), args.long_frames, config)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_runtime.json").write_text(json.dumps(res, indent=2) + "\n")
    skipped = plot(res, args.out / "bench_runtime.png")
    text = markdown(res) + (
        "" if skipped else "\n![per-stage p50 latency against the number of people](bench_runtime.png)\n"
    )
    (args.out / "bench_runtime.md").write_text(text)
    print(text if not skipped else text + "\n" + skipped)
    return 0


def choose_model(args: argparse.Namespace, tmp: Path) -> tuple[Path, str]:
    """The model folder and its description: --model, else the bundled model, else toy MLPs."""
    if args.model is not None and not args.toy:
        return args.model, str(args.model)
    bundled = default_model_dir()
    if not args.toy and (bundled / "stage1.onnx").is_file() and (bundled / "stage2.onnx").is_file():
        return bundled, f"bundled default model ({bundled})"
    toy_mlp(tmp / "stage1.onnx", args.spec, 1, seed=1)
    toy_mlp(tmp / "stage2.onnx", args.spec, 2, seed=2)
    return tmp, f"toy MLPs with random weights ({args.spec} widths)"


def machine() -> str:
    load = open("/proc/loadavg").read().split()[0] if Path("/proc/loadavg").exists() else "?"
    return (
        f"{platform.processor() or platform.machine()}, Python {sys.version.split()[0]}, numpy "
        f"{np.__version__}, OpenCV {cv2.__version__}, ONNX Runtime {onnxruntime.__version__}, 1 thread, load "
        f"average at start {load}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
