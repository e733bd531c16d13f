"""The pair block and the stage-1 / stage-2 rows of a frame, from the compiled kernel ``_pairkernel``.

The numpy code of :mod:`pairedge.core.features.pairblock` (with :mod:`~pairedge.core.features.neighbours` and
:func:`pairedge.core.features.orientation.frame_pair_values`) is the definition and the fallback; the kernel
(``_pairkernel.c``, built by ``pip install`` when a C compiler is present) computes the same float64 formulas
in one pass per pair and writes the finished float32 rows, which removes the per-frame cost of dozens of numpy
calls and the (pairs x people) temporaries of the neighbour counts. Values equal the numpy ones to float32
rounding (``tests/core/features/test_pairkernel.py``; ``benchmarks/bench_features_equal.py``); neighbour
counts are the reference's exactly (the kernel flags pairs whose counts depend on rounding and they are
recomputed here).

The kernel covers layouts 1 and 2 without panorama wrap; :func:`supports` says when.
``PAIREDGE_PAIR_KERNEL=numpy`` in the environment (read at import, :mod:`pairedge.core.features.compiled`)
forces the numpy path (benchmarks before / after, debugging); :func:`implementation` says which one a process
uses.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
from pairedge.core.features import compiled
from pairedge.core.features.neighbours import neighbours_reference
from pairedge.core.features.pairblock import EPS, HIST_VX, HIST_VY, SPEED, VX, VY, Scene

#: Columns of the per-person table the kernel reads, in its order (``_pairkernel.c``'s ``C_*``).
PERSON_COLUMNS = (
    "x",
    "y",
    "w",
    "h",
    "right",
    "bottom",
    "area",
    "cx",
    "cy",
    "vx",
    "vy",
    "speed",
    "px_vx",
    "px_vy",
    "hist_px_vx",
    "hist_px_vy",
    "facing_x",
    "facing_y",
    "facing_conf",
)
#: Per-frame parameters, in the kernel's order (``P_*``).
PARAMS = (
    "width",
    "height",
    "min_speed",
    "min_speed2",
    "scene_count",
    "scene_median_speed",
    "scene_moving_fraction",
    "crowd_vx",
    "crowd_vy",
    "crowd_norm",
    "orientation",
)
NEAR_COLUMN, INLINE_COLUMN = 23, 24  # the neighbour counts in the pair block
LAYOUT_COLUMNS = {25: False, 31: True}  # pair-block width -> with the orientation columns
CLAMP = 10.0


KERNEL = compiled.KERNEL  # the extension, or None (see pairedge.core.features.compiled)
if KERNEL is not None and (KERNEL.NCOL, KERNEL.NPARAM) != (len(PERSON_COLUMNS), len(PARAMS)):
    # a build whose table layout differs from this file's (its ABI should have said so): numpy is right
    KERNEL = None
implementation = compiled.implementation


def supports(pair_dim: int, wrap: bool, kernel: ModuleType | None = KERNEL) -> bool:
    """Whether the kernel computes a pair block of ``pair_dim`` columns (25: layout 1, 31: layout 2; not the
    context columns of layout 3) for a camera (``wrap`` False; a panorama's wrapped differences stay
    numpy)."""
    return kernel is not None and pair_dim in LAYOUT_COLUMNS and not wrap


def finish(x: np.ndarray) -> np.ndarray:
    """C-contiguous float32 copy with NaN -> 0 and everything clamped to [-10, 10] (+-inf -> +-10)."""
    out = x.astype(np.float32, order="C")
    np.maximum(out, -CLAMP, out=out)  # +-inf -> +-10; NaN stays NaN (cheaper than np.nan_to_num first)
    np.minimum(out, CLAMP, out=out)
    np.copyto(out, 0.0, where=np.isnan(out))
    return out


def person_table(
    boxes: np.ndarray, person: np.ndarray, facing: tuple[np.ndarray, np.ndarray] | None
) -> np.ndarray:
    """(N, len(PERSON_COLUMNS)) float64, C order: the per-person quantities of every pair value.

    Args:
        boxes: (N, 4) float64 ``x y w h``; person: (N, Fp) float64 person blocks (unclamped);
        facing: :func:`pairedge.core.features.orientation.person_orientation` of the N people, or None (layout
            1).
    """
    x, y, w, h = boxes.T
    v = person.T
    table = np.empty((len(PERSON_COLUMNS), len(boxes)))
    table[0], table[1], table[2], table[3] = x, y, w, h
    np.add(x, w, out=table[4])
    np.add(y, h, out=table[5])
    np.multiply(w, h, out=table[6])
    np.add(x, w / 2, out=table[7])
    np.add(y, h / 2, out=table[8])
    table[9], table[10], table[11] = v[VX], v[VY], v[SPEED]
    np.multiply(v[VX], h, out=table[12])
    np.multiply(v[VY], h, out=table[13])
    np.multiply(v[HIST_VX], h, out=table[14])
    np.multiply(v[HIST_VY], h, out=table[15])
    if facing is None:
        table[16:] = 0.0
    else:
        table[16:18] = facing[0].T
        table[18] = facing[1]
    return np.ascontiguousarray(table.T)


def pair_rows_compiled(
    boxes: np.ndarray,
    person: np.ndarray,
    facing: tuple[np.ndarray, np.ndarray] | None,
    ia: np.ndarray,
    ib: np.ndarray,
    size: tuple[float, float],
    scene: Scene,
    min_speed: float,
    pair_dim: int,
    kernel: ModuleType | None = KERNEL,
) -> tuple[np.ndarray, np.ndarray]:
    """Stage-1 rows (M, Fq) and stage-2 rows (M, 2 Fp + Fq), float32, finished, of the pairs ``(ia, ib)``:
    what the numpy path of :meth:`pairedge.core.features.edge.PairedgeExtractor.step` builds, by the kernel.

    Args:
        boxes: (N, 4) float64 ``x y w h``; person: (N, Fp) float64 person blocks (orientation values included
            for layout 2); facing: the people's facing (layout 2) or None (layout 1).
        ia, ib: (M,) int64 rows of A and B; size: image ``(W, H)``; scene: :func:`pairblock.scene_context`.
        pair_dim: Fq, 25 or 31 (:func:`supports`).
    """
    if not supports(pair_dim, False, kernel):
        raise ValueError(f"pair kernel: not available for a pair block of {pair_dim} columns")
    orientation = LAYOUT_COLUMNS[pair_dim]
    if orientation != (facing is not None):
        raise ValueError("pair kernel: the facing is given exactly for the orientation layout (31 columns)")
    boxes = np.ascontiguousarray(boxes, np.float64)
    person = np.ascontiguousarray(person, np.float64)
    n, fp = person.shape
    m = len(ia)
    ia = np.ascontiguousarray(ia, np.int64)
    ib = np.ascontiguousarray(ib, np.int64)
    cv = scene.crowd_velocity
    params = np.array(
        [
            size[0],
            size[1],
            min_speed,
            min_speed**2,
            *scene.values,
            cv[0],
            cv[1],
            np.hypot(cv[0], cv[1]),
            float(orientation),
        ],
        np.float64,
    )
    table = person_table(boxes, person, facing)
    person32 = finish(person)
    stage1 = np.empty((m, pair_dim), np.float32)
    stage2 = np.empty((m, 2 * fp + pair_dim), np.float32)
    ambiguous = np.empty(m, np.uint8)
    assert kernel is not None  # for type checkers: supports() said so
    if kernel.pair_block(table, ia, ib, params, person32, stage1, stage2, ambiguous, n, m, fp, pair_dim):
        _exact_counts(table, ia, ib, ambiguous.view(bool), stage1, stage2, 2 * fp)
    return stage1, stage2


def _exact_counts(table, ia, ib, ambiguous, stage1, stage2, offset: int) -> None:
    """Neighbour counts of the ``ambiguous`` pairs from :func:`neighbours_reference`, written into both
    rows."""
    cx, cy, h = table[:, 7], table[:, 8], table[:, 3]
    a, b = ia[ambiguous], ib[ambiguous]
    centre_a = np.stack([cx[a], cy[a]], axis=1)
    delta = np.stack([cx[b] - cx[a], cy[b] - cy[a]], axis=1)
    mean_h = np.maximum((h[a] + h[b]) / 2, EPS)
    near, inline = neighbours_reference(centre_a, delta, mean_h, np.stack([cx, cy], axis=1), None)
    counts = finish(np.stack([near, inline], axis=1))
    stage1[ambiguous, NEAR_COLUMN : INLINE_COLUMN + 1] = counts
    stage2[ambiguous, offset + NEAR_COLUMN : offset + INLINE_COLUMN + 1] = counts
