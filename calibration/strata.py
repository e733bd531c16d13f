"""Stratify calibration rows by class and motion magnitude, and pick a balanced calibration set.

Motion bins are the tertiles of the rows' motion magnitude (``low`` / ``mid`` / ``high``); rows without a
motion value fall into ``n/a``. A stratum is ``(class, motion bin)``. :func:`select` keeps at most
``max_rows`` rows, giving every stratum an equal share (what a small stratum cannot use goes to the
others), with a fixed seed. :func:`small_strata` names the strata with fewer than ``min_rows`` rows (an
empty motion bin of a class that has rows counts, with 0 rows), and classes of the model absent from the
data entirely.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pairedge.calibration.samples import StageSamples

MOTION_BINS = ("low", "mid", "high")


@dataclass(frozen=True)
class Strata:
    """Stratum of every row.

    Attributes:
        cls: (N,) int64 class per row. motion_bin: (N,) int64 in 0..2, -1 without a motion value.
        edges: the two motion tertile edges (NaN when no row has motion).
    """

    cls: np.ndarray
    motion_bin: np.ndarray
    edges: tuple[float, float]

    def keys(self) -> np.ndarray:
        """(N,) int64 stratum key ``cls * 4 + (motion_bin + 1)``."""
        return self.cls * 4 + (self.motion_bin + 1)


def stratify(samples: StageSamples, edges: tuple[float, float] | None = None) -> Strata:
    """Strata of ``samples`` (motion tertiles of these rows unless ``edges`` is given)."""
    motion = samples.motion.astype(np.float64)
    known = np.isfinite(motion)
    if edges is None:
        edges = (
            tuple(float(v) for v in np.quantile(motion[known], [1 / 3, 2 / 3]))  # type: ignore[assignment]
            if known.any()
            else (float("nan"), float("nan"))
        )
    assert edges is not None
    bins = np.full(len(samples), -1, np.int64)
    if known.any():
        bins[known] = np.searchsorted(np.asarray(edges), motion[known], side="right")
    return Strata(samples.cls.astype(np.int64), bins, (float(edges[0]), float(edges[1])))


def stratum_name(key: int, labels: tuple[str, ...]) -> str:
    cls, motion = divmod(int(key), 4)
    return f"{labels[cls]}/{'n/a' if motion == 0 else MOTION_BINS[motion - 1]}"


def counts(samples: StageSamples, strata: Strata) -> dict[str, int]:
    """Stratum name -> rows, in class then motion order.

    Every motion bin (``low`` / ``mid`` / ``high``, when the edges are known) of a class with rows is listed,
    0 where empty, so a hole in the coverage shows; ``n/a`` is listed only where rows lack motion.
    """
    keys, n = np.unique(strata.keys(), return_counts=True)
    bins = (1, 2, 3) if np.isfinite(strata.edges).all() else ()
    found = dict.fromkeys((int(c) * 4 + b for c in np.unique(strata.cls) if c >= 0 for b in bins), 0)
    found.update({int(k): int(c) for k, c in zip(keys, n, strict=True)})
    return {stratum_name(k, samples.labels): found[k] for k in sorted(found)}


def select(samples: StageSamples, strata: Strata, max_rows: int, seed: int = 0) -> np.ndarray:
    """Sorted row indices of a stratified subset of at most ``max_rows`` rows (all rows when fewer)."""
    if len(samples) <= max_rows:
        return np.arange(len(samples))
    rng = np.random.default_rng(seed)
    keys = strata.keys()
    groups = {int(k): np.flatnonzero(keys == k) for k in np.unique(keys)}
    quota = dict.fromkeys(groups, 0)
    left = max_rows
    open_keys = sorted(groups)
    while left > 0 and open_keys:  # water-filling: equal shares, leftovers to the bigger strata
        share = max(1, left // len(open_keys))
        for k in list(open_keys):
            take = min(share, len(groups[k]) - quota[k], left)
            quota[k] += take
            left -= take
            if quota[k] >= len(groups[k]):
                open_keys.remove(k)
            if left == 0:
                break
    chosen = [rng.choice(groups[k], size=quota[k], replace=False) for k in sorted(groups) if quota[k]]
    return np.sort(np.concatenate(chosen))


def small_strata(samples: StageSamples, strata: Strata, min_rows: int) -> list[str]:
    """Warnings: strata under ``min_rows`` rows (empty bins too, see :func:`counts`), and absent classes."""
    found = counts(samples, strata)
    warnings = [
        f"stage {samples.stage}: stratum {name} has {n} sample(s) (< {min_rows})"
        for name, n in found.items()
        if n < min_rows
    ]
    present = set(np.unique(strata.cls).tolist())
    warnings += [
        f"stage {samples.stage}: class {name!r} has no calibration sample"
        for c, name in enumerate(samples.labels)
        if c not in present
    ]
    return warnings
