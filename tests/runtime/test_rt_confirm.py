"""Link confirmation (``PipelineConfig.confirm_s``): a link is reported only after its gate held that long."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import InputError, ModelError
from pairedge.runtime import Pipeline, PipelineConfig, SmoothingConfig
from pairedge.runtime.smoothing import PairSmoother
from rt_onnx_models import write_toy_model
from rt_scenes import scene

AB, AC = [1, 2], [1, 3]


def _step(s: PairSmoother, pairs: list[list[int]], above: list[bool], t: float, hold: float) -> list[bool]:
    s.smooth_interact(np.array(pairs, np.int64).reshape(-1, 2), np.full(len(pairs), 0.9, np.float32))
    return s.confirm(np.array(above, bool), t, hold).tolist()


def test_a_link_is_confirmed_after_its_gate_held_for_hold_seconds() -> None:
    s = PairSmoother(3)
    assert _step(s, [AB], [True], 0.0, 0.5) == [False]
    assert _step(s, [AB], [True], 0.25, 0.5) == [False]
    assert _step(s, [AB], [True], 0.5, 0.5) == [True]  # exactly the hold time
    assert _step(s, [AB], [True], 0.75, 0.5) == [True]
    assert _step(s, [AB], [False], 1.0, 0.5) == [False]  # the gate closes: start again
    assert _step(s, [AB], [True], 1.25, 0.5) == [False]
    assert _step(s, [AB], [True], 1.75, 0.5) == [True]


def test_pairs_are_confirmed_independently_and_new_pairs_start_from_zero() -> None:
    s = PairSmoother(3)
    assert _step(s, [AB], [True], 0.0, 0.3) == [False]
    assert _step(s, [AB, AC], [True, True], 0.4, 0.3) == [True, False]  # merge path: AC is new
    assert _step(s, [AC, AB], [True, True], 0.8, 0.3) == [True, True]  # order within a frame is irrelevant


def test_a_pair_that_leaves_the_frame_starts_again_and_grace_frames_keep_it() -> None:
    s = PairSmoother(3, SmoothingConfig(grace_frames=0))
    _step(s, [AB], [True], 0.0, 0.3)
    _step(s, [AC], [True], 0.2, 0.3)  # AB missing one frame: evicted (grace 0)
    assert _step(s, [AB, AC], [True, True], 0.4, 0.3) == [False, False]
    kept = PairSmoother(3, SmoothingConfig(grace_frames=1))
    _step(kept, [AB], [True], 0.0, 0.3)
    _step(kept, [AC], [True], 0.2, 0.3)
    assert _step(kept, [AB, AC], [True, True], 0.4, 0.3) == [True, False]


def test_hold_zero_confirms_every_open_gate() -> None:
    s = PairSmoother(3)
    assert _step(s, [AB, AC], [True, False], 0.0, 0.0) == [True, False]


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf, 61.0, True, "1"])
def test_confirm_s_is_validated(bad: object) -> None:
    with pytest.raises(InputError, match="confirm_s"):
        PipelineConfig(confirm_s=bad)  # type: ignore[arg-type]


def _folder(tmp_path: Path, **extra: object) -> Path:
    folder = tmp_path / "m"
    write_toy_model(folder / "stage1.onnx", stage=1, spec_name="pairedge", seed=1, extra=extra)
    write_toy_model(folder / "stage2.onnx", stage=2, spec_name="pairedge", seed=2)
    return folder


def test_the_pipeline_reports_and_groups_links_only_once_confirmed(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    frames = list(scene(people=3, frames=6, fps=10.0, seed=1))  # t = 0.0, 0.1, ..., 0.5
    config = PipelineConfig(tau_interact=0.0, tau_group=0.0, confirm_s=0.25)  # every pair passes the gate
    with Pipeline.load(folder, flow="none", config=config) as pipe:
        assert pipe.confirm_s == 0.25 and pipe.describe()["confirm_s"] == 0.25
        results = [pipe.step(None, f.detections, f.timestamp, image_size=(320, 240)) for f in frames]
    for f, r in zip(frames, results, strict=True):
        held = f.timestamp >= 0.25 - 1e-9
        assert r.interacting.tolist() == [held] * 3
        assert (r.label_ids >= 0).tolist() == [held] * 3
        assert len(r.groups) == (1 if held else 0)
    with Pipeline.load(folder, flow="none", config=PipelineConfig(tau_interact=0.0, tau_group=0.0)) as pipe:
        assert pipe.confirm_s == 0.0  # the toy model declares none
        first = pipe.step(None, frames[0].detections, 0.0, image_size=(320, 240))
    assert first.interacting.all() and len(first.groups) == 1


def test_the_model_metadata_sets_confirm_s_and_bad_values_are_refused(tmp_path: Path) -> None:
    with Pipeline.load(_folder(tmp_path / "a", confirm_s=0.4), flow="none") as pipe:
        assert pipe.confirm_s == pytest.approx(0.4)
    with Pipeline.load(
        _folder(tmp_path / "b", confirm_s=0.4), flow="none", config=PipelineConfig(confirm_s=0.0)
    ) as pipe:
        assert pipe.confirm_s == 0.0  # the config wins
    for bad in ("soon", -1, 1e9):
        with pytest.raises(ModelError, match="confirm_s"):
            Pipeline.load(_folder(tmp_path / f"bad{bad}", confirm_s=bad), flow="none")


def test_named_operating_points_set_the_threshold_and_confirm_s(tmp_path: Path) -> None:
    points = {"surveillance": {"p_interact": 0.7, "confirm_s": 1.0}}
    folder = _folder(tmp_path, confirm_s=0.2, operating_points=points)
    with Pipeline.load(folder, flow="none") as pipe:
        assert (pipe.operating_point, pipe.tau_interact, pipe.confirm_s) == (
            "default",
            0.5,
            0.2,
        )  # no auto points
    config = PipelineConfig(operating_point="surveillance")
    with Pipeline.load(folder, flow="none", config=config) as pipe:
        assert (pipe.tau_interact, pipe.confirm_s) == (0.7, 1.0)
        assert pipe.describe()["operating_point"] == "surveillance"
    config = PipelineConfig(operating_point="surveillance", tau_interact=0.6, confirm_s=0.0)
    with Pipeline.load(folder, flow="none", config=config) as pipe:
        assert (pipe.tau_interact, pipe.confirm_s) == (0.6, 0.0)  # explicit values win
    with pytest.raises(ModelError, match="no operating point 'indoor'.*surveillance"):
        Pipeline.load(folder, flow="none", config=PipelineConfig(operating_point="indoor"))
    bad = _folder(tmp_path / "bad", operating_points={"surveillance": {"p_interact": 2.0}})
    with pytest.raises(ModelError, match="operating point 'surveillance'.*p_interact"):
        Pipeline.load(bad, flow="none", config=PipelineConfig(operating_point="surveillance"))
    with pytest.raises(InputError, match="operating_point"):
        PipelineConfig(operating_point=3)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="operating_point"):
        PipelineConfig(operating_point=" ")
