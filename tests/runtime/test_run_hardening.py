"""Issue 22, the streaming pipeline: one palette for every drawing, legible labels, groups of confirmed links
only, frames above the pixel ceiling dropped with their reason, link confirmation independent of the epoch."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pairedge.core import limits, palette
from pairedge.runtime import Diagnostics, FrameResult, Group
from pairedge.runtime.groups import groups_from_index
from pairedge.runtime.runner.output import annotate

LABELS = ("walking_together", "standing_together", "sitting_together")


def _result() -> FrameResult:
    return FrameResult(
        frame_index=0,
        timestamp=0.0,
        track_ids=np.array([3, 7], np.int64),
        boxes=np.array([[60, 60, 20, 50], [120, 62, 20, 50]], np.float32),
        pairs=np.array([[3, 7]], np.int64),
        p_interact=np.array([0.9], np.float32),
        interacting=np.array([True]),
        label_ids=np.array([1], np.int64),
        probs=np.array([[0.1, 0.8, 0.1]], np.float32),
        labels=LABELS,
        groups=(Group((3, 7), "standing_together", 1, 1.0),),
        timings_ms={"total": 1.0},
        diagnostics=Diagnostics(),
    )


# -- one palette, legible labels ----------------------------------------------------------------------------
def test_video_and_preview_take_label_colours_from_the_one_table(monkeypatch: pytest.MonkeyPatch) -> None:
    from pairedge.core.labels import SIM7
    from pairedge.measure.sim import Scene
    from pairedge.measure.sim.preview import draw_preview

    marker = (1, 2, 250)  # a colour nothing else draws
    frame = next(iter(Scene("static", 0).frames(1)))
    linked = {SIM7.classes[k] for k in frame.pair_labels.tolist()} - {"no_interaction"}
    assert linked, "the scene should have a drawn pair"
    for name in linked | {"standing_together"}:
        monkeypatch.setitem(palette.LABEL_COLOURS, name, marker)
    preview = draw_preview(frame)
    assert (preview.reshape(-1, 3) == marker).all(axis=1).any(), (
        "the preview does not use pairedge.core.palette"
    )
    canvas = annotate(np.full((240, 320, 3), 128, np.uint8), _result())
    assert (canvas.reshape(-1, 3) == marker).all(axis=1).any(), "the video does not use pairedge.core.palette"


def test_track_colours_are_shared() -> None:
    from pairedge.measure.sim.preview import id_colour
    from pairedge.runtime.runner.output import track_colour

    assert [track_colour(k) for k in range(20)] == [id_colour(k) for k in range(20)]
    assert [track_colour(k) for k in range(20)] == [palette.track_colour(k) for k in range(20)]


@pytest.mark.parametrize("background", [0, 255])
def test_label_text_sits_on_a_filled_box_of_contrasting_text(background: int) -> None:
    image = np.full((60, 200, 3), background, np.uint8)
    colour = (0, 230, 230)  # bright yellow: black text
    x0, y0, x1, y1 = palette.draw_label(image, "walking", (10, 30), colour)
    box = image[y0 : y1 + 1, x0 : x1 + 1].reshape(-1, 3)
    is_fill = (box == colour).all(axis=1)
    assert is_fill.mean() > 0.5  # the box is filled with the label colour
    assert (box == (0, 0, 0)).all(axis=1).any()  # and the text is black on it
    assert palette.text_colour((40, 40, 40)) == (255, 255, 255)
    outside = np.delete(image.reshape(60, 200, 3), slice(x0, x1 + 1), axis=1)
    assert (outside == background).all()  # nothing drawn outside the box


def test_video_legend_and_group_labels_have_background_boxes() -> None:
    canvas = annotate(np.full((240, 320, 3), 255, np.uint8), _result())  # a white (bright) scene
    for k, name in enumerate(LABELS):
        colour = palette.label_colour(name, k)
        hits = (canvas[150:, :160].reshape(-1, 3) == colour).all(axis=1).sum()
        assert hits > 100, f"legend entry {name} has no filled box"  # text alone would be a few dozen pixels


def test_unknown_labels_fall_back_to_the_index_cycle() -> None:
    assert palette.label_colour("queueing", 1) == palette.EXTRA_COLOURS[1]
    assert palette.label_colour(None, -1) == palette.NO_ACTIVITY
    assert palette.label_colours(LABELS) == tuple(palette.LABEL_COLOURS[n] for n in LABELS)


# -- groups: confirmed links only, None = no activity
# ---------------------------------------------------------
def test_no_group_from_pairs_without_a_confirmed_link() -> None:
    """Two people above tau_group but below the stage-1 gate (no label) used to form a group whose activity
    was '' in Python and null in JSON."""
    node_ids = np.array([4, 5, 6])
    index = np.array([[0, 1], [1, 2]])
    p = np.array([0.45, 0.9], np.float32)  # pair (4, 5) above tau_group=0.4 but never labelled
    label_ids = np.array([-1, 2])
    probs = np.eye(3, dtype=np.float32)[[0, 2]]
    groups = groups_from_index(index, node_ids, p, label_ids, probs, 0.4, LABELS)
    assert [(g.members, g.activity) for g in groups] == [((5, 6), "sitting_together")]
    assert groups_from_index(index, node_ids, p, np.array([-1, -1]), probs, 0.4, LABELS) == ()


def test_no_activity_is_none_in_python_and_null_in_json() -> None:
    result = dataclasses.replace(_result(), groups=(Group((3, 7), None, -1, 0.0),))
    assert result.to_json_dict()["groups"][0]["activity"] is None
    annotate(np.zeros((240, 320, 3), np.uint8), result)  # drawn as a grey "group", no crash


# -- frames above the pixel ceiling ------------------------------------------------------------------------
def test_validate_frame_refuses_frames_above_the_pixel_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    from pairedge.runtime.config import ValidationConfig
    from pairedge.runtime.validate import validate_frame

    monkeypatch.setattr(limits, "MAX_FRAME_PIXELS", 64 * 48 - 1)  # read at call time
    image, reason = validate_frame(np.zeros((48, 64, 3), np.uint8), ValidationConfig())
    assert image is None and reason is not None
    assert "64 x 48" in reason and "MAX_FRAME_PIXELS" in reason
    monkeypatch.setattr(limits, "MAX_FRAME_PIXELS", 64 * 48)
    assert validate_frame(np.zeros((48, 64, 3), np.uint8), ValidationConfig())[1] is None
    monkeypatch.setattr(limits, "MAX_FRAME_SIDE", 63)
    assert "MAX_FRAME_SIDE" in (validate_frame(np.zeros((48, 64), np.uint8), ValidationConfig())[1] or "")


def test_validate_frame_refuses_a_huge_view_before_copying_it() -> None:
    """A broadcast view claims 20,000 x 20,000 px with no memory behind it: refused on its declared shape."""
    import tracemalloc

    from pairedge.runtime.config import ValidationConfig
    from pairedge.runtime.validate import validate_frame

    huge = np.broadcast_to(np.zeros((1, 1, 3), np.uint8), (20_000, 20_000, 3))[:, ::-1]  # not contiguous
    tracemalloc.start()
    image, reason = validate_frame(huge, ValidationConfig())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert image is None and "20000 x 20000" in (reason or "")
    assert peak < 10_000_000  # no 1.2 GB contiguous copy


# -- link confirmation does not depend on where the clock starts ---------------------------------------------
def _toy_folder(tmp_path, **extra):  # noqa: ANN001, ANN202 - a test helper
    from rt_onnx_models import write_toy_model

    folder = tmp_path / "m"
    write_toy_model(folder / "stage1.onnx", stage=1, spec_name="pairedge", seed=1, extra=extra)
    write_toy_model(folder / "stage2.onnx", stage=2, spec_name="pairedge", seed=2)
    return folder


def _outcome(result: FrameResult) -> tuple:  # type: ignore[type-arg]
    inter = [(i.ids, i.label) for i in result.interactions]
    return result.frame_index, inter, [(g.members, g.activity) for g in result.groups], result.pairs.tolist()


@pytest.mark.parametrize(
    "fps, hold, flow",
    [(30.0, 0.3, "none"), (30.0, 0.5, "none"), (10.0, 0.7, "none"), (25.0, 0.2, "none"), (30.0, 0.3, "auto")],
)
def test_robot_epoch_timestamps_link_on_the_same_frames(
    tmp_path: Path, fps: float, hold: float, flow: str
) -> None:
    """A stream stamped like a robot (seconds since the epoch, ~1.7e9) gives the same results on every frame
    as the same frames stamped from 0: confirmation used to compare float epoch seconds, linking one frame
    later when ``t + hold`` rounded below the frame's stamp."""
    from pairedge.runtime import Pipeline, PipelineConfig
    from rt_scenes import scene

    folder = _toy_folder(tmp_path)
    frames = list(scene(people=4, frames=40, fps=fps, seed=3))
    config = PipelineConfig(tau_interact=0.0, tau_group=0.0, confirm_s=hold)
    runs = []
    for offset in (0.0, 1.7e9, 1_723_456_789.123):
        with Pipeline.load(folder, flow=flow, config=config) as pipe:
            image = (lambda f: f.image) if flow != "none" else (lambda f: None)
            runs.append(
                [
                    pipe.step(image(f), f.detections, f.timestamp + offset, image_size=(320, 240))
                    for f in frames
                ]
            )
    base = runs[0]
    assert any(r.interacting.any() for r in base) and not base[0].interacting.any()
    for other in runs[1:]:
        for a, b in zip(base, other, strict=True):
            assert _outcome(a) == _outcome(b)
            assert np.allclose(a.p_interact, b.p_interact, atol=1e-5)


