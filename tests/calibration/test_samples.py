"""Collection through the pipeline, stratification, and the sample checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cal_data import scene_samples
from pairedge.calibration.collect import parse_scenes
from pairedge.calibration.samples import StageSamples, check_stage
from pairedge.calibration.strata import counts, select, small_strata, stratify
from pairedge.core.errors import InputError


def _samples(n: int, classes: np.ndarray, motion: np.ndarray | None = None) -> StageSamples:
    rng = np.random.default_rng(0)
    return StageSamples(
        2,
        rng.normal(size=(n, 4)).astype(np.float32),
        classes.astype(np.int64),
        classes.astype(np.int64),
        (rng.random(n) if motion is None else motion).astype(np.float32),
        np.array([f"s{i % 3}" for i in range(n)]),
        ("a", "b", "c"),
    )


def test_parse_scenes() -> None:
    assert parse_scenes("static:0-2,moving:5") == [("static", (0, 1, 2)), ("moving", (5,))]
    assert parse_scenes("static:0-1,4") == [("static", (0, 1, 4))]
    for bad in ("", "0-3", "nosuchpreset:0"):
        with pytest.raises(InputError):
            parse_scenes(bad)


def test_scene_collection_follows_the_runtime_gate() -> None:
    c = scene_samples()
    s1, s2 = c.stage1, c.stage2
    assert len(s1) > len(s2) > 0
    assert s1.X.shape[1] == 31 and s2.X.shape[1] == 61  # the bundled model: pairedge spec v2
    assert set(np.unique(s1.truth)) <= {-1, 0, 1} and (s1.truth >= 0).any()
    assert (s2.truth >= 0).any() and np.isfinite(s2.motion).all()
    assert set(np.unique(s1.group)) == {"static-0", "moving-0"}


def test_stratified_selection_balances_classes() -> None:
    classes = np.array([0] * 900 + [1] * 90 + [2] * 10)
    st = _samples(1000, classes)
    strata = stratify(st)
    chosen = select(st, strata, max_rows=120)
    assert len(chosen) == 120 and len(np.unique(chosen)) == 120
    picked = np.bincount(classes[chosen], minlength=3)
    assert picked[2] == 10 and picked[1] >= 40  # small classes kept whole, the big one capped
    assert sum(counts(st, strata).values()) == 1000
    assert all(k.split("/")[1] in ("low", "mid", "high") for k in counts(st, strata))


def test_small_strata_and_missing_classes_are_reported() -> None:
    st = _samples(60, np.array([0] * 55 + [1] * 5))
    warnings = small_strata(st, stratify(st), min_rows=10)
    assert any("'c' has no calibration sample" in w for w in warnings)
    assert any("b/" in w for w in warnings)


def test_check_stage_rejects_bad_samples() -> None:
    with pytest.raises(InputError, match="zero calibration samples"):
        check_stage(_samples(0, np.zeros(0)), source="t")
    with pytest.raises(InputError, match="one class"):
        check_stage(_samples(10, np.zeros(10)), source="t")
    bad = _samples(10, np.arange(10) % 2)
    bad.X[3, 1] = np.inf
    with pytest.raises(InputError, match="NaN or inf"):
        check_stage(bad, source="t")
    check_stage(_samples(10, np.arange(10) % 2), source="t")


def test_video_with_detections_goes_through_the_run_readers(tmp_path: Path) -> None:
    from cal_data import model_dir
    from pairedge.calibration.collect import collect_video
    from pairedge.measure.sim.output import write_scene

    files = write_scene("static", seed=1, frames=30, out=tmp_path)
    video, dets = files.out / files.video, files.out / "det" / "tracked.txt"
    c = collect_video(model_dir(), video, dets, stride=1)
    assert len(c.stage1) > 0 and c.stage1.X.shape[1] == 31
    assert (c.stage1.truth == -1).all() and (c.stage2.truth == -1).all()  # no truth from a video
    assert c.sources == (video.name,)
