"""Timing primitives of ``pairedge bench``: classifier latency per pair count, and pipeline FPS per crowd size.

Classifier latency calls the pipeline's own backends (``Backend.infer``, input validation included) on real
feature rows sampled to the pair count. Variants are measured interleaved (round-robin), so a busy shared
machine slows them alike. Pipeline FPS steps the whole pipeline (flow, features, both stages,
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
    backends: Sequence[Any],
    rows: np.ndarray,
    pair_counts: Sequence[int] = PAIR_COUNTS,
    repeats: int = 100,
    warmup: int = 5,
    rounds: int = 10,
) -> list[dict[int, dict[str, float]]]:
    """Milliseconds of ``backend.infer`` per pair count, for several backends measured **interleaved**.

    The calls are split into ``rounds``; each round times every backend in turn on the same input, so load
    from other processes on a shared machine falls on all variants alike instead of on whichever ran last.

    Args:
        backends: active classifier :class:`~pairedge.runtime.backends.Backend` objects (same input width).
        rows: (M, F) float32 real feature rows (M >= 1), sampled (with repetition) to each pair count.
        repeats: timed calls per backend and pair count (the 4,096+ counts get half, at least 20).

    Returns:
        One ``{pairs: {"p50", "p99", "mean"}}`` per backend, in order.
    """
    rng = np.random.default_rng(0)
    samples: list[dict[int, list[float]]] = [{int(n): [] for n in pair_counts} for _ in backends]
    for n in pair_counts:
        x = np.ascontiguousarray(rows[rng.integers(0, len(rows), n)], np.float32)
        calls = max(repeats if n < 4096 else repeats // 2, 20)
        per_round = max(calls // rounds, 1)
        for backend in backends:
            for _ in range(warmup):
                backend.infer(x)
        for _ in range(max(calls // per_round, 1)):
            for k, backend in enumerate(backends):
                for _ in range(per_round):
                    t0 = time.perf_counter_ns()
                    backend.infer(x)
                    samples[k][int(n)].append((time.perf_counter_ns() - t0) / 1e6)
    return [{n: percentiles(v) for n, v in s.items()} for s in samples]


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


def pipeline_fps(
    pipes: Sequence[Any], people: int, frames: int = 30, warmup: int = 3
) -> list[dict[str, Any]]:
    """Step every pipeline of ``pipes`` over the same ``people``-person frames, interleaved frame by frame.

    Returns:
        Per pipeline: mean / p50 / p99 step time (after ``warmup`` frames), pairs per frame and FPS
        (1000 / mean step ms).
    """
    for pipe in pipes:
        pipe.reset()
    totals: list[list[float]] = [[] for _ in pipes]
    pairs = 0
    for k, (image, dets, t) in enumerate(boxes_scene(people, frames + warmup)):
        for i, pipe in enumerate(pipes):
            result = pipe.step(image, dets, t)
            if k >= warmup:
                totals[i].append(result.timings_ms["total"])
                pairs += len(result.pairs) if i == 0 else 0
    out = []
    for series in totals:
        stats = percentiles(series)
        out.append({"people": people, "frames": frames, "pairs_per_frame": pairs / max(frames, 1), "step_ms": stats,
                    "fps": 1000.0 / stats["mean"] if stats["mean"] > 0 else 0.0})  # fmt: skip
    return out