def test_hold_comparison_tolerates_float_rounding_only() -> None:
    from pairedge.runtime.smoothing import HOLD_TOLERANCE_S, PairSmoother

    s = PairSmoother(3)
    pair = np.array([[1, 2]], np.int64)
    for t, expected in ((0.0, False), (0.3 - 2.4e-7, True)):  # an epoch stamp's rounding: still held
        s.smooth_interact(pair, np.full(1, 0.9, np.float32))
        assert s.confirm(np.array([True]), t, 0.3).tolist() == [expected]
    late = PairSmoother(3)
    for t, expected in ((0.0, False), (0.3 - 10 * HOLD_TOLERANCE_S, False)):  # a real shortfall: not held
        late.smooth_interact(pair, np.full(1, 0.9, np.float32))
        assert late.confirm(np.array([True]), t, 0.3).tolist() == [expected]


def test_pipeline_drops_a_frame_above_the_pixel_ceiling_with_its_reason(
    tmp_path: Path, monkeypatch: Any
) -> None:
    from pairedge.runtime import Pipeline
    from rt_scenes import scene

    frames = list(scene(people=3, frames=3, seed=2))
    with Pipeline.load(_toy_folder(tmp_path), flow="auto") as pipe:
        pipe.step(frames[0].image, frames[0].detections, 0.0)
        monkeypatch.setattr(limits, "MAX_FRAME_PIXELS", 1000)
        big = pipe.step(frames[1].image, frames[1].detections, 0.1)
        monkeypatch.undo()
        after = pipe.step(frames[2].image, frames[2].detections, 0.2)
    assert "MAX_FRAME_PIXELS" in (big.diagnostics.frame_dropped or "")
    assert big.diagnostics.stage_error is None and len(big.pairs) == 3  # the boxes are still scored
    assert after.diagnostics.frame_dropped is None


