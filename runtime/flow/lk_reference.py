"""Robust pyramidal dense Lucas-Kanade with candidate propagation: the numpy reference of the CUDA kernels.

The same algorithm runs as CUDA C kernels (``pairedge/runtime/flow/cuda/kernels/lk.cu``); every step here
is the kernels' step, on whole images at once, in float32 with the same operation order where it matters;
window sums are accumulated in float64 (here and there) and rounded to float32 once.

Per frame pair (``I0`` previous, ``I1`` current, uint8 (h, w)):

1. **Pyramid**: both images smoothed with the binomial kernel ``[1 4 6 4 1] / 16`` (separable, border
   replicated); each coarser level = the smoothed finer level decimated by 2 (size ``(h + 1) // 2``), while
   the level has at least ``2 * min_size`` rows and columns, up to ``levels`` levels.
2. Coarse to fine, per level: the flow is the coarser level's flow upsampled (bilinear, x2) or zero, then
3. **Propagation** (one round per entry of ``propagation``, distance ``d``): every pixel picks, among its own
   flow and the flows of the pixels ``d`` to its right, left, below and above (clamped), the one whose
   warped residual ``sum over the window (I1(q + f) - I0(q))^2`` is smallest (first one on ties) -- a
   parallel, GPU-friendly form of DIS / PatchMatch propagation that carries correct motion into regions
   where the coarse level averaged several motions.
4. **Robust Lucas-Kanade** (``iterations`` steps): residual ``r = I1(x + f) - I0(x)`` (bilinear, coordinates
   clamped to the image), weight ``w = 1 / (1 + (r / sigma)^2)`` (Cauchy), window sums (``(2 radius + 1)^2``,
   truncated at the border) of ``w Ix Ix, w Ix Iy, w Iy Iy, w Ix r, w Iy r`` with the central-difference
   gradients of ``I0``; the 2 x 2 system regularised by ``reg`` on the diagonal is solved in closed form and
   the step clipped to ``max_step`` pixels per component.
5. **Median**: 3 x 3 median of each flow component (border replicated).

The parameters were chosen on the MPI-Sintel *clean* pass alone (see ``docs/runtime.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from pairedge.core.errors import InputError


@dataclass(frozen=True)
class LKParams:
    """Parameters of the pyramidal robust LK flow (defaults: chosen on Sintel clean at half resolution).

    Attributes:
        levels: most pyramid levels (1 = no pyramid); min_size: coarsest level keeps >= this many rows/cols.
        radius: window half-size (window ``2 radius + 1`` square); iterations: LK steps per level.
        reg: added to the diagonal of the 2 x 2 system (grey levels^2); sigma: Cauchy scale of the residual.
        max_step: largest update per LK step and component (pixels of the level).
        propagation: one propagation round per entry, each the neighbour distance in pixels of the level.
    """

    levels: int = 7
    min_size: int = 4
    radius: int = 7
    iterations: int = 1
    reg: float = 50.0
    sigma: float = 10.0
    max_step: float = 1.0
    propagation: tuple[int, ...] = (4, 4)

    def __post_init__(self) -> None:
        ok = (
            1 <= self.levels <= 16
            and self.min_size >= 1
            and 0 <= self.radius <= 32
            and 0 <= self.iterations <= 64
            and self.reg > 0
            and self.sigma > 0
            and self.max_step > 0
            and all(1 <= int(d) <= 64 for d in self.propagation)
            and len(self.propagation) <= 8
        )
        if not ok:
            raise InputError(
                "LK flow params: expected 1 <= levels <= 16, min_size >= 1, 0 <= radius <= 32, "
                "0 <= iterations <= 64, reg > 0, sigma > 0, max_step > 0, at most 8 propagation distances "
                f"in [1, 64]; got {self}"
            )
        object.__setattr__(self, "propagation", tuple(int(d) for d in self.propagation))


# ---------------------------------------------------------------------------------------------- steps


def smooth(a: np.ndarray) -> np.ndarray:
    """Binomial ``[1 4 6 4 1] / 16`` blur, separable, border replicated: (h, w) float32 -> (h, w) float32."""
    h, w = a.shape
    p = np.pad(a, ((0, 0), (2, 2)), mode="edge")
    t = p[:, 0:w] + np.float32(4) * p[:, 1 : w + 1]
    t += np.float32(6) * p[:, 2 : w + 2]
    t += np.float32(4) * p[:, 3 : w + 3]
    t += p[:, 4 : w + 4]
    t *= np.float32(0.0625)
    p = np.pad(t, ((2, 2), (0, 0)), mode="edge")
    v = p[0:h] + np.float32(4) * p[1 : h + 1]
    v += np.float32(6) * p[2 : h + 2]
    v += np.float32(4) * p[3 : h + 3]
    v += p[4 : h + 4]
    v *= np.float32(0.0625)
    return v


def level_shapes(height: int, width: int, params: LKParams) -> list[tuple[int, int]]:
    """Finest-first (h, w) of the pyramid levels: halve (rounding up) while both sides >= 2 min_size."""
    shapes = [(int(height), int(width))]
    while len(shapes) < params.levels and min(shapes[-1]) >= 2 * params.min_size:
        h, w = shapes[-1]
        shapes.append(((h + 1) // 2, (w + 1) // 2))
    return shapes


def pyramid(image: np.ndarray, params: LKParams) -> list[np.ndarray]:
    """Finest-first list of (h_l, w_l) float32 levels (see the module docstring, step 1)."""
    levels = [smooth(image.astype(np.float32))]
    for _ in level_shapes(image.shape[0], image.shape[1], params)[1:]:
        levels.append(np.ascontiguousarray(smooth(levels[-1])[::2, ::2]))
    return levels


def gradients(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Central differences ``0.5 (a[x+1] - a[x-1])`` with the border replicated: two (h, w) float32."""
    p = np.pad(a, 1, mode="edge")
    half = np.float32(0.5)
    return half * (p[1:-1, 2:] - p[1:-1, :-2]), half * (p[2:, 1:-1] - p[:-2, 1:-1])


