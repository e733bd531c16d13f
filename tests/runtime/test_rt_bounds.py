"""Regression tests of issue 9: inputs that made ``Pipeline.step`` raise, non-finite model outputs, and the
bound on the work per frame (``PipelineConfig.max_people``). Timings live in ``benchmarks/bench_soak.py``."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnx
import pytest
from pairedge.core.errors import FormatError, InputError
from pairedge.core.types import Detections
from pairedge.runtime import FlowConfig, Pipeline, PipelineConfig
from pairedge.runtime.flow import FlowStream, get_flow_backend
from pairedge.runtime.runner.inputs import FrameSource, iso_bmff_problem, read_detections
from pairedge.runtime.runner.stats import MAX_REASONS, RunStats
from pairedge.runtime.validate import cap_people
from rt_onnx_models import toy_metadata, toy_proto, toy_weights, write_toy_model
from rt_scenes import scene


def _models(tmp_path: Path, spec: str = "pairedge", **stage1: object) -> Path:
    folder = tmp_path / spec
    write_toy_model(folder / "stage1.onnx", stage=1, spec_name=spec, seed=1, **stage1)
    write_toy_model(folder / "stage2.onnx", stage=2, spec_name=spec, seed=2)
    return folder


def _two_people() -> Detections:
    return Detections.from_arrays(np.array([[1, 1, 5, 8], [8, 2, 5, 8]], np.float32), np.array([1, 2]))


@pytest.fixture
def pipe(tmp_path: Path) -> Any:
    with Pipeline.load(_models(tmp_path), flow="dis") as p:
        yield p


def test_consecutive_tiny_frames_give_no_flow_with_the_reason(pipe: Pipeline) -> None:
    image = np.full((20, 20, 3), 90, np.uint8)
    for t in (0.0, 0.1, 0.2):
        result = pipe.step(image, _two_people(), t)
        assert any("below the 12 px per side" in n for n in result.diagnostics.notes)
        assert result.diagnostics.stage_error is None and len(result.track_ids) == 2
    frames = list(scene(people=3, frames=2))  # the flow comes back at a usable size
    pipe.step(frames[0].image, frames[0].detections, 1.0)
    assert pipe.step(frames[1].image, frames[1].detections, 1.1).diagnostics.notes == ()


@pytest.mark.parametrize("spec", ["pairedge", "liang2026"])
def test_a_tiny_flow_scale_never_raises(tmp_path: Path, spec: str) -> None:
    config = PipelineConfig(flow=FlowConfig(scale=0.01))
    with Pipeline.load(_models(tmp_path, spec), flow="dis", config=config) as pipe:
        for f in scene(people=3, frames=3):
            result = pipe.step(f.image, f.detections, f.timestamp)
            assert "3x2 px" in result.diagnostics.notes[0] and len(result.pairs) == 3


def test_flow_backend_refuses_and_stream_reports_too_small_frames() -> None:
    backend = get_flow_backend("dis", preset="ultrafast", scale=0.5)
    small = np.zeros((20, 20), np.uint8)
    assert backend.size_problem(20, 20) is not None and backend.size_problem(24, 24) is None
    with pytest.raises(InputError, match="at least 12 px"):
        backend.compute(small, small)
    stream = FlowStream(backend)
    assert stream.push(small) is None and stream.push(small) is None
    assert stream.reason is not None and "10x10 px" in stream.reason


class _Raising:
    """A detections-like object whose attribute access raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    @property
    def boxes(self) -> np.ndarray:
        raise self.error


class _BadArray:
    def __array__(self, *args: object, **kwargs: object) -> np.ndarray:
        raise KeyError("no array here")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"timestamp": 10**400},
        {"timestamp": "soon"},
        {"timestamp": float("nan")},
        {"frame_index": "abc"},
        {"frame_index": 2.5},
        {"frame_index": [1]},
        {"image_size": ("a", 3)},
        {"image_size": (0, 10)},
        {"image_size": (10**400, 10)},
        {"image_size": 7},
        {"detections": _Raising(RuntimeError("boom"))},
        {"detections": _Raising(KeyError("k"))},
        {"detections": _Raising(ZeroDivisionError())},
        {"detections": Detections(_BadArray(), np.zeros(0), np.zeros(0))},  # type: ignore[arg-type]
    ],
)
def test_malformed_arguments_are_repaired_or_dropped_and_reported(pipe: Pipeline, kwargs: dict) -> None:
    args: dict[str, Any] = {"frame": None, "detections": _two_people(), "timestamp": 1.0}
    args["image_size"] = (64, 48)
    pipe.step(**args)  # a known image size and time before the bad call
    args.update(kwargs, timestamp=kwargs.get("timestamp", 2.0))
    result = pipe.step(args.pop("frame"), args.pop("detections"), args.pop("timestamp"), **args)
    diag = result.diagnostics
    assert diag.stage_error is None and np.isfinite(result.timestamp)
    assert diag.notes or diag.dropped
    again = pipe.step(None, _two_people(), 3.0, image_size=(64, 48))  # the stream goes on
    assert len(again.pairs) == 1 and again.diagnostics.stage_error is None


