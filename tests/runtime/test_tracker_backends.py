"""Tracker backends: names, the built-in default, the trackers-library adapters and camera-motion
compensation."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import InputError, MissingDependencyError
from pairedge.core.types import Detections
from pairedge.runtime import Pipeline, PipelineConfig
from pairedge.runtime.runner.run import RunOptions
from pairedge.runtime.tracker import IoUTracker, TrackerConfig
from pairedge.runtime.tracker_backends import (
    DEFAULT_TRACKER,
    TRACKER_NAMES,
    LibraryTracker,
    TrackerBackend,
    check_tracker_name,
    make_tracker,
)
from rt_onnx_models import write_toy_model

LIBRARY = ("bytetrack", "ocsort", "botsort")


def test_names_and_the_builtin_default() -> None:
    assert DEFAULT_TRACKER == "iou" and TRACKER_NAMES == ("iou", *LIBRARY)
    assert check_tracker_name(" ByteTrack ") == "bytetrack"
    for bad in ("sort", "", None, 3):
        with pytest.raises(InputError, match="tracker backend: expected one of iou, bytetrack"):
            check_tracker_name(bad)
    tracker = make_tracker("iou", TrackerConfig(coast_frames=0))
    assert isinstance(tracker, IoUTracker) and tracker.config.coast_frames == 0
    assert isinstance(tracker, TrackerBackend)


def test_pipeline_and_run_options_choose_the_backend() -> None:
    assert PipelineConfig().tracker == "iou"
    assert PipelineConfig(tracker="OCSORT").tracker == "ocsort"
    assert RunOptions().with_settings(tracker="botsort").pipeline_config().tracker == "botsort"
    with pytest.raises(InputError, match="tracker backend"):
        PipelineConfig(tracker="deepsort")


def test_tracker_names_the_tracker_and_tracking_says_when_it_runs() -> None:
    """One name per meaning: ``tracker`` is the backend everywhere (CLI, ROS, PipelineConfig, RunOptions);
    the mode is ``tracking``. The old spelling of the mode is refused with the new one in the message."""
    assert PipelineConfig(tracking="always").tracking == "always"
    assert RunOptions().with_settings(tracking="never").pipeline_config().tracking == "never"
    with pytest.raises(InputError, match=r"when it runs is tracking='always'"):
        PipelineConfig(tracker="always")
    with pytest.raises(InputError, match="tracking: expected one of auto, always, never"):
        PipelineConfig(tracking="iou")
    with pytest.raises(TypeError):
        PipelineConfig(tracker_backend="iou")  # type: ignore[call-arg]


def test_missing_library_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trackers", None)  # import trackers -> ImportError
    with pytest.raises(MissingDependencyError) as err:
        make_tracker("bytetrack")
    text = str(err.value)
    assert "pip install '.[trackers]'" in text and "--no-deps" in text and "\n" not in text
    assert isinstance(make_tracker("iou"), IoUTracker)  # the default needs nothing


def _walk(n: int, dx: float = 8.0) -> list[np.ndarray]:
    """Two people 300 px apart walking right ``dx`` px per frame: (2, 4) x y w h boxes per frame."""
    return [
        np.array([[50 + dx * k, 100, 40, 100], [350 + dx * k, 120, 40, 100]], np.float64) for k in range(n)
    ]


@pytest.mark.parametrize("name", LIBRARY)
def test_library_trackers_keep_two_walkers_apart(name: str) -> None:
    pytest.importorskip("trackers", reason="Roboflow's trackers library is not installed")
    tracker = make_tracker(name)
    assert isinstance(tracker, LibraryTracker) and isinstance(tracker, TrackerBackend)
    frames = [tracker.step(b, k / 10, np.array([0.9, 0.9])) for k, b in enumerate(_walk(12))]
    last = frames[-1]
    assert (last >= 1).all() and last[0] != last[1]
    confirmed = [f for f in frames if (f >= 1).all()]
    assert len(confirmed) >= 9 and all(f.tolist() == last.tolist() for f in confirmed)  # ids never change
    assert tracker.num_tracks == 2
    assert tracker.coasting(1.2)[0].size == 0  # the library trackers coast no one


def test_reset_keeps_ids_increasing_and_parameters_are_checked() -> None:
    pytest.importorskip("trackers", reason="Roboflow's trackers library is not installed")
    tracker = LibraryTracker("botsort", enable_cmc=False)  # BoT-SORT gives ids on the first frame
    assert not tracker.uses_frame
    first = tracker.step(_walk(1)[0], 0.0, np.array([0.9, 0.9]))
    assert sorted(first.tolist()) == [1, 2]
    tracker.reset()
    again = tracker.step(_walk(1)[0], 0.0, np.array([0.9, 0.9]))
    assert sorted(again.tolist()) == [3, 4]
    with pytest.raises(InputError, match="unknown parameter"):
        LibraryTracker("ocsort", max_age=3)
    with pytest.raises(InputError, match="built in"):
        LibraryTracker("iou")


def _panning(n: int, shift: int, gray: bool) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """A textured scene the camera pans over ``shift`` px per frame, with two standing people on it."""
    rng = np.random.default_rng(0)
    world = (rng.random((300, 1200)) * 255).astype(np.uint8)
    world = np.repeat(np.repeat(world[::4, ::4], 4, 0), 4, 1)  # 4 px blocks: trackable corners
    frames, boxes = [], []
    for k in range(n):
        view = np.ascontiguousarray(world[:, k * shift : k * shift + 640])
        frames.append(view if gray else np.dstack([view] * 3))
        boxes.append(np.array([[200 - k * shift, 80, 40, 100], [420 - k * shift, 90, 40, 100]], np.float64))
    return frames, boxes


@pytest.mark.parametrize("gray", [False, True])
def test_botsort_compensates_camera_motion(gray: bool) -> None:
    """A 30 px pan per frame leaves 40 px boxes at IoU 0.14 with their last position: without the image
    BoT-SORT (like any IoU tracker with no velocity yet) loses them; with it the affine motion keeps them.
    (In this scene a 45 px pan is beyond the sparse optical flow, with or without compensation.)"""
    pytest.importorskip("trackers", reason="Roboflow's trackers library is not installed")
    frames, boxes = _panning(6, 30, gray)
    scores = np.array([0.9, 0.9])
    with_cmc, without = make_tracker("botsort"), make_tracker("botsort")
    ids_cmc = [
        with_cmc.step(b, k / 10, scores, f) for k, (b, f) in enumerate(zip(boxes, frames, strict=True))
    ]
    ids_none = [without.step(b, k / 10, scores, None) for k, b in enumerate(boxes)]
    assert {tuple(i.tolist()) for i in ids_cmc} == {(1, 2)}
    # without: the people are lost at once; every later box starts a new track that never confirms
    assert ids_none[0].tolist() == [1, 2] and all(i.tolist() == [-1, -1] for i in ids_none[1:])


@pytest.mark.parametrize("name", ["bytetrack", "botsort"])
def test_pipeline_runs_a_library_tracker(tmp_path: Path, name: str) -> None:
    """PipelineConfig(tracker=...) gives the library's ids; boxes it has no id for yet are dropped and
    counted as the built-in tracker's suppressed ones are; the frame reaches BoT-SORT's compensation."""
    pytest.importorskip("trackers", reason="Roboflow's trackers library is not installed")
    folder = tmp_path / "m"
    write_toy_model(folder / "stage1.onnx", stage=1, spec_name="pairedge", seed=1)
    write_toy_model(folder / "stage2.onnx", stage=2, spec_name="pairedge", seed=2)
    cfg = PipelineConfig(features={"motion": "boxes"}, tracker=name)
    frames, boxes = _panning(5, 10, gray=False)
    with Pipeline.load(folder, config=cfg) as pipe:
        assert isinstance(pipe._tracker, LibraryTracker) and pipe._tracker.uses_frame == (name == "botsort")
        results = [
            pipe.step(f, Detections.from_arrays(b, None, np.full(2, 0.9)), k / 10)
            for k, (b, f) in enumerate(zip(boxes, frames, strict=True))
        ]
    assert sorted(results[-1].track_ids.tolist()) == [1, 2] and results[-1].pairs.tolist() == [[1, 2]]
    if name == "bytetrack":  # a new track gets its id on its second frame (minimum_consecutive_frames 2)
        assert len(results[0].track_ids) == 0
        assert dict(results[0].diagnostics.dropped) == {
            "suppressed by the tracker (duplicate or low score)": 2
        }


def test_duplicates_are_suppressed_before_the_library() -> None:
    """A raw detector's second box on one person (IoU 0.6 > nms_iou 0.35) gets -1 instead of a track of its
    own; with nms_iou None both reach the library and both get tracks."""
    pytest.importorskip("trackers", reason="Roboflow's trackers library is not installed")
    frames = [
        np.array([[50 + 8 * k, 100, 40, 100], [58 + 8 * k, 100, 40, 100], [350, 100, 40, 100]], np.float64)
        for k in range(6)
    ]
    scores = np.array([0.9, 0.8, 0.9])
    dedup, raw = make_tracker("botsort", TrackerConfig(nms_iou=0.35)), LibraryTracker("botsort", nms_iou=None)
    assert dedup.nms_iou == 0.35
    last = [dedup.step(b, k / 10, scores) for k, b in enumerate(frames)][-1]
    assert last[1] == -1 and last[0] >= 1 and last[2] >= 1
    both = [raw.step(b, k / 10, scores) for k, b in enumerate(frames)][-1]
    assert (both >= 1).all() and len(set(both.tolist())) == 3
    with pytest.raises(InputError, match="nms_iou"):
        LibraryTracker("botsort", nms_iou=1.5)
