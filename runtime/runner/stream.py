"""``pairedge run`` on a live source (a camera, a network stream, a GStreamer pipeline): the person detector
on each delivered frame, the pipeline, the same output files as :func:`pairedge.runtime.runner.run.run_files`.

Frames come from :class:`pairedge.runtime.runner.live.LiveSource` (latest-frame policy: frames that arrive
while a step runs are dropped and counted); timestamps are capture times. Every model is loaded and warmed
(the detector's first run, the classifiers on a batch, the flow on blank frames) before the source is opened,
so the first seconds of a stream are not dropped while sessions start. After an outage the stream resumes as a
new
segment: the pipeline's stream state (flow, tracks, links) starts afresh, so people get new ids (ids keep
increasing). The run ends when the source ends (a finite source at its end, a live one after its reconnect
budget), after ``max_frames`` delivered frames, or on Ctrl-C; in every case the summary is written, and its
notes and ``summary.json`` (``live``) say how it ended and how many frames the camera delivered, dropped and
refused, and how many outages and reconnections there were.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

from pairedge.core.errors import BackendError
from pairedge.runtime.runner.live import LiveOptions, LiveSource, LiveTarget
from pairedge.runtime.runner.output import JsonlWriter
from pairedge.runtime.runner.run import (
    RUN_OUTPUTS,
    DetectorTimer,
    RunOptions,
    StreamItem,
    open_run_detector,
    open_video_writer,
    pipeline_notes,
    remove_stale_outputs,
    run_stream,
    stale_note,
)
from pairedge.runtime.runner.stats import RunStats, RunSummary
from pairedge.runtime.types import FrameResult

#: Frame rate written into the annotated video of a live run when ``RunOptions.fps`` is not given.
LIVE_VIDEO_FPS = 30.0
#: The frame size (W, H) the flow is warmed up on before a live source opens (its own size is not known yet).
WARM_UP_SIZE = (640, 480)


def live_items(source: LiveSource, timer: DetectorTimer, max_frames: int | None) -> Iterator[StreamItem]:
    """``(index, image, detections, timestamp, None, new_segment)`` of the frames the source delivers (index:
    capture counter; ``new_segment``: the first frame after a reconnection), the first frames judged by the
    detector guard."""

    def items() -> Iterator[StreamItem]:
        segment = source.segment
        for delivered, (index, image, stamp) in enumerate(source):
            if max_frames is not None and delivered >= max_frames:
                break
            resumed, segment = source.segment != segment, source.segment
            yield index, image, timer(image), stamp, None, resumed

    return timer.guarded(items())


def run_live(
    spec: str | int | LiveTarget,
    out: str | Path,
    options: RunOptions | None = None,
    live: LiveOptions | None = None,
    on_frame: Callable[[FrameResult], None] | None = None,
    *,
    source: LiveSource | None = None,
) -> RunSummary:
    """Run the pipeline on a live source until it ends, ``options.max_frames`` frames, or Ctrl-C.

    Args:
        spec: the live source (:func:`pairedge.runtime.runner.live.live_target`). out: the output folder.
        options: as :func:`~pairedge.runtime.runner.run.run_files` (``detector``: the person detector; a live
            source has no detection file). live: reconnection and timeouts. source: an unopened
            :class:`LiveSource` to use instead of opening ``spec`` (tests).

    Raises:
        InputError / FormatError: not a live source, or it cannot be opened. ModelError, BackendError.
    """
    options = options or RunOptions()
    source = source or LiveSource(spec, live)
    folder = Path(out).expanduser()
    if folder.exists() and not folder.is_dir():
        raise BackendError(f"--out: expected a folder, got the existing file {folder}")
    timer = DetectorTimer(open_run_detector(options).activate(), options.config.tracker, options.guard)
    ended_by = ""
    try:
        deployment = options.deployment
        with deployment.load(options.pipeline_config(detector=True)) as pipe:
            pipe.warm_up(WARM_UP_SIZE)
            with source:
                folder.mkdir(parents=True, exist_ok=True)
                fps = options.fps or LIVE_VIDEO_FPS
                header = {
                    "source": source.target.describe(),
                    "live": True,
                    "detector": timer.detector.describe(),
                    "fps": fps,
                    "model": str(deployment.folder),
                    "pipeline": pipe.describe_start(),
                }
                files = {"results": str(folder / "results.jsonl")}
                writer = open_video_writer(folder, "annotated", fps) if options.video else None
                if writer is not None:
                    files["video"] = str(writer.path)
                written = [
                    "results.jsonl",
                    "summary.json",
                    *([writer.path.name] if writer is not None else []),
                ]
                stale = remove_stale_outputs(folder, RUN_OUTPUTS, written)
                stats = RunStats(pipe.labels)
                try:
                    with JsonlWriter(folder / "results.jsonl", pipe.labels, header) as jsonl:
                        items = live_items(source, timer, options.max_frames)
                        run_stream(pipe, items, jsonl=jsonl, video=writer, on_result=on_frame, stats=stats)
                except KeyboardInterrupt:
                    ended_by = "stopped by Ctrl-C"
                finally:
                    if writer is not None:
                        writer.close()
                source.close()  # the counts are final from here
                files["summary"] = str(folder / "summary.json")
                notes = live_notes(source, ended_by, options.max_frames, stats.frames) + timer.notes()
                summary = stats.summary(
                    notes=notes + pipeline_notes(pipe, deployment) + stale_note(folder, stale),
                    files=files,
                    pipeline=pipe.describe(),
                    detector=timer.record(),
                    live=source.stats.to_dict(),
                )
    finally:
        timer.detector.deactivate()
    (folder / "summary.json").write_text(json.dumps(summary.to_dict(), indent=2) + "\n")
    return summary


def live_notes(source: LiveSource, ended_by: str, max_frames: int | None, frames: int) -> list[str]:
    """How a live run ended and what the source delivered, dropped and refused."""
    s = source.stats
    if not ended_by:
        ended_by = (
            f"stopped after --max-frames {max_frames}"
            if max_frames is not None and frames >= max_frames
            else f"the source ended: {s.ended}"
        )
    notes = [
        f"live {source.target.describe()}: {ended_by}",
        f"live frames: {s.captured} captured, {s.delivered} delivered, {s.dropped} dropped while a step ran "
        f"(latest-frame policy), {s.refused} refused; {s.outages} outage(s), {s.reconnects} reconnection(s) "
        f"({s.attempts} reopening(s) tried); timestamps are capture times; after a reconnection the stream "
        "state starts afresh (new ids)",
    ]
    return notes + s.notes[:5]
