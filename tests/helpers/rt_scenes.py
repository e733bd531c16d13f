"""A minimal moving scene for runtime tests: textured background, textured boxes moving at constant speed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import cv2
import numpy as np
from pairedge.core.types import Detections


@dataclass(frozen=True)
class SceneFrame:
    image: np.ndarray  # (H, W, 3) uint8 BGR
    detections: Detections  # with ids 1..N
    timestamp: float


def scene(
    people: int = 5, frames: int = 6, size: tuple[int, int] = (320, 240), fps: float = 10.0, seed: int = 0
) -> Iterator[SceneFrame]:
    """``frames`` frames of ``people`` boxes drifting over a textured background (``size`` = (W, H))."""
    w, h = size
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 255, (h // 8, w // 8, 3), dtype=np.uint8)
    background = cv2.GaussianBlur(cv2.resize(noise, (w, h), interpolation=cv2.INTER_CUBIC), (5, 5), 1.5)
    bh = rng.uniform(0.25, 0.4, people) * h
    bw = bh * 0.4
    start = np.column_stack([rng.uniform(0, w - bw), rng.uniform(0, h - bh)])
    velocity = rng.normal(0, 25, (people, 2))
    patches = [
        cv2.resize(rng.integers(0, 255, (6, 4, 3), dtype=np.uint8), (int(a), int(b)))
        for a, b in zip(bw, bh, strict=True)
    ]
    for k in range(frames):
        t = k / fps
        xy = np.clip(start + velocity * t, 0, [w - 1, h - 1] - np.column_stack([bw, bh]))
        image = background.copy()
        for (x, y), patch in zip(xy.astype(int), patches, strict=True):
            ph, pw = patch.shape[:2]
            image[y : y + ph, x : x + pw] = patch[: h - y, : w - x]
        boxes = np.column_stack([xy, bw, bh]).astype(np.float32)
        yield SceneFrame(image, Detections.from_arrays(boxes, np.arange(1, people + 1)), t)
