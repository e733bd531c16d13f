"""bench_label_ablation.py: per-class label rates and the neutralising hook (the PETS run itself is a
benchmark)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_label_ablation as bench  # noqa: E402
from pairedge.core.features import get_spec  # noqa: E402
from pairedge.core.features.base import PairFeatures  # noqa: E402
from pairedge.runtime import boxshape  # noqa: E402


def test_per_class_rates_separate_labelling_from_linking():
    confusion = {
        "walking": {"walking_together": 9, "standing_together": 1},
        "standing": {"standing_together": 3},
    }
    rates = bench.per_class(confusion)
    assert rates["walking"]["n"] == 10 and rates["walking"]["walking_together"] == 0.9
    assert rates["standing"]["standing_together"] == 1.0 and rates["standing"]["walking_together"] == 0.0
    assert bench.per_class({})["walking"] == {"n": 0, **dict.fromkeys(bench.LABELS)}


def test_every_group_names_stage2_columns_and_the_hook_sets_them():
    names = get_spec("pairedge").stage2_names
    for columns in bench.GROUPS.values():
        assert set(columns) <= set(names)
    cols = np.array([names.index("a_hist_vx"), names.index("b_height")])
    original, patched = bench.neutralising(cols, np.array([7.0, -3.0], np.float32))
    assert original is boxshape.BoxShapePolicy.neutralise
    policy = boxshape.BoxShapePolicy("off", get_spec("pairedge"), [0.0] * len(names))
    f = PairFeatures(
        np.zeros((2, 2), np.int64),
        np.zeros((2, 2), np.int64),
        np.zeros((2, 31), np.float32),
        np.ones((2, len(names)), np.float32),
    )
    patched(policy, f)
    assert (f.stage2[:, cols] == [7.0, -3.0]).all() and (np.delete(f.stage2, cols, axis=1) == 1).all()
