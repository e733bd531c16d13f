"""The CUDA flow on a GPU: agreement with its CPU reference, and its cost with fused pooling.

Run on a machine with an NVIDIA GPU (``benchmarks/gpu_check.sh`` runs it on the lent one)::

    python benchmarks/bench_gpu_flow.py            # about a minute

0. **Kernels**: every kernel against its numpy twin (:mod:`pairedge.runtime.flow.cuda.twins`, the comparison
   the emulated device passes bit for bit in CI) at odd sizes: largest absolute difference, elements
   differing.
1. **Agreement**: mean |GPU flow - CPU reference flow| (px) on the runtime benchmark's textured scene at
   640 x 480 (scale 0.5 and 1.0), and the max relative difference of the pooled sums (GPU reduction vs
   :func:`pairedge.core.features.flowpool.pooled_reference` of the GPU's own dense field).
2. **Cost** of flow + fused pooling (``CudaFlow.compute_pooled``) at 640 x 480 frames, 10 and 100 people,
   scale 0.5 and 1.0: GPU time from CUDA events and wall time per call (median of ``--frames`` after a
   warm-up), against the CPU reference and DIS fast / 0.5 on the same frames.
3. **Pipeline**: ``Pipeline.step`` with ``flow="cuda"`` on the bundled default model, per-stage median ms
   (``flow_gpu`` = the flow stage's GPU time).

Writes ``benchmarks/results/bench_gpu_flow.json`` and ``.md``. Without a usable GPU it exits with status 2
and the reason (nothing written).
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from _train_bench import write
from pairedge.apps.bench.measure import boxes_scene
from pairedge.core.features.flowpool import pooled_reference
from pairedge.runtime.flow import FlowStream, available_flow_backends, get_flow_backend
from pairedge.runtime.flow.lk_reference import lk_flow
from pairedge.runtime.flow.pooling import PooledFlowStream, PoolRequest

HERE = Path(__file__).resolve().parent
INSET, STEP = (0.15, 0.05), 8


def frames(people: int, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n`` (gray 640 x 480, boxes (people, 4)) of the runtime benchmark's scene."""
    out = []
    for image, dets, _t in boxes_scene(people, n):
        out.append((cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), np.asarray(dets.boxes, np.float64)))
    return out


def kernel_twins() -> list[dict[str, Any]]:
    """Every kernel against its numpy twin on the GPU (max over the sizes the emulated tests use)."""
    from pairedge.gpu.cuda import open_device
    from pairedge.runtime.flow.cuda.twins import CASES, KernelRunner, compare, load_flow_kernels

    rows = []
    with open_device("auto", emulation=False) as device:
        runner = KernelRunner(device, load_flow_kernels(device))
        for name in CASES:
            worst, differ, total = 0.0, 0, 0
            for shape in ((1, 1), (1, 23), (19, 1), (17, 33), (37, 50), (120, 161)):
                mark = device.mark()
                result = compare(runner, name, *shape, seed=sum(shape))[0]
                device.release(mark)
                worst, differ, total = (
                    max(worst, result.max_abs),
                    differ + result.mismatches,
                    total + result.size,
                )
            rows.append({"kernel": name, "max_abs": worst, "differing": differ, "elements": total})
    return rows


def agreement(scale: float) -> dict[str, float]:
    backend = get_flow_backend("cuda", scale=scale)
    seq = frames(10, 3)
    a, b = (backend.resize(seq[i][0], i).copy() for i in (1, 2))
    gpu = backend.compute_scaled(a, b).copy()
    ref = lk_flow(a, b, backend.params)
    pooled = backend.compute_pooled(a, b, PoolRequest(seq[1][1], INSET, STEP))
    want = pooled_reference(gpu, seq[1][1], scale, INSET, STEP)
    rel = np.abs(pooled.moments - want.moments) / np.maximum(np.abs(want.moments), 1e-6)
    backend.close()
    return {
        "flow_mean_abs_px": float(np.abs(gpu - ref).mean()),
        "flow_max_abs_px": float(np.abs(gpu - ref).max()),
        "pooled_max_rel": float(rel.max()),
        "grid_equal": bool(np.array_equal(pooled.grid, want.grid)),
    }


def cost(name: str, scale: float, people: int, n: int, warmup: int = 5, **options: Any) -> dict[str, float]:
    backend = get_flow_backend(name, scale=scale, **options)
    seq = frames(people, n + warmup)
    pooled = name == "cuda"
    stream = PooledFlowStream(backend) if pooled else FlowStream(backend)
    wall, gpu = [], []
    for i, (gray, boxes) in enumerate(seq):
        t0 = time.perf_counter()
        if pooled:
            stream.push_pooled(gray, PoolRequest(boxes, INSET, STEP))  # type: ignore[attr-defined]
        else:
            stream.push(gray)
        if i >= warmup:
            wall.append((time.perf_counter() - t0) * 1e3)
            if pooled:
                gpu.append(backend.last_gpu_ms)
    out = {"wall_ms_p50": float(np.median(wall))}
    if gpu:
        out["gpu_ms_p50"] = float(np.median(gpu))
    if hasattr(backend, "close"):
        backend.close()
    return out


