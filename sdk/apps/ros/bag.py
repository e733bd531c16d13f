"""``pairedge run LOG``: a ROS 2 log (rosbag2 folder, ``.mcap`` or ``.db3`` file) through the runtime.

Read with the pure-Python ``rosbags`` library (``pip install '.[ros]'``; no ROS installation), after
:func:`pairedge.core.io.ros.storage.check_log` has checked that every file is a regular file within the
ceilings (an MCAP file's record framing is walked first, chunks inflate with a bound). Frames come from
``--image-topic`` (``sensor_msgs/Image`` or ``CompressedImage``), boxes from ``--detections-topic``
(``vision_msgs/Detection2DArray``), paired by header stamp (:mod:`pairedge.apps.ros.matching`, which also
holds back a stamp that jumps until the messages after it confirm it). The pipeline sees seconds since the
first frame computed from integer nanoseconds; every record keeps the header stamp as ``stamp_ns``. One bad
message (undecodable CDR, an oversize or unconvertible image, a box beyond float32) is dropped and counted
with its reason; the log goes on. Results go to the same files as a video run (``results.jsonl``,
``summary.json``, ``annotated.mp4``) and, with ``out_bag``, into a copy of the log
(:mod:`pairedge.apps.ros.bagcopy`) with every input topic untouched plus ``/pairedge/interactions``
(``std_msgs/String``: the JSON record) and ``/pairedge/markers`` (``visualization_msgs/MarkerArray`` in the
image frame) at the image's log time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pairedge.apps.ros.bagcopy import MARKERS_TOPIC, RESULTS_TOPIC, BagCopy, plan_out_bag
from pairedge.apps.ros.runner import Frame, FrameDecoder, Output, RosRunner
from pairedge.core.bundled import describe_model
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.ros.mcap import bound_decompression
from pairedge.core.io.ros.msgdefs import COMPRESSED_IMAGE, DETECTION_ARRAY, IMAGE, make_typestore
from pairedge.core.io.ros.storage import STORAGE_OF_SUFFIX, check_log, read_messages
from pairedge.core.io.textio import printable
from pairedge.core.optional import require
from pairedge.runtime.runner.output import JsonlWriter
from pairedge.runtime.runner.run import (
    RUN_OUTPUTS,
    RunOptions,
    RunStats,
    open_video_writer,
    pipeline_notes,
    remove_stale_outputs,
    stale_note,
    switch_record,
)

__all__ = [
    "MARKERS_TOPIC",
    "RESULTS_TOPIC",
    "LOG_SUFFIXES",
    "LogTopics",
    "Topic",
    "is_log",
    "list_topics",
    "log_frames",
    "open_log",
    "pick_topic",
    "run_log",
]

LOG_SUFFIXES = tuple(STORAGE_OF_SUFFIX)
EXPECTED = "expected a rosbag2 folder (with metadata.yaml) or an .mcap / .db3 file"


def is_log(path: str | Path) -> bool:
    """Whether ``path`` names a ROS 2 log: a folder with ``metadata.yaml``, or an ``.mcap`` / ``.db3`` name.

    By name alone for files, so that a missing or unreadable ``run.mcap`` is reported as a log that is not
    there (:func:`open_log`) rather than taken for a video.
    """
    p = Path(path).expanduser()
    if p.is_dir():
        return (p / "metadata.yaml").exists() or p.suffix.lower() in LOG_SUFFIXES
    return p.suffix.lower() in LOG_SUFFIXES


@dataclass(frozen=True)
class Topic:
    """One topic of a log: name, message type, message count."""

    name: str
    msgtype: str
    count: int


@dataclass(frozen=True)
class LogTopics:
    """Which topics to read. ``None`` picks the only topic of the right type (an error if there are
    several)."""

    image: str | None = None
    detections: str | None = None
    tolerance_s: float = 0.01
    classes: frozenset[str] | None = None


@contextmanager
def open_log(path: str | Path) -> Iterator[Any]:
    """An open rosbags reader of a rosbag2 folder or a bare ``.mcap`` / ``.db3`` file.

    Raises:
        FormatError: missing, not made of regular files, beyond a ceiling
            (:func:`~pairedge.core.io.ros.storage.check_log`), or a log rosbags cannot read (its reason).
    """
    rosbag2 = require("rosbags.rosbag2", extra="ros", purpose="reading ROS 2 logs")
    p = Path(path).expanduser()
    if not p.exists():
        raise FormatError(printable(p), f"no such file or folder; {EXPECTED}")
    check_log(p, verify_inflation=not bound_decompression())
    try:
        reader = rosbag2.Reader(p)
        reader.open()
    except FormatError as exc:  # raised by pairedge's bounded chunk inflation inside rosbags
        raise FormatError(printable(p), exc.problem) from None
    except Exception as exc:  # rosbags raises its own errors, OSError, and sqlite3 / struct errors on garbage
        raise FormatError(
            printable(p), f"cannot read as a ROS 2 log ({type(exc).__name__}: {printable(exc)})"
        ) from None
    try:
        yield reader
    finally:
        reader.close()


def list_topics(path: str | Path) -> list[Topic]:
    """Every topic of a log with its type and message count, sorted by name (names as the log has them;
    escape them with :func:`pairedge.core.io.textio.printable` before echoing)."""
    with open_log(path) as reader:
        return sorted(
            (Topic(name, str(info.msgtype), int(info.msgcount)) for name, info in reader.topics.items()),
            key=lambda t: t.name,
        )


def pick_topic(reader: Any, wanted: str | None, types: tuple[str, ...], what: str, flag: str) -> Any:
    """The connections of the topic to read (``wanted``, or the only one of ``types``)."""
    conns = [c for c in reader.connections if (c.topic == wanted if wanted else c.msgtype in types)]
    names = sorted({c.topic for c in conns})
    shown = ", ".join(f"{printable(c.topic)} ({printable(c.msgtype)})" for c in reader.connections[:50])
    available = (shown + (", ..." if len(reader.connections) > 50 else "")) or "none"
    log = printable(reader.path)
    if not conns:
        want = f"topic '{printable(wanted)}'" if wanted else f"a {what} topic ({' or '.join(types)})"
        raise InputError(f"{log}: no {want}; topics in the log: {available}; choose one with {flag}")
    if len(names) > 1:
        listed = ", ".join(printable(n) for n in names[:20])
        raise InputError(f"{log}: several {what} topics ({listed}); choose one with {flag}")
    bad = [c.msgtype for c in conns if c.msgtype not in types]
    if bad:
        raise InputError(
            f"{log}: topic '{printable(names[0])}' carries {printable(bad[0])}, expected {' or '.join(types)}"
        )
    return conns


def run_log(
    log: str | Path,
    out: str | Path,
    options: Any = None,
    topics: LogTopics | None = None,
    out_bag: str | Path | None = None,
    on_frame: Callable[[Any], None] | None = None,
) -> Any:
    """Run the pipeline over a ROS 2 log; write ``results.jsonl``, ``summary.json`` (and the video, the bag).

    Args:
        log: rosbag2 folder or ``.mcap`` / ``.db3`` file.
        out: output folder (created).
        options: :class:`~pairedge.runtime.runner.run.RunOptions` (model, backends, video, max frames).
        topics: which topics to read and how to pair them.
        out_bag: write a copy of the log plus pairedge's topics here (same storage format), or None.
        on_frame: called with each :class:`~pairedge.runtime.types.FrameResult`.

    Returns:
        The :class:`~pairedge.runtime.runner.run.RunSummary` (drops include unpaired messages).
    """

    options = options or RunOptions()
    topics = topics or LogTopics()
    folder = Path(out).expanduser()
    if folder.exists() and not folder.is_dir():
        raise InputError(f"--out: expected a folder, got the existing file {printable(folder)}")
    plan = plan_out_bag(out_bag, Path(log).expanduser()) if out_bag is not None else None
    with open_log(log) as reader:
        images = pick_topic(reader, topics.image, (IMAGE, COMPRESSED_IMAGE), "image", "--image-topic")
        dets = pick_topic(reader, topics.detections, (DETECTION_ARRAY,), "detections", "--detections-topic")
        store = make_typestore(reader.connections)
        deployment = options.deployment
        model = deployment.folder
        folder.mkdir(parents=True, exist_ok=True)
        config = options.pipeline_config()
        with deployment.load(config) as pipe:
            stats = RunStats(pipe.labels)
            header = {
                "source": str(log),
                "image_topic": images[0].topic,
                "detections_topic": dets[0].topic,
                "model": describe_model(model),
                "pipeline": pipe.describe_start(),
            }
            files = {"results": str(folder / "results.jsonl")}
            video = open_video_writer(folder, "annotated", 30.0) if options.video else None
            if video is not None:
                files["video"] = str(video.path)
            written = ["results.jsonl", "summary.json", *([video.path.name] if video is not None else [])]
            stale = remove_stale_outputs(folder, RUN_OUTPUTS, written)
            with (
                JsonlWriter(folder / "results.jsonl", pipe.labels, header) as jsonl,
                BagCopy(reader, store, plan) as copy,
            ):
                switches = [pipe.switches.count]

                def emit(output: Output, log_time: int) -> None:
                    stats.add(output.result)
                    extra: dict[str, Any] = {"stamp_ns": output.stamp}  # the header stamp, exact
                    if pipe.switches.count != switches[0]:  # an automatic operating-point switch
                        switches[0] = pipe.switches.count
                        extra.update(switch_record(pipe))
                    jsonl.write(output.result, extra)
                    if video is not None:
                        video.write(output.image, output.result)
                    copy.write_outputs(output, log_time)
                    if on_frame is not None:
                        on_frame(output.result)

                runner = RosRunner(
                    pipe, store, tolerance_s=topics.tolerance_s, classes=topics.classes, messages=copy.active
                )
                copy_all = copy.write_raw if copy.active else None
                try:
                    for log_time, frame in log_frames(
                        reader,
                        store,
                        runner.decoder,
                        images,
                        dets,
                        every_message=copy_all,
                        max_frames=options.max_frames,
                    ):
                        emit(runner.step(frame), log_time)
                finally:
                    if video is not None:
                        video.close()
                dropped = runner.finish()
            if plan is not None:
                files["bag"] = str(plan.target)
            files["summary"] = str(folder / "summary.json")
            notes = [
                f"ROS 2 log: images {printable(images[0].topic)}, detections {printable(dets[0].topic)}, "
                f"paired by header stamp within {topics.tolerance_s * 1000:g} ms; timestamps are seconds "
                "since the first frame (stamp_ns: the header stamp)"
            ]
            notes += [f"{count} message(s) dropped: {reason}" for reason, count in sorted(dropped.items())]
            notes += pipeline_notes(pipe, deployment) + stale_note(folder, stale)
            summary = stats.summary(notes=notes, files=files, pipeline=pipe.describe())
    merged = dict(summary.detections_dropped)
    for reason, count in dropped.items():
        merged[reason] = merged.get(reason, 0) + count
    summary = replace(summary, detections_dropped=merged)
    (folder / "summary.json").write_text(json.dumps(summary.to_dict(), indent=2) + "\n")
    return summary


def log_frames(
    reader: Any,
    store: Any,
    decoder: FrameDecoder,
    images: list[Any],
    dets: list[Any],
    *,
    every_message: Callable[[Any, int, Any], None] | None = None,
    max_frames: int | None = None,
) -> Iterator[tuple[int, Frame]]:
    """The paired, decoded frames of an open log with the log time of the message that completed each.

    A message that cannot be used (above :data:`~pairedge.core.limits.MAX_MESSAGE_BYTES`, undecodable CDR, a
    bad image or header) is dropped and counted in ``decoder.dropped``; the log goes on. At the end the
    frames the decoder still held after a stamp jump come out (:meth:`FrameDecoder.flush`).

    Args:
        reader: an open log (:func:`open_log`). store: its type store (:func:`make_typestore`).
        decoder: pairs and decodes; its ``finish()`` gives the drops afterwards.
        images, dets: the connections to read (:func:`pick_topic`).
        every_message: called with ``(connection, log_time, raw bytes)`` for EVERY message of the log (to
            copy it); without it only the two topics are read.
        max_frames: stop after this many frames (the copy still reads to the end).

    Raises:
        FormatError: the storage itself failed in the middle of the log (see :func:`read_messages`).
    """
    image_ids = {c.id for c in images}
    det_ids = {c.id for c in dets}
    wanted = None if every_message is not None else [*images, *dets]
    count, last_time = 0, 0
    for message in read_messages(reader, wanted):
        conn, log_time, raw = message.connection, message.log_time, message.data
        last_time = log_time
        ours = conn.id in image_ids or conn.id in det_ids
        if raw is None:
            reason = (
                message.problem if every_message is None else f"{message.problem} (not copied to --out-bag)"
            )
            if conn.id in image_ids:
                decoder.skip_image(reason)
            else:
                decoder.dropped[reason] += 1
            continue
        if every_message is not None:
            every_message(conn, log_time, raw)
        if not ours or (max_frames is not None and count >= max_frames):
            if every_message is None and ours:
                return
            continue
        for frame in _frames_of(decoder, store, conn, raw, conn.id in image_ids):
            if max_frames is None or count < max_frames:
                count += 1
                yield log_time, frame
    for frame in decoder.flush():
        if max_frames is None or count < max_frames:
            count += 1
            yield last_time, frame


def _frames_of(decoder: FrameDecoder, store: Any, conn: Any, raw: Any, is_image: bool) -> list[Frame]:
    """Deserialize one message and offer it to the decoder (an undecodable one is dropped and counted)."""
    try:
        msg = store.deserialize_cdr(raw, conn.msgtype)
    except Exception as exc:  # truncated or garbage CDR payload, or another type's bytes on the topic
        reason = f"undecodable {printable(conn.msgtype)} message ({type(exc).__name__})"
        if is_image:
            decoder.skip_image(reason)
        else:
            decoder.dropped[reason] += 1
        return []
    return decoder.image(msg) if is_image else decoder.detections(msg)
