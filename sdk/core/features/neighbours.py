"""Neighbour counts of the pair block: other people near each pair's midpoint, or continuing its line.

For every pair (A, B) and every other person, with positions rotated into the frame of the line A-B, centred
on the pair's midpoint and divided by the pair's mean height ``mh`` (so ``along`` / ``across`` are the
components along / across A->B):

* near: ``hypot(along, across) < NEAR``;
* inline: ``|across| < INLINE`` and ``half + 0.25 < |along| < half + 2`` where ``half`` = ``|AB| / mh / 2``
  (people continuing a queue beyond either end of the pair).

:func:`neighbours_reference` is the definition, in float64 complex arithmetic. :func:`neighbours` returns the
same counts, faster, by a *filter and exact fallback*:

1. ``along`` and ``across`` are affine in a person's position, so for all (person, pair) at once they are one
   matrix product ``[x, y, 1] @ coefficients`` in float32 (positions centred on the crowd first).
2. Every comparison is made twice, against the threshold shrunk and grown by a bound ``tol`` on the float32
   error (:func:`_tolerance`, the largest over the frame's pairs, so that thresholds are scalars): the shrunk
   test counts people who certainly pass, the grown one those who possibly pass. Squares replace ``hypot``
   and ``|across|``; ``|along| - half`` turns the per-pair range on ``|along|`` into a fixed one.
3. Pairs where the two counts differ (someone lies within ``tol`` of a boundary; rare) are recomputed with
   :func:`neighbours_reference`, so the result is the reference's, exactly.

Small frames (up to :data:`DIRECT_MAX` person-pair tests, about 30 people) use the reference directly: its
fewer numpy calls cost less than the filter's there.

The panorama case (horizontal differences wrap around, not affine) always uses the reference.
"""

from __future__ import annotations

import numpy as np
from pairedge.core.features.history import wrap_delta

EPS = 1e-6
NEAR = 1.5  # mean heights: radius around a pair's midpoint for the neighbour count
INLINE = 0.3  # mean heights: distance from the line A-B for the in-line count
DIRECT_MAX = 16384  # (pairs x people) up to which the definition itself is cheaper (~30 people; measured)
CHUNK = 1024  # pairs per block (keeps the (people, pairs) temporaries in cache)
REL_TOL = 1e-5  # float32 error bound per unit of term magnitude (> 10x the worst case; see _tolerance)


def _pair_frame(centre_a: np.ndarray, delta: np.ndarray, mean_h: np.ndarray):
    """Midpoints (M, 2), ``half`` (M,), ``apart`` (M,) bool (A and B not coincident), unit A->B (M, 2)."""
    dist = np.hypot(delta[:, 0], delta[:, 1])
    half = dist / mean_h / 2  # A and B lie at this distance from the midpoint
    apart = dist > EPS  # coincident centres: no line A-B, so nobody is in line
    return centre_a + delta / 2, half, apart, dist


def neighbours_reference(centre_a, delta, mean_h, centres, width: float | None) -> list[np.ndarray]:
    """Near and inline counts (M,) float64, excluding A and B; the definition (see the module docstring).

    Args:
        centre_a: (M, 2) centre of A in pixels; delta: (M, 2) centre B - centre A; mean_h: (M,) mean height.
        centres: (N, 2) everyone's box centre in pixels (A and B included).
        width: image width for a 360-degree panorama (horizontal differences wrap), else None.

    Complex positions rotated by ``conj(unit A->B) / mh``: "along" / "across" are real / imaginary parts.
    O(M N) in blocks of :data:`CHUNK` pairs.
    """
    m = len(delta)
    near, inline = np.zeros(m), np.zeros(m)
    people = centres[:, 0] + 1j * centres[:, 1]
    mid, half, apart, dist = _pair_frame(centre_a, delta, mean_h)
    mid_c = mid[:, 0] + 1j * mid[:, 1]
    unit = np.where(apart, delta[:, 0] - 1j * delta[:, 1], 1.0) / np.where(apart, dist, 1.0)
    rot = unit / mean_h  # conj(unit direction A->B) / mean height
    for lo in range(0, m, CHUNK):
        sl = slice(lo, lo + CHUNK)
        rel = people[None, :] - mid_c[sl, None]
        if width is not None:
            rel.real = wrap_delta(rel.real, width)
        rel *= rot[sl, None]
        h = half[sl, None]
        near[sl] = (np.abs(rel) < NEAR).sum(axis=1) - 2 * (half[sl] < NEAR)
        along, across = np.abs(rel.real), np.abs(rel.imag)
        inline[sl] = ((across < INLINE) & (along > h + 0.25) & (along < h + 2.0)).sum(axis=1) * apart[sl]
    return [near, inline]


