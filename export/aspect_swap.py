"""Stage-2 augmentation: some walking rows borrow a standing row's box aspects, so motion says "walking".

In the simulator a walker's box is wide (the stride: median width / height 0.44) and a standing person's
narrow (0.32), so a model trained on it reads box width as walking. Real annotated boxes do not follow that:
on PETS 2009 the walkers' boxes are 0.31-0.41 wide, like the standing people's, and the bundled model called
47 % of the truly walking pairs standing (``benchmarks/bench_label_ablation.py``). Giving a fraction of the
walking rows the aspects of a random standing row (both people's, from the same row) leaves walking people
with both narrow and wide boxes, so box width no longer separates walking from standing; standing (narrow)
and sitting (wide, still) keep their own aspects, so the sitting cue stays.

``pair_mean_width`` (the pair's mean box width over the image width) is rescaled with the new widths
(``aspect * height`` of each side), so the row stays one consistent pair of boxes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from pairedge.core.errors import InputError
from pairedge.core.io.featurefile import FeatureData

WALKING, STANDING = "walking_together", "standing_together"
#: Columns read or written (the ``pairedge`` spec's stage-2 names).
COLUMNS = ("a_aspect", "b_aspect", "a_height", "b_height", "pair_mean_width")


def borrow_standing_aspect(data: FeatureData, fraction: float, seed: int = 0) -> tuple[FeatureData, int]:
    """A copy of stage-2 ``data`` in which ``fraction`` of the walking rows (drawn with ``seed``) take the
    ``a_aspect`` / ``b_aspect`` of a standing row drawn at random; returns it and the number of rows changed.

    Args:
        data: stage-2 rows with the labels ``walking_together`` and ``standing_together`` and the
            :data:`COLUMNS`; X (N, F) is not modified.
        fraction: in [0, 1]; 0 returns ``data`` unchanged.
        seed: the draw of the rows and of their donors.
    """
    if not (0.0 <= fraction <= 1.0):
        raise InputError(f"aspect swap: expected a fraction in [0, 1], got {fraction}")
    names, labels = list(data.feature_names), list(data.labels)
    missing = [n for n in COLUMNS if n not in names] + [n for n in (WALKING, STANDING) if n not in labels]
    if missing:
        raise InputError(f"aspect swap: these stage-2 rows have no {', '.join(missing)}")
    walking = np.flatnonzero(data.y == labels.index(WALKING))
    standing = np.flatnonzero(data.y == labels.index(STANDING))
    if fraction == 0.0 or not len(walking) or not len(standing):
        return data, 0
    rng = np.random.default_rng(seed)
    rows = walking[rng.random(len(walking)) < fraction]
    donors = standing[rng.integers(len(standing), size=len(rows))]
    ia, ib, ha, hb, mw = (names.index(n) for n in COLUMNS)
    X = data.X.copy()
    width_before = X[rows, ia] * X[rows, ha] + X[rows, ib] * X[rows, hb]
    X[rows, ia], X[rows, ib] = X[donors, ia], X[donors, ib]
    width_after = X[rows, ia] * X[rows, ha] + X[rows, ib] * X[rows, hb]
    scale = np.where(width_before > 0, width_after / np.maximum(width_before, 1e-12), 1.0)
    X[rows, mw] *= scale.astype(X.dtype)
    return replace(data, X=X), len(rows)
