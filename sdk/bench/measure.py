"""Timing primitives of ``pairedge bench``: classifier latency per pair count, and pipeline FPS per crowd size.

Classifier latency calls the pipeline's own backends (``Backend.infer``, input validation included) on real
feature rows, tiled to the pair count. Pipeline FPS steps the whole pipeline (flow, features, both stages,
smoothing, groups) over frames with exactly N people: textured boxes moving over a textured background, so
the flow backend works on real image content; FPS = 1000 / mean ``total`` step time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from pairedge.types import Detections

PAIR_COUNTS = (1, 64, 512, 4950)
PEOPLE = (10, 100)


def percentiles(samples_ms: Sequence[float]) -> dict[str, float]:
    a = np.asarray(samples_ms, np.float64)
    return {"p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)), "mean": float(a.mean())}


def classifier_latency(
    backend: Any,
    rows: np.ndarray,
    pair_counts: Sequence[int] = PAIR_COUNTS,
    repeats: int = 100,
    warmup: int = 5,
) -> dict[int, dict[str, float]]:
    """Milliseconds of ``backend.infer`` per pair count.

    Args:
        backend: an active classifier :class:`~pairedge.runtime.backends.Backend`.
        rows: (M, F) float32 real feature rows (M >= 1), tiled to each pair count.
        repeats: timed calls per pair count (the largest count gets at least 20).
    """
    rng = np.random.default_rng(0)
    out: dict[int, dict[str, float]] = {}
    for n in pair_counts:
        x = np.ascontiguousarray(rows[rng.integers(0, len(rows), n)], np.float32)
        for _ in range(warmup):
            backend.infer(x)
        times = []
        for _ in range(max(repeats if n < 4096 else repeats // 2, 20)):
            t0 = time.perf_counter_ns()
            backend.infer(x)
            times.append((time.perf_counter_ns() - t0) / 1e6)
        out[int(n)] = percentiles(times)
    return out


def boxes_scene(
    people: int, frames: int, size: tuple[int, int] = (640, 480), seed: int = 0
) -> Iterator[tuple[np.ndarray, Detections, float]]:
    """``(image (H, W, 3) uint8, detections, timestamp)`` of exactly ``people`` moving textured boxes at 15 fps."""
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
    patches = [cv2.resize(rng.integers(0, 255, (8, 4, 3), dtype=np.uint8), (int(a), int(b)))
               for a, b in zip(bw, bh, strict=True)]  # fmt: skip
    for k in range(frames):
        t = k / 15.0
        xy = np.abs(start + speed * t) % room
        image = background.copy()
        for (x, y), patch in zip(xy.astype(int), patches, strict=True):
            image[y : y + patch.shape[0], x : x + patch.shape[1]] = patch[: h - y, : w - x]
        yield image, Detections.from_arrays(np.column_stack([xy, bw, bh]), np.arange(1, people + 1)), t


def pipeline_fps(pipe: Any, people: int, frames: int = 30, warmup: int = 3) -> dict[str, Any]:
    """Step ``pipe`` over a ``people``-person scene; mean / p50 / p99 step time and FPS (after warm-up)."""
    pipe.reset()
    scene = list(boxes_scene(people, frames + warmup))
    totals = []
    pairs = 0
    for k, (image, dets, t) in enumerate(scene):
        result = pipe.step(image, dets, t)
        if k >= warmup:
            totals.append(result.timings_ms["total"])
            pairs += len(result.pairs)
    stats = percentiles(totals)
    return {"people": people, "frames": frames, "pairs_per_frame": pairs / max(frames, 1), "step_ms": stats,
            "fps": 1000.0 / stats["mean"] if stats["mean"] > 0 else 0.0}  # fmt: skip