def _tolerance(q: np.ndarray, mid: np.ndarray, mean_h: np.ndarray) -> np.ndarray:
    """(M,) bound on ``|along_float32 - along_reference|`` (and the same for ``across`` and for
    ``|along| - half``), in mean heights.

    The three terms of ``x * cx + y * cy + c`` sum to at most ``sqrt(2) K`` in size, ``K = (max |q| + |mid|)
    / mh``; float32 rounding of the inputs (3 ulp per product) and of the two sums adds at most ``5 sqrt(2)``
    ulp of ``K``, rounding ``half`` (``<= K``) and subtracting it 3 more: ~6e-7 K in all. The reference's
    float64 rounding is negligible. ``REL_TOL * (K + 1)`` leaves a margin of more than 10x.
    """
    # fmax skips NaN: a NaN position fails every comparison in both versions; inf makes tol inf (all exact)
    reach = np.fmax.reduce(np.sqrt((q**2).sum(axis=1)), initial=0.0) + np.hypot(mid[:, 0], mid[:, 1])
    return REL_TOL * (reach / mean_h + 1.0)


def _bounds(r: float, tol: float, square: bool = False) -> tuple[np.float32, np.float32]:
    """float32 ``(r - tol, r + tol)`` (squared with ``square``): ``x < r`` certainly below the first and
    possibly below the second, for an ``x`` within ``tol`` of the reference value."""
    lo, hi = max(r - tol, 0.0), r + tol
    return (np.float32(lo * lo), np.float32(hi * hi)) if square else (np.float32(lo), np.float32(hi))


def _count(mask: np.ndarray) -> np.ndarray:
    """(N, C) bool -> (C,) int64 column sums (uint8 rows summed in uint16 are much faster than bool sums)."""
    if len(mask) > np.iinfo(np.uint16).max:
        return mask.sum(axis=0)
    return np.add.reduce(mask.view(np.uint8), axis=0, dtype=np.uint16).astype(np.int64)


def neighbours(centre_a, delta, mean_h, centres, width: float | None) -> list[np.ndarray]:
    """The counts of :func:`neighbours_reference` (same arguments, identical results), by filter and exact
    fallback (see the module docstring)."""
    m = len(delta)
    if width is not None or m * len(centres) <= DIRECT_MAX:
        return neighbours_reference(centre_a, delta, mean_h, centres, width)
    near, inline = np.zeros(m), np.zeros(m)
    mid, half, apart, dist = _pair_frame(centre_a, delta, mean_h)
    finite = np.isfinite(centres).all(axis=1)
    origin = centres[finite].mean(axis=0) if finite.any() else np.zeros(2)
    q, mq = centres - origin, mid - origin
    ux = np.where(apart, delta[:, 0], 1.0) / np.where(apart, dist, 1.0) / mean_h
    uy = np.where(apart, delta[:, 1], 0.0) / np.where(apart, dist, 1.0) / mean_h
    # rows: along = x ux + y uy - mid . u ; across = y ux - x uy - (mid_y ux - mid_x uy)
    coef = np.stack([ux, uy, -(mq[:, 0] * ux + mq[:, 1] * uy), -uy, ux, mq[:, 0] * uy - mq[:, 1] * ux])
    coef = coef.astype(np.float32)
    points = np.column_stack([q, np.ones(len(q))]).astype(np.float32)  # (N, 3)
    tol = float(np.fmax.reduce(_tolerance(q, mq, mean_h), initial=0.0))  # one bound: scalar thresholds
    near_in, near_out = _bounds(NEAR, 2 * tol, square=True)  # hypot error <= sqrt(2) tol
    line_in, line_out = _bounds(INLINE, tol, square=True)
    start_out, start_in = _bounds(0.25, tol)  # beyond > 0.25: "certainly" needs the upper bound
    end_in, end_out = _bounds(2.0, tol)
    half32 = half.astype(np.float32)
    ambiguous = np.zeros(m, bool)
    for lo in range(0, m, CHUNK):
        sl = slice(lo, lo + CHUNK)
        beyond = points @ coef[0:3, sl]  # (N, chunk) float32 along, then |along| - half
        across2 = points @ coef[3:6, sl]
        np.square(across2, out=across2)
        d2 = np.square(beyond)
        d2 += across2
        np.abs(beyond, out=beyond)
        beyond -= half32[sl]
        near_sure, near_maybe = d2 < near_in, d2 < near_out
        sure = (across2 < line_in) & (beyond > start_in) & (beyond < end_in)
        maybe = (across2 < line_out) & (beyond > start_out) & (beyond < end_out)
        near[sl] = _count(near_sure) - 2 * (half[sl] < NEAR)
        inline[sl] = _count(sure) * apart[sl]
        ambiguous[sl] = _count((near_maybe ^ near_sure) | (maybe ^ sure)) > 0  # "sure" is within "maybe"
    if ambiguous.any():
        exact = neighbours_reference(centre_a[ambiguous], delta[ambiguous], mean_h[ambiguous], centres, None)
        near[ambiguous], inline[ambiguous] = exact
    return [near, inline]