# -- the automatic operating point: printed and recorded where it switches
# ------------------------------------
def test_operating_point_switch_is_noted_and_marked_in_results(tmp_path) -> None:  # noqa: ANN001
    import json

    from pairedge.core.types import Detections
    from pairedge.measure.metrics.pairwise.files import read_pairwise_file
    from pairedge.runtime import Pipeline
    from pairedge.runtime.runner.output import JsonlWriter
    from pairedge.runtime.runner.run import pipeline_notes, run_stream
    from test_viewpoint import SIZE, pinhole_boxes

    points = {"surveillance": {"p_interact": 0.8, "confirm_s": 0.5, "min_camera_height": 1.3}}
    folder = _toy_folder(tmp_path, confirm_s=0.0, operating_points=points)
    rng = np.random.default_rng(5)
    boxes = [pinhole_boxes(6.0, 8, rng) for _ in range(40)]  # an elevated camera: switches after a few frames
    image = np.zeros((SIZE[1], SIZE[0], 3), np.uint8)  # gives the frame size (flow="none": no flow)
    items = [
        (k, image, Detections.from_arrays(b, track_ids=np.arange(8)), k / 10) for k, b in enumerate(boxes)
    ]
    with Pipeline.load(folder, flow="none") as pipe:
        header = pipe.describe_start()
        assert header["operating_point"].startswith("auto (starts at default")
        with JsonlWriter(tmp_path / "r.jsonl", pipe.labels, {"pipeline": header}) as jsonl:
            stats = run_stream(pipe, items, jsonl=jsonl)
        notes = pipeline_notes(pipe)
        summary = stats.summary(pipeline=pipe.describe())
    (switch,) = summary.operating_point_switches
    assert switch["operating_point"] == "surveillance" and (switch["p_interact"], switch["confirm_s"]) == (
        0.8,
        0.5,
    )
    assert f"operating point -> surveillance from frame {switch['frame']} (p_interact >= 0.8" in " ".join(
        notes
    )
    records = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()[1:]]
    marked = [r["frame"] for r in records if "operating_point" in r]
    assert marked == [switch["frame"]] and 0 < switch["frame"] < 40
    assert records[switch["frame"]]["operating_point"] == {
        "name": "surveillance",
        "p_interact": 0.8,
        "confirm_s": 0.5,
    }
    assert len(read_pairwise_file(tmp_path / "r.jsonl", LABELS).frames) == 40  # the scorer still reads it
    assert summary.to_dict()["operating_point_switches"] == [switch]
