"""Procedural textures, rendered once per scene: ground tiles, the backdrop band and clothing patterns.

Every tile is periodic (it wraps seamlessly), so a renderer can sample it with ``BORDER_WRAP``. All functions
take an explicit ``numpy.random.Generator``: the same generator state gives the same pixels.
"""

from __future__ import annotations

import cv2
import numpy as np

#: Clothing pattern kinds (chosen per garment).
PATTERNS = ("plain", "hstripes", "vstripes", "checks", "dots", "mottled")


def periodic_noise(rng: np.random.Generator, size: int, cells: int) -> np.ndarray:
    """Smooth periodic value noise.

    Args:
        size: side of the square tile in pixels; must be a multiple of ``cells``.
        cells: number of random lattice cells per side (larger = finer noise).

    Returns:
        (size, size) float32 in about [0, 1], periodic in both axes.
    """
    grid = rng.random((cells, cells), dtype=np.float32)
    pad = np.pad(grid, 2, mode="wrap")
    k = size // cells
    big = cv2.resize(pad, ((cells + 4) * k, (cells + 4) * k), interpolation=cv2.INTER_CUBIC)
    return np.ascontiguousarray(big[2 * k : 2 * k + size, 2 * k : 2 * k + size])


def fractal_noise(
    rng: np.random.Generator, size: int, octaves: tuple[int, ...] = (4, 8, 16, 32, 64)
) -> np.ndarray:
    """Sum of :func:`periodic_noise` octaves with halving weights; (size, size) float32 in [0, 1]."""
    out = np.zeros((size, size), np.float32)
    weight, total = 1.0, 0.0
    for cells in octaves:
        out += weight * periodic_noise(rng, size, cells)
        total += weight
        weight *= 0.6
    out /= total
    lo, hi = float(out.min()), float(out.max())
    return (out - lo) / max(hi - lo, 1e-6)


def _tint(
    gray: np.ndarray, low_bgr: tuple[float, float, float], high_bgr: tuple[float, float, float]
) -> np.ndarray:
    """Map a [0, 1] float image onto a colour ramp; returns (H, W, 3) uint8 BGR."""
    lo = np.asarray(low_bgr, np.float32)
    hi = np.asarray(high_bgr, np.float32)
    return np.clip(lo + gray[..., None] * (hi - lo), 0, 255).astype(np.uint8)


def grass_tile(rng: np.random.Generator, size: int = 512) -> np.ndarray:
    """Lawn: mottled green with thousands of short blades drawn with wrap-around. (size, size, 3) uint8."""
    base = _tint(fractal_noise(rng, size), (25, 80, 45), (70, 165, 110))
    n = size * size // 40
    xy = rng.random((n, 2)) * size
    ang = rng.normal(-np.pi / 2, 0.5, n)
    length = rng.uniform(3, 9, n)
    shade = rng.uniform(-45, 45, n)
    ends = xy + np.stack([np.cos(ang), np.sin(ang)], 1) * length[:, None]
    pad = 12
    for i in range(n):  # one-off texture synthesis, not a per-frame path
        colour = tuple(float(np.clip(c + shade[i], 0, 255)) for c in (40, 130, 80))
        xs = [0] + ([size] if xy[i, 0] < pad else []) + ([-size] if xy[i, 0] > size - pad else [])
        ys = [0] + ([size] if xy[i, 1] < pad else []) + ([-size] if xy[i, 1] > size - pad else [])
        for ox in xs:  # draw the copies a blade needs to wrap seamlessly
            for oy in ys:
                p1 = (int(xy[i, 0] + ox), int(xy[i, 1] + oy))
                p2 = (int(ends[i, 0] + ox), int(ends[i, 1] + oy))
                cv2.line(base, p1, p2, colour, 1, cv2.LINE_AA)
    return base


def pavement_tile(rng: np.random.Generator, size: int = 512, stones: int = 8) -> np.ndarray:
    """Paving stones with dark joints, per-stone colour and grain. (size, size, 3) uint8."""
    step = size // stones
    grain = fractal_noise(rng, size, (8, 32, 64, 128))
    shade = rng.uniform(-25, 25, (stones, stones)).astype(np.float32)
    per_px = np.kron(shade, np.ones((step, step), np.float32))
    warm = rng.uniform(-8, 8)
    img = np.stack(
        [
            150 + per_px + 60 * (grain - 0.5) - warm,
            155 + per_px + 60 * (grain - 0.5),
            160 + per_px + 60 * (grain - 0.5) + warm,
        ],
        -1,
    )
    img = np.clip(img, 0, 255).astype(np.uint8)
    for k in range(stones):
        cv2.line(img, (k * step, 0), (k * step, size), (70, 72, 75), 2)
        cv2.line(img, (0, k * step), (size, k * step), (70, 72, 75), 2)
    return img