def pipeline_stages(n: int) -> dict[str, float]:
    from pairedge.core.bundled import default_model_dir
    from pairedge.core.types import Detections
    from pairedge.runtime import Deployment

    rows = []
    with Deployment(default_model_dir(), flow="cuda").load() as pipe:
        for i, (image, dets, t) in enumerate(boxes_scene(10, n + 5)):
            result = pipe.step(image, Detections.from_arrays(dets.boxes, dets.track_ids), t)
            if i >= 5:
                rows.append(result.timings_ms)
    keys = sorted({k for r in rows for k in r})
    return {k: float(np.median([r.get(k, 0.0) for r in rows])) for k in keys}


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "# CUDA flow with fused pooling on a GPU",
        "",
        f"Device: {res['device']}; {res['machine']}. `python benchmarks/bench_gpu_flow.py` "
        "(run by `benchmarks/gpu_check.sh`).",
        "",
        "## Every kernel against its numpy twin (odd sizes, 1x1 to 120x161)",
        "",
        "| kernel(s) | max abs difference | differing elements |",
        "|---|---:|---:|",
        *[
            f"| {r['kernel']} | {r['max_abs']:.3g} | {r['differing']} of {r['elements']} |"
            for r in res["kernels"]
        ],
        "",
        "## Agreement with the CPU reference (640 x 480 scene)",
        "",
        "| scale | flow mean abs px | flow max abs px | pooled sums max rel | grid equal |",
        "|---:|---:|---:|---:|---|",
    ]
    for scale, a in res["agreement"].items():
        lines.append(
            f"| {scale} | {a['flow_mean_abs_px']:.2e} | {a['flow_max_abs_px']:.2e} | "
            f"{a['pooled_max_rel']:.2e} | {a['grid_equal']} |"
        )
    lines += [
        "",
        "## Cost per frame, 640 x 480 frames (median ms)",
        "",
        "| flow | scale | people | GPU ms (events) | wall ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in res["cost"]:
        gpu = f"{r['gpu_ms_p50']:.3f}" if "gpu_ms_p50" in r else "-"
        lines.append(f"| {r['flow']} | {r['scale']} | {r['people']} | {gpu} | {r['wall_ms_p50']:.3f} |")
    lines += [
        "",
        "## Pipeline.step with flow='cuda' (default model, 10 people, median ms per stage)",
        "",
        "| " + " | ".join(res["pipeline"]) + " |",
        "|" + "---:|" * len(res["pipeline"]),
        "| " + " | ".join(f"{v:.3f}" for v in res["pipeline"].values()) + " |",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=int, default=50)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    reason = available_flow_backends()["cuda"]
    if reason is not None:
        print(f"CUDA flow not usable here: {reason}")
        return 2
    cv2.setNumThreads(1)
    probe = get_flow_backend("cuda")
    if probe.emulated:
        print(
            "PAIREDGE_CUDA_EMULATION=hip-cpu is set: this benchmark is for a GPU (see bench_emulated_cuda.py)"
        )
        probe.close()
        return 2
    info = probe.api.info
    device = f"{info.name} (sm_{info.arch}, driver CUDA {info.cuda_version}, {probe.api.kind})"
    probe.close()
    res: dict[str, Any] = {
        "device": device,
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "kernels": kernel_twins(),
        "agreement": {str(s): agreement(s) for s in (0.5, 1.0)},
        "cost": [],
    }
    for name, scale, people, n, opts in (
        ("cuda", 0.5, 10, args.frames, {}),
        ("cuda", 0.5, 100, args.frames, {}),
        ("cuda", 0.5, 10, args.frames, {"graphs": False}),
        ("cuda", 1.0, 10, args.frames, {}),
        ("cuda", 1.0, 100, args.frames, {}),
        ("dis", 0.5, 10, args.frames, {"preset": "fast"}),
        ("reference", 0.5, 10, 8, {}),
    ):
        label = name + (" (no graphs)" if opts.get("graphs") is False else "")
        row = {"flow": label, "scale": scale, "people": people, **cost(name, scale, people, n, **opts)}
        res["cost"].append(row)
        print(row, flush=True)
    res["pipeline"] = pipeline_stages(args.frames)
    text = markdown(res)
    write("bench_gpu_flow", res, text, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
