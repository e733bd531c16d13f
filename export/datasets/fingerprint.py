"""Reproducibility checks of feature data that hold across CPUs: value summaries compared with a tolerance.

``FeatureData.fingerprint()`` hashes the exact float32 bytes: it names one dataset, but the same code on
another CPU does not reproduce it. numpy's OpenBLAS picks a kernel per CPU at start-up (AVX2 ``Haswell``,
AVX-512 ``SkylakeX``, ...), and the kernels round sums in different orders, so a feature computed through a
least-squares fit or a matrix product differs in its last bits (measured on the bundled model's training
slice: every value within 5e-5 of its column's standard deviation, 23,246 of 103,819 stage-1 values not
bit-equal).

:func:`value_summary` records what a real change of the features would move and float noise cannot: the
shape, the class counts and the sequence ids exactly (integers and strings), and per column the mean,
standard deviation, minimum, maximum and five quantiles in float64. Each of these moves by at most the
largest change of any single value, so :func:`compare_summaries` can allow
:data:`RELATIVE_TOLERANCE` of a column's standard deviation (20 times the noise measured above) and still
see a formula change, a swapped or shifted column, a unit change or different rows.

:func:`blas_info` names the BLAS library and kernel, for the record (``recipe.json`` keeps it beside the
summary so a difference can be traced to a CPU).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
from pairedge.core.io.featurefile import FeatureData

#: Allowed difference of a column statistic, as a fraction of the recorded column standard deviation.
RELATIVE_TOLERANCE = 1e-3
#: Allowed difference for a constant column (standard deviation 0), in the feature's own units.
ABSOLUTE_TOLERANCE = 1e-6
#: The quantiles recorded per column.
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
_STATS = ("mean", "std", "min", "max", *(f"q{round(q * 100):02d}" for q in QUANTILES))


def value_summary(data: FeatureData) -> dict[str, Any]:
    """What :func:`compare_summaries` compares: exact shape / labels / groups, per-column statistics.

    Args:
        data: the rows (``X`` (N, F) float32, ``y`` (N,) int64, ``groups`` (N,) str).

    Returns:
        A JSON-ready dict: ``rows``, ``columns``, ``class_counts`` (C,), ``ids_sha256`` (y, groups, labels),
        and ``mean`` / ``std`` / ``min`` / ``max`` / ``q10`` ... ``q90``, each a list of F floats.
    """
    X = np.asarray(data.X, dtype=np.float64)
    ids = hashlib.sha256()
    ids.update(np.ascontiguousarray(data.y, dtype=np.int64).tobytes())
    ids.update("\x1f".join(data.groups.tolist()).encode())
    ids.update("\x1f".join(data.labels).encode())
    out: dict[str, Any] = {
        "rows": int(X.shape[0]),
        "columns": int(X.shape[1]),
        "class_counts": np.bincount(data.y, minlength=len(data.labels)).tolist(),
        "ids_sha256": ids.hexdigest(),
    }
    if X.shape[0] == 0:
        return {**out, **{name: [] for name in _STATS}}
    columns = {
        "mean": X.mean(0),
        "std": X.std(0),
        "min": X.min(0),
        "max": X.max(0),
        **{f"q{round(q * 100):02d}": np.quantile(X, q, axis=0) for q in QUANTILES},
    }
    return {**out, **{name: [float(f"{v:.10g}") for v in values] for name, values in columns.items()}}


def compare_summaries(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The differences between two :func:`value_summary` results that float noise cannot explain.

    Exact fields must be equal; a column statistic may differ by ``RELATIVE_TOLERANCE`` times the recorded
    column standard deviation plus ``ABSOLUTE_TOLERANCE``.

    Returns:
        One line per difference (empty when the data are the same up to float noise).
    """
    problems = [
        f"{key}: recorded {recorded.get(key)!r}, now {current.get(key)!r}"
        for key in ("rows", "columns", "class_counts", "ids_sha256")
        if recorded.get(key) != current.get(key)
    ]
    if problems:
        return problems
    scale = RELATIVE_TOLERANCE * np.asarray(recorded["std"], dtype=np.float64) + ABSOLUTE_TOLERANCE
    for name in _STATS:
        a = np.asarray(recorded[name], dtype=np.float64)
        b = np.asarray(current[name], dtype=np.float64)
        if a.shape != b.shape:
            problems.append(f"{name}: recorded {a.size} columns, now {b.size}")
            continue
        off = np.flatnonzero(~(np.abs(a - b) <= scale))
        for j in off[:5].tolist():
            problems.append(
                f"column {j} {name}: recorded {a[j]:.6g}, now {b[j]:.6g} (allowed +/- {scale[j]:.2g})"
            )
        if off.size > 5:
            problems.append(f"{name}: {off.size - 5} more columns differ")
    return problems


def blas_info() -> dict[str, str]:
    """numpy's BLAS: ``{"library", "version", "kernel"}`` (the CPU-specific kernel OpenBLAS chose), or
    ``"unknown"`` values where threadpoolctl is not installed to ask."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return {"library": "unknown", "version": "unknown", "kernel": "unknown"}
    blas = [e for e in threadpool_info() if e.get("user_api") == "blas"]
    blas.sort(key=lambda e: "numpy" not in str(e.get("filepath", "")))  # numpy's own library first
    for entry in blas:
        if entry:
            return {
                "library": str(entry.get("internal_api", "unknown")),
                "version": str(entry.get("version", "unknown")),
                "kernel": str(entry.get("architecture", "unknown")),
            }
    return {"library": "unknown", "version": "unknown", "kernel": "unknown"}
