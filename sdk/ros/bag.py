"""``pairedge run LOG``: a ROS 2 log (rosbag2 folder, ``.mcap`` or ``.db3`` file) through the runtime.

Read with the pure-Python ``rosbags`` library (``pip install 'pairedge[ros]'``; no ROS installation).
Frames come from ``--image-topic`` (``sensor_msgs/Image`` or ``CompressedImage``), boxes from
``--detections-topic`` (``vision_msgs/Detection2DArray``), paired by header stamp
(:mod:`pairedge.ros.matching`); timestamps are the header stamps. Results go to the same files as a video
run (``results.jsonl``, ``summary.json``, ``annotated.mp4``) and, with ``out_bag``, into a copy of the log
with every input topic untouched plus ``/pairedge/interactions`` (``std_msgs/String``: the JSON record) and
``/pairedge/markers`` (``visualization_msgs/MarkerArray`` in the image frame) at the image's log time.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pairedge._optional import require
from pairedge.errors import FormatError, InputError
from pairedge.ros.msgdefs import (
    COMPRESSED_IMAGE,
    DETECTION_ARRAY,
    IMAGE,
    MARKER_ARRAY,
    STRING,
    make_typestore,
)
from pairedge.ros.runner import Frame, FrameDecoder, Output, RosRunner

RESULTS_TOPIC = "/pairedge/interactions"
MARKERS_TOPIC = "/pairedge/markers"
LOG_SUFFIXES = (".mcap", ".db3")


def is_log(path: str | Path) -> bool:
    """Whether ``path`` looks like a ROS 2 log: a folder with ``metadata.yaml``, or an ``.mcap`` / ``.db3`` file."""
    p = Path(path).expanduser()
    return (p.is_dir() and (p / "metadata.yaml").is_file()) or (p.is_file() and p.suffix.lower() in LOG_SUFFIXES)


@dataclass(frozen=True)
class Topic:
    """One topic of a log: name, message type, message count."""

    name: str
    msgtype: str
    count: int


@dataclass(frozen=True)
class LogTopics:
    """Which topics to read. ``None`` picks the only topic of the right type (an error if there are several)."""

    image: str | None = None
    detections: str | None = None
    tolerance_s: float = 0.01
    classes: frozenset[str] | None = None


@contextmanager
def open_log(path: str | Path) -> Iterator[Any]:
    """An open rosbags reader of a rosbag2 folder or a bare ``.mcap`` / ``.db3`` file.

    Raises:
        FormatError: not a log, or a corrupt one (the reason rosbags gives).
    """
    rosbag2 = require("rosbags.rosbag2", extra="ros", purpose="reading ROS 2 logs")
    p = Path(path).expanduser()
    if not p.exists():
        raise FormatError(p, "no such file or folder; expected a rosbag2 folder or an .mcap / .db3 file")
    try:
        reader = rosbag2.Reader(p)
        reader.open()
    except Exception as exc:  # rosbags raises its own errors, OSError, and sqlite3 / struct errors on garbage
        raise FormatError(p, f"cannot read as a ROS 2 log ({type(exc).__name__}: {exc})") from None
    try:
        yield reader
    finally:
        reader.close()


def list_topics(path: str | Path) -> list[Topic]:
    """Every topic of a log with its type and message count, sorted by name."""
    with open_log(path) as reader:
        return sorted(
            (Topic(name, info.msgtype, int(info.msgcount)) for name, info in reader.topics.items()),
            key=lambda t: t.name,
        )


def pick_topic(reader: Any, wanted: str | None, types: tuple[str, ...], what: str, flag: str) -> Any:
    """The connections of the topic to read (``wanted``, or the only one of ``types``)."""
    conns = [c for c in reader.connections if (c.topic == wanted if wanted else c.msgtype in types)]
    names = sorted({c.topic for c in conns})
    available = ", ".join(f"{c.topic} ({c.msgtype})" for c in reader.connections) or "none"
    if not conns:
        want = f"topic {wanted!r}" if wanted else f"a {what} topic ({' or '.join(types)})"
        raise InputError(f"{reader.path}: no {want}; topics in the log: {available}; choose one with {flag}")
    if len(names) > 1:
        raise InputError(f"{reader.path}: several {what} topics ({', '.join(names)}); choose one with {flag}")
    bad = [c.msgtype for c in conns if c.msgtype not in types]
    if bad:
        raise InputError(f"{reader.path}: topic {names[0]!r} carries {bad[0]}, expected {' or '.join(types)}")
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
        options: :class:`~pairedge.runtime.run.RunOptions` (model, backends, video, max frames).
        topics: which topics to read and how to pair them.
        out_bag: write a copy of the log plus pairedge's topics here (same storage format), or None.
        on_frame: called with each :class:`~pairedge.runtime.types.FrameResult`.

    Returns:
        The :class:`~pairedge.runtime.run.RunSummary` (drops include unpaired messages).
    """
    from pairedge.runtime.output import JsonlWriter
    from pairedge.runtime.pipeline import Pipeline
    from pairedge.runtime.run import RunOptions, RunStats, open_video_writer, pipeline_notes, resolve_model

    options = options or RunOptions()
    topics = topics or LogTopics()
    folder = Path(out).expanduser()
    if folder.exists() and not folder.is_dir():
        raise InputError(f"--out: expected a folder, got the existing file {folder}")
    with open_log(log) as reader:
        images = pick_topic(reader, topics.image, (IMAGE, COMPRESSED_IMAGE), "image", "--image-topic")
        dets = pick_topic(reader, topics.detections, (DETECTION_ARRAY,), "detections", "--detections-topic")
        store = make_typestore(reader.connections)
        model = resolve_model(options.model)
        folder.mkdir(parents=True, exist_ok=True)
        config = options.pipeline_config()
        with Pipeline.load(model, options.backend, options.flow, config, precision=options.precision) as pipe:
            stats = RunStats(pipe.labels)
            header = {"source": str(log), "image_topic": images[0].topic, "detections_topic": dets[0].topic,
                      "pipeline": {k: v for k, v in pipe.describe().items() if k != "labels"}}  # fmt: skip
            files = {"results": str(folder / "results.jsonl")}
            with JsonlWriter(folder / "results.jsonl", pipe.labels, header) as jsonl, \
                    _BagCopy(reader, store, out_bag) as copy:  # fmt: skip
                video = None
                if options.video:
                    video = open_video_writer(folder, "annotated", 30.0)
                    files["video"] = str(video.path)

                def emit(output: Output, log_time: int) -> None:
                    stats.add(output.result)
                    jsonl.write(output.result)
                    if video is not None:
                        video.write(output.image, output.result)
                    copy.write_outputs(output, log_time)
                    if on_frame is not None:
                        on_frame(output.result)

                runner = RosRunner(pipe, store, tolerance_s=topics.tolerance_s, classes=topics.classes,
                                   messages=copy.active)  # fmt: skip
                copy_all = copy.write_raw if copy.active else None
                try:
                    for log_time, frame in log_frames(reader, store, runner.decoder, images, dets,
                                                      every_message=copy_all, max_frames=options.max_frames):  # fmt: skip
                        emit(runner.step(frame), log_time)
                finally:
                    if video is not None:
                        video.close()
                dropped = runner.finish()
            if out_bag is not None:
                files["bag"] = str(Path(out_bag).expanduser())
            files["summary"] = str(folder / "summary.json")
            notes = [f"ROS 2 log: images {images[0].topic}, detections {dets[0].topic}, paired by header stamp "
                     f"within {topics.tolerance_s * 1000:g} ms"]  # fmt: skip
            notes += [f"{count} message(s) dropped: {reason}" for reason, count in sorted(dropped.items())]
            notes += pipeline_notes(pipe)
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

    Args:
        reader: an open log (:func:`open_log`). store: its type store (:func:`make_typestore`).
        decoder: pairs and decodes; its ``finish()`` gives the drops afterwards.
        images, dets: the connections to read (:func:`pick_topic`).
        every_message: called with ``(connection, log_time, raw bytes)`` for EVERY message of the log (to
            copy it); without it only the two topics are read.
        max_frames: stop after this many frames (the copy still reads to the end).
    """
    image_ids = {c.id for c in images}
    det_ids = {c.id for c in dets}
    wanted = None if every_message is not None else [*images, *dets]
    count = 0
    for conn, log_time, raw in reader.messages(connections=wanted):
        if every_message is not None:
            every_message(conn, log_time, raw)
        if conn.id not in image_ids and conn.id not in det_ids:
            continue
        if max_frames is not None and count >= max_frames:
            if every_message is None:
                return
            continue
        try:
            msg = store.deserialize_cdr(raw, conn.msgtype)
        except Exception as exc:  # truncated or garbage CDR payload
            decoder.dropped[f"undecodable {conn.msgtype} message ({type(exc).__name__})"] += 1
            continue
        for frame in decoder.image(msg) if conn.id in image_ids else decoder.detections(msg):
            if max_frames is None or count < max_frames:
                count += 1
                yield log_time, frame


class _BagCopy:
    """Copies every message of the input log into ``out_bag`` and adds pairedge's two topics (or nothing)."""

    def __init__(self, reader: Any, store: Any, out_bag: str | Path | None) -> None:
        self.reader, self.store = reader, store
        self.target = Path(out_bag).expanduser() if out_bag is not None else None
        self.active = self.target is not None
        self._writer: Any = None
        self._conns: dict[int, Any] = {}
        self._results: Any = None
        self._markers: Any = None
        self._tmp: Path | None = None
        self._bare_path: Path | None = None

    def __enter__(self) -> _BagCopy:
        if self.target is None:
            return self
        rosbag2 = require("rosbags.rosbag2", extra="ros", purpose="writing ROS 2 logs")
        if self.target.exists():
            raise InputError(f"--out-bag: {self.target} exists; choose a new path (bags are never overwritten)")
        mcap = _is_mcap(Path(self.reader.path))
        plugin = rosbag2.StoragePlugin.MCAP if mcap else rosbag2.StoragePlugin.SQLITE3
        bare = self.target.suffix.lower() in LOG_SUFFIXES
        if bare:  # rosbags writes a folder: write it beside the target, then move the one data file out
            self.target.parent.mkdir(parents=True, exist_ok=True)
            self._tmp = Path(tempfile.mkdtemp(prefix=".pairedge-bag-", dir=self.target.parent))
        path = self._tmp / "bag" if self._tmp is not None else self.target
        self._bare_path = path
        try:
            writer = rosbag2.Writer(path, version=9, storage_plugin=plugin)
            writer.open()
            self._writer = writer
            for conn in self.reader.connections:
                msgdef, digest = getattr(conn.msgdef, "data", ""), conn.digest
                known = {"msgdef": msgdef, "rihs01": digest} if msgdef and digest else {"typestore": self.store}
                self._conns[conn.id] = self._writer.add_connection(
                    conn.topic, conn.msgtype, serialization_format=conn.ext.serialization_format,
                    offered_qos_profiles=conn.ext.offered_qos_profiles, **known,
                )  # fmt: skip
            self._results = self._writer.add_connection(RESULTS_TOPIC, STRING, typestore=self.store)
            self._markers = self._writer.add_connection(MARKERS_TOPIC, MARKER_ARRAY, typestore=self.store)
        except BaseException as exc:  # __exit__ does not run when __enter__ fails: close and remove here
            if self._writer is None:  # nothing opened: only the temporary folder to remove
                if self._tmp is not None:
                    shutil.rmtree(self._tmp, ignore_errors=True)
            else:
                self.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def write_raw(self, conn: Any, log_time: int, raw: Any) -> None:
        if self._writer is not None:
            self._writer.write(self._conns[conn.id], log_time, raw)

    def write_outputs(self, output: Output, log_time: int) -> None:
        if self._writer is not None:
            self._writer.write(self._results, log_time, self.store.serialize_cdr(output.string, STRING))
            self._writer.write(self._markers, log_time, self.store.serialize_cdr(output.markers, MARKER_ARRAY))

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._writer is None:
            return
        self._writer.close()
        assert self.target is not None
        if exc_type is not None:  # nothing half-written is left behind
            shutil.rmtree(self._tmp if self._tmp is not None else self.target, ignore_errors=True)
            return
        if self._tmp is not None and self._bare_path is not None:
            (data,) = [p for p in self._bare_path.iterdir() if p.suffix.lower() in LOG_SUFFIXES]
            shutil.move(str(data), str(self.target))
            shutil.rmtree(self._tmp, ignore_errors=True)


def _is_mcap(log: Path) -> bool:
    """Whether a log (folder or bare file) is stored as MCAP (else sqlite3)."""
    return log.suffix.lower() == ".mcap" or (log.is_dir() and any(log.glob("*.mcap")))
