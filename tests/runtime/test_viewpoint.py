"""Camera height from boxes (``runtime.viewpoint``) and ``operating_point="auto"``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import ModelError
from pairedge.core.types import Detections
from pairedge.runtime import Pipeline, PipelineConfig
from pairedge.runtime.viewpoint import AutoOperatingPoint, ElevationEstimator
from rt_onnx_models import write_toy_model

SIZE = (768, 576)


def pinhole_boxes(
    camera_m: float, n: int, rng: np.random.Generator, horizon: float = 100.0, f: float = 700.0
) -> np.ndarray:
    """(n, 4) boxes of 1.75 m people at random depths seen by a level pinhole camera ``camera_m`` high."""
    depth = rng.uniform(6.0, 30.0, n)
    h = f * 1.75 / depth
    bottom = horizon + f * camera_m / depth
    x = rng.uniform(0, SIZE[0] - 60, n)
    return np.column_stack([x, bottom - h, 0.4 * h, h])


@pytest.mark.parametrize("camera_m", [0.6, 1.2, 3.0, 7.0])
def test_the_camera_height_is_recovered_from_exact_boxes(camera_m: float) -> None:
    rng = np.random.default_rng(0)
    est = ElevationEstimator()
    boxes = pinhole_boxes(camera_m, 300, rng)
    inside = (boxes[:, 1] > 6) & (boxes[:, 1] + boxes[:, 3] < SIZE[1] - 6)
    est.update(boxes, SIZE)
    got = est.estimate()
    assert got.known and got.boxes == inside.sum()
    assert got.body_heights == pytest.approx(camera_m / 1.75, rel=1e-6)
    assert got.horizon_row == pytest.approx(100.0, abs=1e-4)


def test_sitting_people_and_noise_are_trimmed() -> None:
    rng = np.random.default_rng(1)
    boxes = pinhole_boxes(5.0, 400, rng)
    boxes[:, 1:] += rng.normal(0, 0.5, (400, 3))
    sitting = boxes[:60].copy()
    sitting[:, 1] += 0.35 * sitting[:, 3]  # shorter boxes, same feet
    sitting[:, 3] *= 0.65
    est = ElevationEstimator()
    est.update(np.vstack([boxes, sitting]), SIZE)
    assert est.estimate().body_heights == pytest.approx(5.0 / 1.75, rel=0.1)


def test_no_estimate_without_enough_boxes_or_depths() -> None:
    est = ElevationEstimator(min_boxes=60)
    rng = np.random.default_rng(2)
    est.update(pinhole_boxes(3.0, 30, rng), SIZE)
    assert not est.estimate().known
    same_depth = np.tile([[100.0, 200.0, 40.0, 100.0]], (100, 1))
    flat = ElevationEstimator()
    flat.update(same_depth, SIZE)
    assert not flat.estimate().known  # one depth says nothing about the camera height
    cut = ElevationEstimator()
    cut.update(np.tile([[100.0, 476.0, 40.0, 100.0]], (100, 1)), SIZE)  # every box cut by the bottom edge
    assert not cut.estimate().known and cut._count == 0


def test_the_ring_keeps_the_latest_boxes_only() -> None:
    est = ElevationEstimator(capacity=128, min_boxes=60)
    rng = np.random.default_rng(3)
    for _ in range(20):
        est.update(pinhole_boxes(0.8, 40, rng), SIZE)
    for _ in range(4):
        est.update(pinhole_boxes(6.0, 40, rng), SIZE)  # the camera moved up: the old boxes age out
    assert est.estimate().body_heights == pytest.approx(6.0 / 1.75, rel=0.05)


def test_auto_switches_with_hysteresis() -> None:
    main = {"p_interact": 0.5, "confirm_s": 0.2}
    auto = AutoOperatingPoint(
        main, {"high": {"p_interact": 0.7, "confirm_s": 0.4, "min_camera_height": 1.3}}, every=1
    )
    rng = np.random.default_rng(4)
    assert auto.observe(pinhole_boxes(5.0, 10, rng), SIZE) is None  # not enough boxes yet
    notes = [auto.observe(pinhole_boxes(5.0, 10, rng), SIZE) for _ in range(10)]
    assert sum(n is not None for n in notes) == 1 and "operating point -> high" in next(n for n in notes if n)
    assert auto.name == "high" and auto.current["p_interact"] == 0.7
    auto.estimator.reset()
    for _ in range(10):
        auto.observe(pinhole_boxes(2.0, 10, rng), SIZE)  # 1.14 body heights: within the hysteresis band
    assert auto.name == "high"
    auto.estimator.reset()
    for _ in range(10):
        auto.observe(pinhole_boxes(1.0, 10, rng), SIZE)
    assert auto.name == "default" and auto.current == main
    auto.reset()
    assert auto.name == "default"


def _folder(tmp_path: Path, points: dict) -> Path:
    folder = tmp_path / "m"
    write_toy_model(
        folder / "stage1.onnx",
        stage=1,
        spec_name="pairedge",
        seed=1,
        extra={"confirm_s": 0.0, "operating_points": points},
    )
    write_toy_model(folder / "stage2.onnx", stage=2, spec_name="pairedge", seed=2)
    return folder


def test_the_pipeline_switches_to_the_elevated_point_on_an_elevated_camera(tmp_path: Path) -> None:
    points = {"surveillance": {"p_interact": 0.8, "confirm_s": 0.5, "min_camera_height": 1.3}}
    folder = _folder(tmp_path, points)
    rng = np.random.default_rng(5)
    with Pipeline.load(folder, flow="none") as pipe:
        assert pipe.operating_point == "auto" and pipe.tau_interact == 0.5
        notes = []
        for k in range(30):
            dets = Detections.from_arrays(pinhole_boxes(6.0, 8, rng), track_ids=np.arange(8))
            notes += pipe.step(None, dets, k / 10, image_size=SIZE).diagnostics.notes
        assert (pipe.tau_interact, pipe.confirm_s) == (0.8, 0.5)
        assert "now surveillance" in pipe.describe()["operating_point"]
        assert sum("operating point -> surveillance" in n for n in notes) == 1
        pipe.reset()
        assert pipe.tau_interact == 0.5
    low = Pipeline.load(folder, flow="none")
    with low:
        for k in range(30):
            dets = Detections.from_arrays(pinhole_boxes(1.0, 8, rng), track_ids=np.arange(8))
            low.step(None, dets, k / 10, image_size=SIZE)
        assert low.tau_interact == 0.5  # a robot-height camera keeps the main point
    with Pipeline.load(folder, flow="none", config=PipelineConfig(operating_point="default")) as fixed:
        for k in range(30):
            dets = Detections.from_arrays(pinhole_boxes(6.0, 8, rng), track_ids=np.arange(8))
            fixed.step(None, dets, k / 10, image_size=SIZE)
        assert fixed.tau_interact == 0.5 and fixed.operating_point == "default"


def test_a_bad_min_camera_height_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"s": {"p_interact": 0.8, "confirm_s": 0.5, "min_camera_height": -1}})
    with pytest.raises(ModelError, match="min_camera_height"):
        Pipeline.load(folder, flow="none")
