"""Small strata: an empty motion bin of a class that has rows is a stratum of 0 rows (warned, listed,
strict)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cal_data import model_dir, scene_samples
from pairedge.calibration.api import CalibrateOptions, calibrate
from pairedge.calibration.collect import Collected
from pairedge.calibration.samples import StageSamples
from pairedge.calibration.strata import counts, small_strata, stratify
from pairedge.core.errors import InputError

# Motion 1..9: tertile edges (11/3, 19/3), so rows 1-3 are low, 4-6 mid, 7-9 high.
MOTION = np.arange(1, 10, dtype=np.float32)
FULL = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2])  # every class once per bin
HOLE = np.array([0, 1, 2, 0, 1, 0, 0, 1, 2])  # class 2 at motion 3 and 9 only: its mid bin is empty


def _samples(classes: np.ndarray, motion: np.ndarray) -> StageSamples:
    n = len(classes)
    return StageSamples(
        2,
        np.zeros((n, 4), np.float32),
        classes.astype(np.int64),
        classes.astype(np.int64),
        motion.astype(np.float32),
        np.full(n, "g"),
        ("a", "b", "c"),
    )


def test_empty_motion_bin_of_a_present_class_is_warned_and_listed() -> None:
    st = _samples(HOLE, MOTION)
    strata = stratify(st)
    assert strata.edges == pytest.approx((11 / 3, 19 / 3))
    assert counts(st, strata) == {
        "a/low": 1,
        "a/mid": 2,
        "a/high": 1,
        "b/low": 1,
        "b/mid": 1,
        "b/high": 1,
        "c/low": 1,
        "c/mid": 0,
        "c/high": 1,
    }
    assert small_strata(st, strata, min_rows=1) == ["stage 2: stratum c/mid has 0 sample(s) (< 1)"]
    assert "stage 2: stratum c/mid has 0 sample(s) (< 2)" in small_strata(st, strata, min_rows=2)


def test_fully_covered_strata_give_no_warning() -> None:
    st = _samples(FULL, MOTION)
    strata = stratify(st)
    assert list(counts(st, strata).values()) == [1] * 9
    assert small_strata(st, strata, min_rows=1) == []


def test_without_motion_only_the_na_bin_is_expected() -> None:
    st = _samples(FULL, np.full(9, np.nan))
    strata = stratify(st)
    assert counts(st, strata) == {"a/n/a": 3, "b/n/a": 3, "c/n/a": 3}  # no low/mid/high holes invented
    assert small_strata(st, strata, min_rows=3) == []


def test_absent_class_is_one_warning_not_three_empty_strata() -> None:
    st = _samples(np.array([0, 1, 0, 1, 0, 1, 0, 1, 0]), MOTION)
    assert small_strata(st, stratify(st), min_rows=1) == ["stage 2: class 'c' has no calibration sample"]


def _collected(stage2_classes: np.ndarray) -> Collected:
    """Real features of the bundled model, with hand-set classes and motion in one sequence.

    Nine calibration rows (motion 1..9) then three held-out rows (one sequence: its last quarter is held
    out). Stage 1: both classes in every motion bin. Stage 2: ``stage2_classes`` on the calibration rows.
    """
    scenes = scene_samples()

    def rows(st: StageSamples, classes: np.ndarray) -> StageSamples:
        cls = np.concatenate([classes, [0, 1, 1]]).astype(np.int64)
        motion = np.concatenate([MOTION, [5.0, 5.0, 5.0]]).astype(np.float32)
        return StageSamples(st.stage, st.X[:12], cls, cls, motion, np.full(12, "seq"), st.labels)

    stage1 = rows(scenes.stage1, np.array([0, 1, 0, 1, 0, 1, 0, 1, 0]))
    return Collected(stage1, rows(scenes.stage2, stage2_classes), ("hand-made",))


def _options(strict: bool) -> CalibrateOptions:
    return CalibrateOptions(strict=strict, min_per_stratum=1, target_agreement=None)


def test_strict_fails_on_an_empty_motion_bin(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"stratum sitting_together/mid has 0 sample\(s\) \(< 1\)$"):
        calibrate(model_dir(), out, _options(strict=True), collected=_collected(HOLE))
    assert not out.exists()


def test_report_lists_the_empty_stratum_with_0(tmp_path: Path) -> None:
    result = calibrate(model_dir(), tmp_path / "out", _options(strict=False), collected=_collected(HOLE))
    stage2 = json.loads((result.out / "calibration.json").read_text())["stages"]["stage2"]
    assert stage2["strata"]["collected"]["sitting_together/mid"] == 0
    assert stage2["strata"]["calibration"]["sitting_together/mid"] == 0
    assert stage2["warnings"] == ["stage 2: stratum sitting_together/mid has 0 sample(s) (< 1)"]
    assert "| sitting_together/mid | 0 | 0 |" in (result.out / "calibration.md").read_text()


def test_strict_passes_on_fully_covered_strata(tmp_path: Path) -> None:
    result = calibrate(model_dir(), tmp_path / "out", _options(strict=True), collected=_collected(FULL))
    assert result.warnings == []
    for st in result.report["stages"].values():
        assert 0 not in st["strata"]["collected"].values()