def test_complex_and_float32_overflowing_detections_are_dropped_without_warnings(pipe: Pipeline) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        boxes = np.array([[1, 1, 5, 8], [8, 2, 5, 8]], np.complex128)
        result = pipe.step(None, Detections(boxes, np.array([1, 2]), np.ones(2)), 0.0, image_size=(64, 48))
        assert "complex boxes" in next(iter(result.diagnostics.dropped))
        huge = np.array([[1, 1, 5, 8], [8, 2, 1e300, 8]])
        pipe2 = Pipeline(pipe.models, pipe.stage1, pipe.stage2, None)
        result = pipe2.step(None, Detections(huge, np.array([1, 2]), np.ones(2)), 0.0)
        assert result.diagnostics.dropped == {"box or score beyond the float32 range": 1}


def test_unusable_orientation_is_ignored_and_reported_not_a_stage_error(pipe: Pipeline) -> None:
    class Raising:
        boxes, track_ids, scores = (
            np.array([[1, 1, 5, 8], [8, 2, 5, 8]], np.float32),
            np.array([1, 2]),
            np.ones(2),
        )

        @property
        def orientation(self) -> Any:
            raise RuntimeError("sensor gone")

    class Complex(Raising):
        orientation = np.array([0.1, 0.2])  # type: ignore[assignment]
        orientation_conf = np.array([1 + 2j, 1])

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning either
        for dets in (Raising(), Complex()):
            result = pipe.step(None, dets, 0.0, image_size=(64, 48))
            assert result.diagnostics.stage_error is None and len(result.track_ids) == 2
            assert next(iter(result.diagnostics.dropped)).startswith("orientation ignored")


@pytest.mark.parametrize(
    "args",
    [
        ([["a", "b", "c", "d"]],),  # text boxes
        (np.ones((2, 4)), [10**30, 2]),  # ids beyond int64 (an object array)
        (np.ones((2, 4)), None, ["x", "y"]),  # text scores
        ([[1, 2, 3, 4]], [object()]),
    ],
)
def test_from_arrays_refuses_non_numbers_with_an_input_error(args: tuple[Any, ...]) -> None:
    with pytest.raises(InputError, match="detections: "):  # not ValueError / TypeError / OverflowError
        Detections.from_arrays(*args)


def test_an_unexpected_stage_exception_drops_the_frame_and_the_stream_goes_on(
    pipe: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    frames = list(scene(people=3, frames=4))
    pipe.step(frames[0].image, frames[0].detections, frames[0].timestamp)
    real = pipe.extractor.step
    monkeypatch.setattr(pipe.extractor, "step", lambda *a, **k: 1 / 0)
    failed = pipe.step(frames[1].image, frames[1].detections, frames[1].timestamp)
    assert failed.diagnostics.stage_error == "features: ZeroDivisionError"
    assert "frame dropped" in (failed.diagnostics.frame_dropped or "") and len(failed.pairs) == 0
    assert failed.to_json_dict()["diagnostics"]["stage_error"] == "features: ZeroDivisionError"
    monkeypatch.setattr(pipe.extractor, "step", real)
    ok = pipe.step(frames[2].image, frames[2].detections, frames[2].timestamp)
    assert ok.diagnostics.stage_error is None and len(ok.pairs) == 3


def test_non_finite_model_outputs_are_reported_not_silently_zero(tmp_path: Path) -> None:
    folder = _models(tmp_path)
    meta = toy_metadata(1, "pairedge")
    weights = toy_weights(meta.num_features, 2, seed=1)
    broken = type(weights)(weights.mean, np.zeros_like(weights.std), weights.weight, weights.bias)  # x / 0
    onnx.save_model(toy_proto(broken, meta), str(folder / "stage1.onnx"))
    with Pipeline.load(folder, flow="none") as pipe:
        result = pipe.step(None, _two_people(), 0.0, image_size=(64, 48))
    assert result.diagnostics.non_finite_outputs == {"stage1": 1}
    assert len(result.pairs) == 0 and not result.diagnostics.clean
    assert result.to_json_dict()["diagnostics"]["non_finite_outputs"] == {"stage1": 1}


def _crowd(n: int, seed: int = 0) -> Detections:
    rng = np.random.default_rng(seed)
    h = rng.uniform(20, 200, n)
    boxes = np.column_stack([rng.uniform(0, 1700, n), rng.uniform(0, 800, n), 0.4 * h, h])
    return Detections.from_arrays(boxes, np.arange(1, n + 1), rng.uniform(0.2, 1.0, n))


def test_cap_keeps_the_most_confident_then_the_largest() -> None:
    boxes = np.array([[0, 0, 5, 10], [0, 0, 5, 40], [0, 0, 5, 20], [0, 0, 5, 30]], np.float32)
    dets = Detections.from_arrays(boxes, np.arange(4), np.array([0.5, 0.9, 0.9, 0.5]))
    kept, dropped = cap_people(dets, 3)
    assert kept.track_ids.tolist() == [1, 2, 3] and dropped == 1  # original order kept
    assert cap_people(dets, None) == (dets, 0)
    with pytest.raises(InputError, match="max_people"):
        PipelineConfig(max_people=1)
    with pytest.raises(InputError, match="max_people"):
        PipelineConfig(max_people=2.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("n", [1_000, 10_000])
def test_huge_crowds_are_capped_and_memory_stays_small(tmp_path: Path, n: int) -> None:
    image = np.random.default_rng(0).integers(0, 255, (1080, 1920, 3), np.uint8)
    with Pipeline.load(_models(tmp_path), flow="dis") as pipe:
        dets = _crowd(n)
        pipe.step(image, dets, 0.0)
        tracemalloc.start()
        result = pipe.step(image, dets, 0.1)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert len(result.track_ids) == 100 and len(result.pairs) == 100 * 99 // 2
    assert result.diagnostics.dropped == {"over max_people=100 (kept the most confident)": n - 100}
    kept_scores = np.sort(dets.scores)[-100:]
    np.testing.assert_array_equal(
        np.sort(dets.scores[np.isin(dets.track_ids, result.track_ids)]), kept_scores
    )
    assert peak < 150 * 2**20  # the uncapped 10,000-person step needed 8.7 GB


# -- inputs of pairedge run: corrupt / truncated video, empty detection files
# ---------------------------------


def _mp4(path: Path, frames: int = 30) -> bytes:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), 30, (64, 48))
    if not writer.isOpened():
        pytest.skip("OpenCV cannot write mp4v here")
    rng = np.random.default_rng(0)
    for _ in range(frames):
        writer.write(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    writer.release()
    return path.read_bytes()


def test_a_video_cut_short_is_reported_as_truncated(tmp_path: Path) -> None:
    data = _mp4(tmp_path / "full.mp4")
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError, match="looks truncated .*no 'moov' index"):
        FrameSource(cut)


