"""Box shape as a posture cue: the fixed-ratio detector monitor and ``PipelineConfig.box_shape``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.core.features import get_spec
from pairedge.core.types import Detections
from pairedge.runtime import Pipeline, PipelineConfig
from pairedge.runtime.boxshape import AspectMonitor, neutral_columns
from rt_onnx_models import write_toy_model

SIZE = (768, 576)


def boxes(n: int, rng: np.random.Generator, aspect: float | None) -> np.ndarray:
    """(n, 4) boxes inside the image; width = ``aspect`` * height, or a person-like 0.25-0.6 when None."""
    h = rng.uniform(40, 160, n)
    ratio = np.full(n, aspect) if aspect is not None else rng.uniform(0.25, 0.6, n)
    x, y = rng.uniform(10, SIZE[0] - 200, n), rng.uniform(10, SIZE[1] - 200, n)
    return np.column_stack([x, y, ratio * h, h])


def test_a_fixed_ratio_detector_is_recognised_after_min_boxes() -> None:
    rng = np.random.default_rng(0)
    mon = AspectMonitor(min_boxes=50)
    changed = [mon.update(boxes(10, rng, 0.4407), SIZE) for _ in range(4)]
    assert not mon.fixed and not any(changed)  # 40 boxes: too few to judge
    assert mon.update(boxes(10, rng, 0.4407), SIZE) and mon.fixed
    assert mon.aspect == pytest.approx(0.4407)
    assert not mon.update(boxes(10, rng, 0.4407), SIZE)  # no change, no second report


def test_person_shaped_boxes_and_small_rounding() -> None:
    rng = np.random.default_rng(1)
    varied = AspectMonitor()
    varied.update(boxes(500, rng, None), SIZE)
    assert not varied.fixed and 0.3 < varied.aspect < 0.55
    rounded = AspectMonitor()  # pixel rounding of a fixed-ratio detector's boxes stays below the tolerance
    b = boxes(500, rng, 0.41)
    b[:, 2] = np.round(b[:, 2] * 100) / 100
    rounded.update(b, SIZE)
    assert rounded.fixed
    jittered = AspectMonitor()  # a 3 % shape jitter (the simulator's detector) is not fixed
    b[:, 2] *= np.exp(0.03 * rng.standard_normal(500))
    jittered.update(b, SIZE)
    assert not jittered.fixed


def test_boxes_cut_by_the_image_border_are_skipped() -> None:
    rng = np.random.default_rng(2)
    mon = AspectMonitor(min_boxes=50)
    b = boxes(200, rng, 0.44)
    b[:, 0] = 0.0  # clipped at the left edge: their shape is the clip's, not the detector's
    b[:, 2] *= rng.uniform(0.5, 1.0, 200)
    mon.update(b, SIZE)
    assert not mon.fixed and np.isnan(mon.aspect)
    mon.update(boxes(60, rng, 0.44), SIZE)
    assert mon.fixed


def test_the_ring_follows_a_change_of_detector_and_reset_forgets() -> None:
    rng = np.random.default_rng(3)
    mon = AspectMonitor(capacity=100, min_boxes=50)
    mon.update(boxes(100, rng, 0.5), SIZE)
    assert mon.fixed
    assert mon.update(boxes(100, rng, None), SIZE) and not mon.fixed  # the old boxes are overwritten
    mon.update(boxes(100, rng, 0.5), SIZE)
    mon.reset()
    assert not mon.fixed and np.isnan(mon.aspect)
    with pytest.raises(ValueError):
        AspectMonitor(capacity=10, min_boxes=50)


def test_neutral_columns_are_the_specs_box_shape_columns_at_the_training_mean() -> None:
    spec = get_spec("pairedge")
    names = spec.stage2_names
    means = np.arange(len(names), dtype=np.float64) / 10
    cols, values = neutral_columns(names, spec.box_shape_names, means)
    assert [names[c] for c in cols] == ["a_aspect", "b_aspect"]
    np.testing.assert_allclose(values, means[cols].astype(np.float32))
    assert len(neutral_columns(names, spec.box_shape_names, means[:-1])[0]) == 0  # means of another layout
    liang = get_spec("liang2026")
    assert [
        liang.stage2_names[c]
        for c in neutral_columns(liang.stage2_names, liang.box_shape_names, np.zeros(liang.stage2_dim))[0]
    ] == ["mean_aspect_ratio"]


def _folder(tmp_path: Path) -> tuple[Path, np.ndarray]:
    spec = get_spec("pairedge")
    mean = np.linspace(-1.0, 1.0, spec.stage2_dim)
    folder = tmp_path / "m"
    write_toy_model(
        folder / "stage1.onnx",
        stage=1,
        spec_name="pairedge",
        seed=1,
        thresholds={"p_interact": 0.0, "tau_group": 0.5},
        extra={"confirm_s": 0.0},
    )
    write_toy_model(
        folder / "stage2.onnx", stage=2, spec_name="pairedge", seed=2, norm_mean=tuple(float(v) for v in mean)
    )
    return folder, mean


def _run(folder: Path, config: PipelineConfig, aspect: float | None, frames: int = 12):
    """Stage-2 inputs seen by the pipeline (the toy stage 1 passes every pair) and the notes."""
    rng = np.random.default_rng(7)
    seen: list[np.ndarray] = []
    notes: list[str] = []
    with Pipeline.load(folder, flow="none", config=config) as pipe:
        infer = pipe.stage2.infer
        pipe.stage2.infer = lambda x: (seen.append(np.array(x)), infer(x))[1]  # type: ignore[method-assign]
        for k in range(frames):
            dets = Detections.from_arrays(boxes(6, rng, aspect), track_ids=np.arange(6))
            notes += pipe.step(None, dets, k / 10, image_size=SIZE).diagnostics.notes
        described = pipe.describe()["box_shape"]
    return seen, notes, described


def test_the_pipeline_sets_box_shape_to_the_training_mean_under_a_fixed_ratio_detector(
    tmp_path: Path,
) -> None:
    folder, mean = _folder(tmp_path)
    names = get_spec("pairedge").stage2_names
    cols = [names.index("a_aspect"), names.index("b_aspect")]
    seen, notes, described = _run(folder, PipelineConfig(), 0.44)
    assert len(seen) == 12
    # 6 boxes per frame: the monitor judges from frame 9 (54 boxes >= 50); before, the columns are the boxes'
    assert all(np.allclose(x[:, cols], 0.44, atol=1e-5) for x in seen[:8])
    assert all(np.allclose(x[:, cols], mean[cols].astype(np.float32)) for x in seen[8:])
    assert sum("one width/height ratio (0.440)" in n for n in notes) == 1
    assert "now ignored" in described
    off, notes_off, _ = _run(folder, PipelineConfig(box_shape="off"), 0.44)
    assert all(np.allclose(x[:, cols], 0.44, atol=1e-5) for x in off) and not notes_off
    varied, notes_varied, described = _run(folder, PipelineConfig(), None)
    assert not any(np.allclose(x[:, cols], mean[cols].astype(np.float32)) for x in varied)
    assert not notes_varied and described == "auto"
    ignored, _, _ = _run(folder, PipelineConfig(box_shape="ignore"), None)
    assert all(np.allclose(x[:, cols], mean[cols].astype(np.float32)) for x in ignored)
    for a, b in zip(ignored, varied, strict=True):  # same boxes: every other column is untouched
        np.testing.assert_array_equal(np.delete(a, cols, axis=1), np.delete(b, cols, axis=1))


def test_bad_box_shape_settings_are_refused() -> None:
    for bad in ("never", "", None, 1):
        with pytest.raises(InputError, match="box_shape"):
            PipelineConfig(box_shape=bad)  # type: ignore[arg-type]


def test_the_run_summary_says_when_box_shape_was_ignored(tmp_path: Path) -> None:
    from pairedge.runtime.runner.run import pipeline_notes

    folder, _ = _folder(tmp_path)
    rng = np.random.default_rng(8)
    for aspect, expected in ((0.44, True), (None, False)):
        with Pipeline.load(folder, flow="none") as pipe:
            for k in range(12):
                pipe.step(
                    None,
                    Detections.from_arrays(boxes(6, rng, aspect), track_ids=np.arange(6)),
                    k / 10,
                    image_size=SIZE,
                )
            notes = pipeline_notes(pipe)
            assert (pipe.fixed_ratio_detector is not None) == expected
            assert any("one width/height ratio (0.440" in n for n in notes) == expected
