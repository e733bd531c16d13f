"""Run a pipeline over a whole stream and summarise it: the library behind ``pairedge run`` and ``pairedge
demo``.

:func:`run_stream` feeds ``(index, image, detections, timestamp)`` items to a :class:`Pipeline`, writes each
result to the optional JSON Lines and annotated-video writers and accumulates a
:class:`~pairedge.runtime.runner.stats.RunSummary` (people, pairs, interactions by label, per-stage latency
percentiles, FPS, everything dropped, how many frames were scored and had optical flow). :func:`run_files`
does the same for a video file or image folder plus a MOT / JRDB / CVML detection file (see
:mod:`pairedge.runtime.runner.inputs` for how frame numbers are mapped), or without one a person detector
(:mod:`pairedge.runtime.detectors`: OpenCV's HOG by default, or an ONNX model), and writes :data:`RUN_OUTPUTS`
into an output folder: ``results.jsonl``, ``annotated.mp4`` (``.avi`` when the mp4 codec is missing; neither
with ``video=False``) and ``summary.json``. Those of an earlier run in the same folder that this run does not
rewrite are removed (and said in the notes); no other file is touched.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.bundled import describe_model, resolve_model_dir
from pairedge.core.errors import BackendError
from pairedge.core.io.textio import printable
from pairedge.core.types import Detections
from pairedge.runtime.deployment import Deployment
from pairedge.runtime.detectors import Detector
from pairedge.runtime.detectors.guard import DetectorGuard, FrameCheck, GuardOptions, guarded
from pairedge.runtime.pipeline import Pipeline
from pairedge.runtime.prefetch import cores, prefetched
from pairedge.runtime.runner.inputs import DetectionFile, FrameSource, read_detections
from pairedge.runtime.runner.output import AnnotatedVideoWriter, JsonlWriter
from pairedge.runtime.runner.stats import RunStats, RunSummary
from pairedge.runtime.settings import RunSettings
from pairedge.runtime.tracker_backends import tracker_phrase
from pairedge.runtime.types import FrameResult

#: One input of :func:`run_stream`: frame index, image (or None), detections, timestamp in seconds,
#: optionally why the image is None (``Pipeline.step(frame_problem=...)``), and optionally whether the frame
#: starts a new stream segment (a live source that reconnected: the pipeline is reset before it).
StreamItem = (
    tuple[int, np.ndarray | None, Detections, float]
    | tuple[int, np.ndarray | None, Detections, float, str | None]
    | tuple[int, np.ndarray | None, Detections, float, str | None, bool]
)
#: The files :func:`run_files` writes into its output folder (the only ones it ever removes).
RUN_OUTPUTS = ("results.jsonl", "summary.json", "annotated.mp4", "annotated.avi")


def run_stream(
    pipe: Pipeline,
    items: Iterable[StreamItem],
    *,
    jsonl: JsonlWriter | None = None,
    video: AnnotatedVideoWriter | None = None,
    on_result: Callable[[FrameResult], None] | None = None,
    stats: RunStats | None = None,
) -> RunStats:
    """Step ``pipe`` over ``items`` and write every result.

    Args:
        pipe: the pipeline (its state carries over between calls; call ``pipe.reset()`` for a new stream).
        items: ``(index, image, detections, timestamp)``; image (H, W, 3) uint8 BGR or None; a fifth element
            may say why the image is None (reported as the frame's drop reason), a sixth (True) that the frame
            starts a new segment of the stream (``pipe.reset()`` first).
        jsonl: JSON Lines writer of the results, or None. The record of a frame where the automatic
            operating point changed carries ``"operating_point": {"name", "p_interact", "confirm_s"}``.
        video: annotated-video writer, or None.
        on_result: called after each frame (progress bars, live printing).
        stats: statistics to add to (the caller keeps them when the loop is interrupted); None: new ones.

    Returns:
        The accumulated statistics (call :meth:`RunStats.summary`).
    """
    stats = stats if stats is not None else RunStats(pipe.labels)
    for item in items:
        index, image, detections, timestamp = item[:4]
        problem = item[4] if len(item) > 4 else None
        if len(item) > 5 and item[5]:
            pipe.reset()
        switches = pipe.switches.count
        result = pipe.step(image, detections, timestamp, frame_index=index, frame_problem=problem)
        stats.add(result)
        if jsonl is not None:
            jsonl.write(result, switch_record(pipe) if pipe.switches.count != switches else None)
        if video is not None:
            video.write(image, result)
        if on_result is not None:
            on_result(result)
    return stats


@dataclass(frozen=True)
class RunOptions(RunSettings):
    """Options of :func:`run_files` (``pairedge run``): the run settings (:class:`RunSettings`: the
    deployment, the pipeline's configuration, the detector) and the runner's own.

    Attributes:
        deployment, config, detector: see :class:`~pairedge.runtime.settings.RunSettings` (default: the
            bundled model at fp32 on the "auto" backends, the default pipeline, the bundled detector).
        max_frames: stop after this many frames (None: the whole video).
        video: write the annotated video.
        fps: frame rate for timestamps; None = the video's (image folders: 30).
        guard: how the detector's first frames are judged
            (:class:`~pairedge.runtime.detectors.guard.GuardOptions`).
        overlap: run the detector of the next frame on a second thread while the pipeline steps (a video or
            image folder with a detector; :mod:`pairedge.runtime.prefetch`); None: when two or more cores are
            there.
    """

    max_frames: int | None = None
    video: bool = True
    fps: float | None = None
    guard: GuardOptions = field(default_factory=GuardOptions)
    overlap: bool | None = None

    def overlaps(self) -> bool:
        """Whether a detector stream runs one frame ahead on a second thread (:attr:`overlap`)."""
        return self.overlap if self.overlap is not None else cores() >= 2


def resolve_model(model: str | Path | None) -> Path:
    """``model``, or the bundled default model's folder when None or ``"default"``
    (:func:`pairedge.core.bundled.resolve_model_dir`).

    Raises:
        ModelError: the bundled model is not installed.
    """
    return resolve_model_dir(model)


def switch_record(pipe: Pipeline) -> dict[str, Any]:
    """The extra key of a results record at an operating-point switch (:func:`run_stream`)."""
    last = dict(pipe.switches.last or {})
    return {
        "operating_point": {
            "name": last.get("operating_point"),
            "p_interact": last.get("p_interact"),
            "confirm_s": last.get("confirm_s"),
        }
    }


def remove_stale_outputs(folder: Path, known: Iterable[str], rewritten: Iterable[str]) -> list[str]:
    """Remove the files of ``known`` (pairedge's own output names) that an earlier run left in ``folder``;
    the names this run will not rewrite, for a note. Nothing else in the folder is touched.

    Every known output is removed, the rewritten ones too, so that a run that fails half-way leaves no
    earlier summary beside its partial results.
    """
    stale = []
    rewritten = set(rewritten)
    for name in known:
        path = folder / name
        if path.is_file() or path.is_symlink():
            path.unlink()
            if name not in rewritten:
                stale.append(name)
    return stale


def stale_note(folder: Path, stale: list[str]) -> list[str]:
    """The note about the outputs of an earlier run that :func:`remove_stale_outputs` removed."""
    if not stale:
        return []
    it = "it" if len(stale) == 1 else "them"
    return [
        f"removed {', '.join(stale)} of an earlier run in {printable(str(folder))} (this run does not write "
        f"{it})"
    ]


def open_video_writer(out: Path, stem: str, fps: float) -> AnnotatedVideoWriter:
    """An annotated-video writer ``out/stem.mp4``, falling back to ``.avi`` (MJPG) without the mp4 codec."""
    import cv2

    probe = cv2.VideoWriter(str(out / f"{stem}.probe.mp4"), cv2.VideoWriter.fourcc(*"mp4v"), fps, (64, 48))
    ok = probe.isOpened()
    probe.release()
    (out / f"{stem}.probe.mp4").unlink(missing_ok=True)
    return AnnotatedVideoWriter(out / f"{stem}.{'mp4' if ok else 'avi'}", fps)


def file_items(
    source: FrameSource, detections: DetectionFile, max_frames: int | None
) -> Iterator[StreamItem]:
    """The stream of a frame source and a detection file (timestamps ``index / fps``), with the reason of
    each frame the source refused."""
    for index, image, problem in source.frames():
        if max_frames is not None and index >= max_frames:
            break
        yield index, image, detections.get(index), index / source.fps, problem


class DetectorTimer:
    """Runs a detector on each frame of a source, keeps its time and judges its first frames (the run notes,
    :class:`~pairedge.runtime.detectors.guard.DetectorGuard`)."""

    def __init__(self, detector: Detector, tracker: str = "iou", guard: GuardOptions | None = None) -> None:
        self.detector = detector
        self.tracker = tracker  # the tracker backend that gives the ids (for the notes)
        self.frames = 0
        self.seconds = 0.0
        self.boxes = 0
        self.last_check = FrameCheck()
        self.guard = DetectorGuard(f"{detector.label}, {detector.layout_note()}", guard or GuardOptions())

    def __call__(self, image: np.ndarray | None) -> Detections:
        if image is None:
            self.last_check = FrameCheck()
            return Detections.empty()
        start = time.perf_counter()
        found = self.detector.detect(image)
        self.seconds += time.perf_counter() - start
        self.frames += 1
        self.boxes += len(found)
        self.last_check = self.detector.last_check
        return found

    def record(self) -> dict[str, Any]:
        """The detector's figures for ``summary.json``: what ran, its layout, frames, boxes, ms per frame."""
        layout = getattr(self.detector, "layout", None)
        return {
            "detector": self.detector.describe(),
            "layout": layout.kind if layout is not None else None,
            "frames": self.frames,
            "boxes": self.boxes,
            "ms_per_frame": 1000 * self.seconds / self.frames if self.frames else None,
            "nonfinite_candidates": self.guard.nonfinite,
        }

    def guarded(self, items: Iterable[StreamItem]) -> Iterator[StreamItem]:
        """``items`` (whose production runs this timer) with the first frames judged before they go on."""
        return guarded(items, self.guard, lambda: self.last_check, _item_bytes)

    def notes(self) -> list[str]:
        ms = 1000 * self.seconds / max(self.frames, 1)
        return [
            f"no detection file: people found by {self.detector.describe()}",
            f"detector: {ms:.1f} ms per frame (mean of {self.frames} frames, {self.boxes} boxes); ids "
            f"assigned by {tracker_phrase(self.tracker)}",
            *self.guard.notes(),
        ]


def _item_bytes(item: StreamItem) -> int:
    image = item[1]
    return int(image.nbytes) if image is not None else 0


def open_run_detector(options: RunSettings) -> Detector:
    """The detector of ``options.detector`` (:meth:`DetectorConfig.open`), keeping at most the pipeline's
    ``max_people`` boxes per frame."""
    return options.detector.open(options.config.max_people)


def detector_items(source: FrameSource, timer: DetectorTimer, max_frames: int | None) -> Iterator[StreamItem]:
    """The stream of a frame source whose detections come from a detector (timestamps ``index / fps``), the
    first frames judged by the detector guard before any goes on."""

    def items() -> Iterator[StreamItem]:
        for index, image, problem in source.frames():
            if max_frames is not None and index >= max_frames:
                break
            yield index, image, timer(image), index / source.fps, problem

    return timer.guarded(items())


def run_files(
    video: str | Path | FrameSource,
    detections: str | Path | None,
    out: str | Path,
    options: RunOptions | None = None,
    on_frame: Callable[[FrameResult], None] | None = None,
) -> RunSummary:
    """Run the pipeline over a video (or image folder) with a detection file, or with ``detections`` None
    the person detector of ``options.detector`` (HOG by default); write results to ``out``.

    ``video`` may be an open :class:`FrameSource` (its ``fps`` is then used as opened).

    Writes ``out/results.jsonl`` (header ``{"labels": [...], ...}`` then one object per frame; scores
    directly with ``pairedge score --protocol pairwise``), ``out/annotated.mp4`` (unless
    ``options.video`` is False) and ``out/summary.json``; removes the :data:`RUN_OUTPUTS` of an earlier run
    there that this one does not rewrite (a note names them).

    Raises:
        FormatError: unreadable video / image folder / detection file.
        ModelError, BackendError: the model cannot be loaded.
    """
    options = options or RunOptions()
    source = video if isinstance(video, FrameSource) else FrameSource(video, options.fps)
    timer: DetectorTimer | None = None
    try:
        dets = read_detections(detections) if detections is not None else None
        if dets is None:
            timer = DetectorTimer(
                open_run_detector(options).activate(), options.config.tracker, options.guard
            )
        deployment = options.deployment
        folder = Path(out).expanduser()
        if folder.exists() and not folder.is_dir():
            raise BackendError(f"--out: expected a folder, got the existing file {folder}")
        folder.mkdir(parents=True, exist_ok=True)
        with deployment.load(options.pipeline_config(detector=timer is not None)) as pipe:
            found = (
                {"detections": str(dets.path)} if timer is None else {"detector": timer.detector.describe()}
            )
            header = {
                "source": str(source.path),
                **found,
                "fps": source.fps,
                "model": describe_model(deployment.folder),
                "pipeline": pipe.describe_start(),
            }
            files = {"results": str(folder / "results.jsonl")}
            writer = open_video_writer(folder, "annotated", source.fps) if options.video else None
            if writer is not None:
                files["video"] = str(writer.path)
            written = ["results.jsonl", "summary.json", *([writer.path.name] if writer is not None else [])]
            stale = remove_stale_outputs(folder, RUN_OUTPUTS, written)
            overlap = timer is not None and options.overlaps()
            try:
                with JsonlWriter(folder / "results.jsonl", pipe.labels, header) as jsonl:
                    if dets is not None:
                        items: Iterator[StreamItem] = file_items(source, dets, options.max_frames)
                    else:
                        items = detector_items(source, timer, options.max_frames)  # type: ignore[arg-type]
                    with closing(prefetched(items) if overlap else items) as stream:
                        stats = run_stream(pipe, stream, jsonl=jsonl, video=writer, on_result=on_frame)
            finally:
                if writer is not None:
                    writer.close()
            files["summary"] = str(folder / "summary.json")
            notes = _notes(source, dets, timer, stats.frames, options.config.tracker)
            if overlap:
                notes.append(
                    "the detector of the next frame ran on a second thread while the pipeline stepped"
                )
            summary = stats.summary(
                notes=notes + pipeline_notes(pipe, deployment) + stale_note(folder, stale),
                error=source.error,
                files=files,
                pipeline=pipe.describe(),
                detector=timer.record() if timer is not None else None,
            )
    finally:
        source.close()
        if timer is not None:
            timer.detector.deactivate()
    (folder / "summary.json").write_text(json.dumps(summary.to_dict(), indent=2) + "\n")
    return summary


def pipeline_notes(pipe: Pipeline, deployment: Deployment | None = None) -> list[str]:
    """What the pipeline decided or met on its own that a user should know: which model ran (with
    ``deployment``: :meth:`Deployment.describe`, else the model folder alone), an unverified model, the
    emulated CUDA device, operating-point switches (frame, new thresholds), a flow that never ran, box shape
    ignored."""
    model = (
        deployment.describe() if deployment is not None else describe_model(pipe.models.stage1.path.parent)
    )
    notes = [f"model: {model}"]
    if not pipe.models.verified:
        notes.append(pipe.models.integrity)
    if pipe.flow is not None and pipe.flow.emulated:
        notes.append(
            "flow: the CUDA kernels ran on the EMULATED device (HIP-CPU on the CPU, PAIREDGE_CUDA_EMULATION="
            "hip-cpu): the results are the kernels' own, its times are CPU times, not GPU times"
        )
    notes += switch_notes(pipe.switches.records, pipe.switches.count)
    if pipe.flow is not None and pipe.flow_frames == 0:
        notes.append(flow_never_ran(pipe.flow_problem))
    ratio = pipe.fixed_ratio_detector
    if ratio is not None:
        notes.append(
            f"the detector draws every box at one width/height ratio ({ratio:.3f}, a sliding-window "
            "detector): box shape was ignored as a posture cue (--box-shape off uses it)"
        )
    return notes


def switch_notes(records: Iterable[dict[str, Any]], count: int) -> list[str]:
    """One line per operating-point switch: the frame and the thresholds that hold from it on."""
    lines = [
        f"operating point -> {r['operating_point']} from frame {r['frame']} (p_interact >= "
        f"{r['p_interact']:.3g}, links confirmed after {r['confirm_s']:g} s)"
        for r in records
    ]
    if count > len(lines):
        lines.append(f"... and {count - len(lines)} more operating-point switch(es) (not kept)")
    return lines


def flow_never_ran(problem: str | None) -> str:
    """The note of a flow model whose optical flow ran on no frame of the stream."""
    why = problem or "no frame reached it"
    if why.startswith("no previous frame"):
        why = "the stream never had two consecutive usable frames"
    return (
        f"WARNING: the optical flow never ran ({why}); the model's flow features were missing on every "
        "frame, so its interactions rest on box history alone: check --flow-scale and the frame size"
    )


def _notes(
    source: FrameSource,
    dets: DetectionFile | None,
    timer: DetectorTimer | None,
    frames: int,
    tracker: str = "iou",
) -> list[str]:
    if dets is None:
        return (timer.notes() if timer is not None else []) + _source_notes(source)
    notes = [f"{dets.format} detections ({dets.boxes} boxes): {dets.note}"]
    if not dets.with_ids:
        notes.append(f"detections carry no track ids (-1): ids assigned by {tracker_phrase(tracker)}")
    beyond = [k for k in dets.frames if k >= frames]
    if beyond and source.error is None and (source.frame_count is None or frames >= source.frame_count):
        notes.append(
            f"{len(beyond)} detection frame(s) lie beyond the last video frame {frames - 1} (up to frame "
            f"{max(beyond)}): wrong video, or frame numbering off?"
        )
    if dets.frames and not any(k < frames for k in dets.frames):
        notes.append(
            "no detection frame falls inside the processed video frames: check the file and the video"
        )
    return notes + _source_notes(source)


def _source_notes(source: FrameSource) -> list[str]:
    notes: list[str] = []
    if source.unreadable:
        notes.append(
            f"{len(source.unreadable)} image file(s) refused or undecodable (frames dropped), the first: "
            f"{printable(source.first_problem or source.unreadable[0])}"
        )
    elif source.first_problem:
        notes.append(f"frames dropped: {printable(source.first_problem)}")
    notes.extend(source.notes)
    return notes