def clothing_pattern(rng: np.random.Generator, kind: str, size: int = 64) -> np.ndarray:
    """A periodic brightness modulation for a garment.

    Args:
        kind: one of :data:`PATTERNS`.
        size: tile side in pixels (the renderer maps 1 tile pixel to 1 cm of the garment).

    Returns:
        (size, size) uint8 in about [120, 255] (multiplied onto the garment colour).
    """
    yy, xx = np.mgrid[0:size, 0:size]
    period = int(rng.choice([8, 16, 32]))
    grain = periodic_noise(rng, size, 16)
    if kind == "hstripes":
        base = ((yy // (period // 2)) % 2).astype(np.float32)
    elif kind == "vstripes":
        base = ((xx // (period // 2)) % 2).astype(np.float32)
    elif kind == "checks":
        base = (((xx // (period // 2)) + (yy // (period // 2))) % 2).astype(np.float32)
    elif kind == "dots":
        cy = (yy % period) - period / 2
        cx = (xx % period) - period / 2
        base = (np.hypot(cx, cy) < period / 4).astype(np.float32)
    elif kind == "mottled":
        base = periodic_noise(rng, size, 8)
    else:
        base = np.zeros((size, size), np.float32)
    out = 255 - 100 * base - 50 * grain
    return np.clip(out, 0, 255).astype(np.uint8)


def backdrop_band(rng: np.random.Generator, width: int, height: int, ground: str) -> np.ndarray:
    """What lies beyond the ground: sky plus buildings (pavement scenes) or trees and a hedge (grass scenes).

    The band is periodic in x (the panorama wraps it). Its bottom row meets the horizon.

    Returns:
        (height, width, 3) uint8.
    """
    t = np.linspace(0, 1, height, dtype=np.float32)[:, None]
    sky = _tint(np.broadcast_to(t, (height, width)).copy(), (235, 200, 170), (215, 215, 205))
    if ground == "grass":
        return _trees(rng, sky)
    return _buildings(rng, sky)


def _buildings(rng: np.random.Generator, img: np.ndarray) -> np.ndarray:
    height, width = img.shape[:2]
    x = 0
    grain = cv2.resize(fractal_noise(rng, 128, (8, 16, 32, 64)), (width, height))
    while x < width:
        w = int(rng.uniform(0.08, 0.2) * max(width, 400))
        top = int(rng.uniform(0.0, 0.55) * height)
        colour = rng.uniform(90, 210, 3)
        for ox in (0, -width):  # wrap the block that crosses the right edge
            cv2.rectangle(img, (x + ox, top), (x + ox + w, height), tuple(float(c) for c in colour), -1)
            win = max(4, w // 8)
            for wy in range(top + win, height - win, 2 * win):
                for wx in range(x + ox + win // 2, x + ox + w - win, 2 * win):
                    dark = tuple(float(c) * 0.45 for c in colour)
                    cv2.rectangle(img, (wx, wy), (wx + win, wy + int(win * 1.3)), dark, -1)
        x += w
    mod = (0.8 + 0.4 * grain)[..., None]
    return np.clip(img.astype(np.float32) * mod, 0, 255).astype(np.uint8)


def _trees(rng: np.random.Generator, img: np.ndarray) -> np.ndarray:
    height, width = img.shape[:2]
    n = max(8, width // 25)
    for _ in range(n):
        cx = int(rng.uniform(0, width))
        ry = int(rng.uniform(0.25, 0.6) * height)
        rx = int(ry * rng.uniform(0.5, 0.9))
        colour = (float(rng.uniform(20, 50)), float(rng.uniform(70, 120)), float(rng.uniform(30, 60)))
        for ox in (-width, 0, width):
            cv2.ellipse(img, (cx + ox, height), (rx, ry), 0, 180, 360, colour, -1)
    hedge_top = int(0.7 * height)
    cv2.rectangle(img, (0, hedge_top), (width, height), (30, 85, 40), -1)
    grain = cv2.resize(fractal_noise(rng, 128, (8, 16, 32, 64)), (width, height))
    leafy = img.astype(np.float32) * (0.65 + 0.7 * grain)[..., None]
    return np.clip(leafy, 0, 255).astype(np.uint8)