def test_iso_bmff_atom_walk() -> None:
    def atom(kind: bytes, payload: int) -> bytes:
        return (8 + payload).to_bytes(4, "big") + kind + bytes(payload)

    def problem(data: bytes) -> str | None:
        path = Path(tempfile.mkstemp(suffix=".mp4")[1])
        try:
            path.write_bytes(data)
            return iso_bmff_problem(path)
        finally:
            path.unlink()

    ftyp = atom(b"ftyp", 12)
    assert problem(ftyp + atom(b"moov", 20) + atom(b"mdat", 100)) is None
    assert problem(ftyp + atom(b"mdat", 100)) == "no 'moov' index atom"
    cut = problem(ftyp + atom(b"moov", 20) + atom(b"mdat", 100)[:50])
    assert cut is not None and "'mdat' at byte 48 declares 108 bytes" in cut and "moov" not in cut
    assert problem(b"RIFF....AVI LIST") is None  # not an MP4: not judged


def test_ffmpeg_log_is_silenced_on_a_corrupt_video(tmp_path: Path) -> None:
    data = bytearray(_mp4(tmp_path / "v.mp4", frames=60))
    for i in range(2000, len(data) - 3000, 997):
        data[i] ^= 0xFF
    (tmp_path / "bad.mp4").write_bytes(bytes(data))
    code = (
        "import sys; from pairedge.runtime.runner.inputs import FrameSource\n"
        "s = FrameSource(sys.argv[1]); n = sum(1 for _ in s); print(n, s.error)"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENCV_FFMPEG_LOGLEVEL"}
    run = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "bad.mp4")], capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""  # FFmpeg's "ac-tex damaged" / "Error at MB" flood is gone


@pytest.mark.parametrize(
    ("name", "text"),
    [("det.txt", ""), ("det.txt", "# only a comment\n\n"), ("det.json", '{"labels": {}}'), ("det.xml", "")],
)
def test_a_detection_file_without_boxes_is_an_error_naming_it(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(FormatError) as info:
        read_detections(path)
    assert name in str(info.value)


def test_run_stats_memory_is_bounded_on_endless_streams(pipe: Pipeline) -> None:
    stats = RunStats(pipe.labels, max_samples=8)
    for k in range(150):
        result = pipe.step(np.zeros((k % 7 + 1, 5, 3), np.uint8), _two_people(), k / 10)
        stats.add(result)
    summary = stats.summary()
    assert summary.frames == 150 and stats._window.shape[0] == 8
    assert len(summary.frames_dropped) == 7  # image heights 1..7: each a distinct reason, all below the cap
    assert summary.latency_ms["total"]["mean"] > 0
    for k in range(150):
        stats.add(pipe.step(None, _Raising(RuntimeError(f"boom {k}")), 20 + k / 10, image_size=(64, 48)))
    dropped = stats.summary().detections_dropped
    assert len(dropped) == MAX_REASONS + 1 and dropped["other reasons (more than 100 distinct)"] == 50
