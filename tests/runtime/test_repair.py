"""The pipeline's three named policies as units: input repair, the box-shape monitor, the operating point."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.core.features import PairFeatures, get_spec
from pairedge.core.types import Detections
from pairedge.runtime import PipelineConfig
from pairedge.runtime.boxshape import BoxShapePolicy
from pairedge.runtime.config import ValidationConfig
from pairedge.runtime.loading import find_models
from pairedge.runtime.operating_point import OperatingPointPolicy
from pairedge.runtime.repair import NOMINAL_DT, InputRepair
from rt_onnx_models import write_toy_model

SIZE = (768, 576)


def test_input_repair_counts_frames_repairs_the_clock_and_keeps_the_size() -> None:
    repair = InputRepair(ValidationConfig(), max_people=2)
    notes: list[str] = []
    assert repair.clock(None, 100.0, notes) == (0, 100.0, 0.0) and not notes
    index, t, elapsed = repair.clock(7.0, math.nan, notes)
    assert (index, t, elapsed) == (7, 100.0 + NOMINAL_DT, pytest.approx(NOMINAL_DT))
    assert notes == [f"timestamp nan is not finite; used {100.0 + NOMINAL_DT:.6f}"]
    index, _, _ = repair.clock("x", 101.0, notes)
    assert index == 2 and "frame_index 'x' is not a whole number; used 2" in notes
    repair.restart_clock(last_t=101.0)  # after a failed frame: a new origin, never backwards
    assert repair.clock(None, 100.5, notes)[1:] == (101.0 + NOMINAL_DT, 0.0)
    image, reason, size = repair.frame(None, (640, 480), None, True, notes)
    assert image is None and reason is None and size == (640, 480) == repair.image_size
    _, _, size = repair.frame(None, (0, 1), None, True, notes)
    assert size == (640, 480) and notes[-1].endswith("kept (640, 480)")
    _, reason, _ = repair.frame(None, None, "unreadable PNG", False, notes)
    assert reason == "unreadable PNG"
    boxes = np.array([[10, 10, 30, 60], [50, 10, 30, 60], [90, 10, 30, 60], [0, 0, np.nan, 1]], np.float32)
    dets, dropped = repair.detections(
        Detections(boxes, np.arange(4), np.array([0.9, 0.5, 0.8, 1.0], np.float32)), (640, 480)
    )
    assert dets.track_ids.tolist() == [0, 2]
    assert dropped == {"non-finite box or score": 1, "over max_people=2 (kept the most confident)": 1}


def _features(n: int, width: int) -> PairFeatures:
    pairs = np.zeros((n, 2), np.int64)
    return PairFeatures(pairs, pairs.copy(), np.ones((n, 3), np.float32), np.ones((n, width), np.float32))


def test_box_shape_policy_judges_gives_and_neutralises() -> None:
    spec = get_spec("pairedge")
    means = np.linspace(-1, 1, spec.stage2_dim)
    policy = BoxShapePolicy("auto", spec, means)
    cols = policy.columns
    assert [spec.stage2_names[c] for c in cols] == ["a_aspect", "b_aspect"] and not policy.ignored
    rng = np.random.default_rng(0)
    h = rng.uniform(40, 160, 60)
    fixed = np.column_stack([rng.uniform(10, 500, 60), rng.uniform(10, 300, 60), 0.44 * h, h])
    assert policy.observe(fixed[:30], SIZE) is None  # 30 boxes: too few to judge
    note = policy.observe(fixed[30:], SIZE)
    assert (
        note is not None
        and "(0.440)" in note
        and policy.ignored
        and policy.fixed_ratio == pytest.approx(0.44)
    )
    feats = _features(2, spec.stage2_dim)
    policy.neutralise(feats)
    np.testing.assert_array_equal(feats.stage2[:, cols], np.tile(means[cols].astype(np.float32), (2, 1)))
    assert feats.stage2[:, np.delete(np.arange(spec.stage2_dim), cols)].min() == 1.0
    policy.give(False, math.nan)  # a replay's verdict wins over the monitor's ...
    assert not policy.ignored and policy.fixed_ratio is None and policy.describe() == "auto"
    policy.observe(np.zeros((0, 4)), SIZE)  # ... for its frame only
    assert policy.ignored and policy.describe() == "auto (now ignored: fixed-ratio detector)"
    policy.reset()
    assert not policy.ignored and not policy.monitor.fixed  # type: ignore[union-attr]
    assert BoxShapePolicy("off", spec, means).monitor is None
    assert BoxShapePolicy("ignore", spec, means).ignored
    with pytest.raises(InputError, match="no box-shape columns"):
        BoxShapePolicy("ignore", spec, means[:-1])  # no means of the spec's layout


def _models(tmp_path: Path):
    folder = tmp_path / "m"
    points = {
        "surveillance": {"p_interact": 0.8, "confirm_s": 0.5, "min_camera_height": 1.3},
        "strict": {"p_interact": 0.9, "confirm_s": 1.0},
    }
    write_toy_model(
        folder / "stage1.onnx",
        stage=1,
        spec_name="pairedge",
        seed=1,
        extra={"confirm_s": 0.2, "operating_points": points},
    )
    write_toy_model(folder / "stage2.onnx", stage=2, spec_name="pairedge", seed=2)
    return find_models(folder)


def test_operating_point_policy_names_overrides_gives_and_resets(tmp_path: Path) -> None:
    models = _models(tmp_path)
    auto = OperatingPointPolicy(models, PipelineConfig())
    assert (auto.name, auto.current, auto.tau_interact, auto.confirm_s) == ("auto", "default", 0.5, 0.2)
    assert auto.describe() == "auto (now default)" and auto.describe_start().startswith(
        "auto (starts at default;"
    )
    auto.give(0.1, 0.0)
    auto.record(3)
    assert (auto.tau_interact, auto.confirm_s) == (
        0.1,
        0.0,
    ) and auto.switches.count == 0  # same point: no record
    auto.reset()
    assert (auto.tau_interact, auto.confirm_s) == (0.5, 0.2)
    strict = OperatingPointPolicy(models, PipelineConfig(operating_point="strict", confirm_s=0.0))
    assert (strict.name, strict.current, strict.tau_interact, strict.confirm_s) == ("strict", None, 0.9, 0.0)
    assert strict.observe(np.zeros((0, 4)), SIZE) is None and strict.describe_start() == "strict"
