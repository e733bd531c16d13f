"""Timing primitives of ``pairedge bench``: classifier latency per pair count, and pipeline FPS per crowd
size.

Classifier latency calls the pipeline's own backends (``Backend.infer``, input validation included) on real
feature rows sampled to the pair count. Variants are measured interleaved (round-robin), so a busy shared
machine slows them alike. Pipeline FPS steps the whole pipeline (flow, features, both stages,
smoothing, groups) over frames with exactly N people: textured boxes moving over a textured background, so
the flow backend works on real image content; FPS = 1000 / mean ``total`` step time, and every stage of
``FrameResult.timings_ms`` (validate, track, flow, features, groups, stage1, stage2, smooth, total) gets its
own percentiles. Memory: the process's peak resident set size, and the GPU memory it holds where
``nvidia-smi`` can tell (desktop / server GPUs; a Jetson has no ``nvidia-smi``: tegrastats reports there).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from pairedge.compare.cost import PAIR_COUNTS, classifier_latency, percentiles
from pairedge.core.types import Detections

__all__ = [
    "PAIR_COUNTS",
    "PEOPLE",
    "boxes_scene",
    "classifier_latency",
    "gpu_memory_mib",
    "peak_rss_mib",
    "percentiles",
]
#: Crowd sizes of the pipeline measurements (SPEC: scaling with the number of people, 2 .. 100).
PEOPLE = (2, 10, 30, 100)


def peak_rss_mib() -> float | None:
    """Peak resident set size of this process so far, MiB (None where ``resource`` is missing: Windows)."""
    try:
        import resource
    except ImportError:
        return None
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return float(peak) / (1024.0 * 1024.0 if sys.platform == "darwin" else 1024.0)


def gpu_memory_mib(pid: int | None = None) -> float | None:
    """GPU memory held by process ``pid`` (default: this one) per ``nvidia-smi``, MiB; None when it cannot
    tell (no NVIDIA GPU, no nvidia-smi, e.g. a Jetson, or the process holds no GPU memory)."""
    import os
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    pid = os.getpid() if pid is None else pid
    try:
        out = subprocess.run(
            [exe, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    used = [
        float(mem)
        for line in out.splitlines()
        if len(parts := [p.strip() for p in line.split(",")]) == 2
        and parts[0] == str(pid)
        and (mem := parts[1]).replace(".", "", 1).isdigit()
    ]
    return sum(used) if used else None


def boxes_scene(
    people: int, frames: int, size: tuple[int, int] = (640, 480), seed: int = 0
) -> Iterator[tuple[np.ndarray, Detections, float]]:
    """``(image (H, W, 3) uint8, detections, timestamp)`` of exactly ``people`` moving textured boxes at 15
    fps."""
    import cv2

    w, h = size
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 255, (h // 8, w // 8, 3), dtype=np.uint8)
    background = cv2.GaussianBlur(cv2.resize(noise, (w, h), interpolation=cv2.INTER_CUBIC), (5, 5), 1.5)
    bh = rng.uniform(0.15, 0.35, people) * h
    bw = 0.4 * bh
    start = rng.uniform(0, 1, (people, 2)) * (np.array([w, h]) - np.column_stack([bw, bh]))
    speed = rng.normal(0, 30, (people, 2))
    room = np.maximum(np.array([w, h]) - np.column_stack([bw, bh]), 1)
    patches = [
        cv2.resize(rng.integers(0, 255, (8, 4, 3), dtype=np.uint8), (int(a), int(b)))
        for a, b in zip(bw, bh, strict=True)
    ]
    for k in range(frames):
        t = k / 15.0
        xy = np.abs(start + speed * t) % room
        image = background.copy()
        for (x, y), patch in zip(xy.astype(int), patches, strict=True):
            image[y : y + patch.shape[0], x : x + patch.shape[1]] = patch[: h - y, : w - x]
        yield image, Detections.from_arrays(np.column_stack([xy, bw, bh]), np.arange(1, people + 1)), t


def pipeline_fps(
    pipes: Sequence[Any], people: int, frames: int = 30, warmup: int = 3
) -> list[dict[str, Any]]:
    """Step every pipeline of ``pipes`` over the same ``people``-person frames, interleaved frame by frame.

    Returns:
        Per pipeline: ``step_ms`` (p50 / p90 / p99 / mean of the whole step, after ``warmup`` frames),
        ``stages_ms`` (the same per stage of ``FrameResult.timings_ms``), pairs per frame and FPS
        (1000 / mean step ms).
    """
    for pipe in pipes:
        pipe.reset()
    series: list[dict[str, list[float]]] = [{} for _ in pipes]
    pairs = 0
    for k, (image, dets, t) in enumerate(boxes_scene(people, frames + warmup)):
        for i, pipe in enumerate(pipes):
            result = pipe.step(image, dets, t)
            if k >= warmup:
                for stage, ms in result.timings_ms.items():
                    series[i].setdefault(stage, []).append(ms)
                pairs += len(result.pairs) if i == 0 else 0
    out = []
    for timings in series:
        stats = percentiles(timings["total"])
        out.append(
            {
                "people": people,
                "frames": frames,
                "pairs_per_frame": pairs / max(frames, 1),
                "step_ms": stats,
                "stages_ms": {stage: percentiles(v) for stage, v in timings.items()},
                "fps": 1000.0 / stats["mean"] if stats["mean"] > 0 else 0.0,
            }
        )
    return out