def box_sum(a: np.ndarray, r: int) -> np.ndarray:
    """Sum over the ``(2r + 1)^2`` window truncated at the border: (h, w) -> (h, w) float32.

    Accumulated in float64 (``cv2.boxFilter`` unnormalised, zero border = the truncated window), then rounded
    to float32 once, as the kernels do (``box_h`` / ``box_v`` in double).
    """
    k = 2 * r + 1
    out = cv2.boxFilter(a, cv2.CV_64F, (k, k), normalize=False, borderType=cv2.BORDER_CONSTANT)
    return out.astype(np.float32)


class Sampler:
    """Bilinear sampling of one image at ``(x + u, y + v)``, coordinates clamped to the image.

    The 2 x 2 neighbourhood of every pixel (right / lower neighbours clamped) is stored side by side, so a
    sample is one row gather; the arithmetic is the kernel's ``bilinear``.
    """

    def __init__(self, image: np.ndarray) -> None:
        self.image = image
        h, w = image.shape
        p = np.pad(image, ((0, 1), (0, 1)), mode="edge")
        self.quad = np.stack([p[:-1, :-1], p[:-1, 1:], p[1:, :-1], p[1:, 1:]], axis=-1).reshape(-1, 4)
        self.ys, self.xs = np.mgrid[0:h, 0:w].astype(np.float32)

    def __call__(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """(h, w) float32 ``I(clamp(x + u), clamp(y + v))``."""
        h, w = self.image.shape
        x = np.clip(self.xs + u, np.float32(0), np.float32(w - 1))
        y = np.clip(self.ys + v, np.float32(0), np.float32(h - 1))
        x0 = np.floor(x)
        y0 = np.floor(y)
        ax = x - x0
        ay = y - y0
        index = y0.astype(np.int64) * w + x0.astype(np.int64)
        q = self.quad.take(index.ravel(), axis=0).reshape(h, w, 4)
        one = np.float32(1)
        top = (one - ax) * q[..., 0] + ax * q[..., 1]
        bottom = (one - ax) * q[..., 2] + ax * q[..., 3]
        return (one - ay) * top + ay * bottom


def upsample(f: np.ndarray, h: int, w: int) -> np.ndarray:
    """Flow component of a coarser level to an (h, w) level: bilinear at ``(x + 0.5) / 2 - 0.5``, times 2."""
    hc, wc = f.shape
    half = np.float32(0.5)
    sx = np.clip((np.arange(w, dtype=np.float32) + half) * half - half, 0, wc - 1).astype(np.float32)
    sy = np.clip((np.arange(h, dtype=np.float32) + half) * half - half, 0, hc - 1).astype(np.float32)
    x0, y0 = np.floor(sx), np.floor(sy)
    ax, ay = (sx - x0)[None, :], (sy - y0)[:, None]
    i0, j0 = x0.astype(np.int64), y0.astype(np.int64)
    i1, j1 = np.minimum(i0 + 1, wc - 1), np.minimum(j0 + 1, hc - 1)
    one = np.float32(1)
    top = (one - ax) * f[j0][:, i0] + ax * f[j0][:, i1]
    bottom = (one - ax) * f[j1][:, i0] + ax * f[j1][:, i1]
    return np.float32(2) * ((one - ay) * top + ay * bottom)


def shifted(a: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """``a`` read at ``(y + dy, x + dx)`` with coordinates clamped: (h, w) -> (h, w)."""
    h, w = a.shape
    ys = np.clip(np.arange(h) + dy, 0, h - 1)
    xs = np.clip(np.arange(w) + dx, 0, w - 1)
    return a[ys][:, xs]


def median3(a: np.ndarray) -> np.ndarray:
    """3 x 3 median, border replicated: (h, w) float32 -> (h, w) float32 (``cv2.medianBlur``: a selection,
    exact, as the kernel's)."""
    return cv2.medianBlur(np.ascontiguousarray(a, np.float32), 3)


def candidate_offsets(d: int) -> tuple[tuple[int, int], ...]:
    """(dy, dx) of the propagation candidates, in the order ties are broken: self, right, left, below,
    above."""
    return ((0, 0), (0, d), (0, -d), (d, 0), (-d, 0))


def propagate(
    sample: Sampler, i0: np.ndarray, u: np.ndarray, v: np.ndarray, d: int, r: int
) -> tuple[np.ndarray, np.ndarray]:
    """One propagation round (module docstring, step 3): new (u, v)."""
    best_u, best_v, best = u, v, None
    for dy, dx in candidate_offsets(d):
        cu, cv = (u, v) if (dy, dx) == (0, 0) else (shifted(u, dy, dx), shifted(v, dy, dx))
        res = sample(cu, cv) - i0
        cost = box_sum(res * res, r)
        if best is None:
            best = cost
            continue
        better = cost < best
        best = np.where(better, cost, best)
        best_u = np.where(better, cu, best_u)
        best_v = np.where(better, cv, best_v)
    return best_u, best_v


def lk_step(
    sample: Sampler,
    i0: np.ndarray,
    ix: np.ndarray,
    iy: np.ndarray,
    u: np.ndarray,
    v: np.ndarray,
    p: LKParams,
) -> tuple[np.ndarray, np.ndarray]:
    """One robust Lucas-Kanade step (module docstring, step 4): new (u, v)."""
    res = sample(u, v) - i0
    e = res * np.float32(1.0 / p.sigma)
    wt = np.float32(1) / (np.float32(1) + e * e)
    gx, gy = wt * ix, wt * iy
    reg = np.float32(p.reg)
    a = box_sum(gx * ix, p.radius) + reg
    b = box_sum(gx * iy, p.radius)
    c = box_sum(gy * iy, p.radius) + reg
    bx = box_sum(gx * res, p.radius)
    by = box_sum(gy * res, p.radius)
    det = a * c - b * b
    m = np.float32(p.max_step)
    du = np.clip(-(c * bx - b * by) / det, -m, m)
    dv = np.clip(-(a * by - b * bx) / det, -m, m)
    return u + du, v + dv


def lk_flow(prev: np.ndarray, cur: np.ndarray, params: LKParams | None = None) -> np.ndarray:
    """Flow from ``prev`` to ``cur``.

    Args:
        prev, cur: (h, w) uint8 (or float32) images of the same shape, any size >= 1 x 1.

    Returns:
        (h, w, 2) float32 flow, x then y, in pixels.
    """
    p = params or LKParams()
    pa, pb = pyramid(prev, p), pyramid(cur, p)
    u = v = None
    for level in range(len(pa) - 1, -1, -1):
        i0, i1 = pa[level], pb[level]
        h, w = i0.shape
        if u is None or v is None:
            u = np.zeros((h, w), np.float32)
            v = np.zeros((h, w), np.float32)
        else:
            u, v = upsample(u, h, w), upsample(v, h, w)
        sample = Sampler(i1)
        for d in p.propagation:
            u, v = propagate(sample, i0, u, v, d, p.radius)
        ix, iy = gradients(i0)
        for _ in range(p.iterations):
            u, v = lk_step(sample, i0, ix, iy, u, v, p)
        u, v = median3(u), median3(v)
    assert u is not None and v is not None
    return np.stack([u, v], axis=2)
