"""One bad message never ends a log: it is dropped and counted with its true reason; the other frames run.

Each log is the same ten simulated frames with one message made hostile (see tests/helpers/ros_logs.py).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import cv2
import numpy as np
import pytest
from pairedge.core.errors import InputError

pytest.importorskip("rosbags")

from pairedge.apps.ros.bag import run_log  # noqa: E402
from pairedge.apps.ros.matching import StampMatcher  # noqa: E402
from pairedge.apps.ros.runner import (  # noqa: E402
    MAX_REASONS,
    OTHER_REASONS,
    DropCounts,
    FrameDecoder,
    RosRunner,
)
from pairedge.core.io.ros.messages import (  # noqa: E402
    BOX_OUT_OF_RANGE,
    TrackIds,
    detections_from_msg,
    image_to_bgr,
)
from pairedge.core.io.ros.msgdefs import COMPRESSED_IMAGE  # noqa: E402
from pairedge.runtime.runner.run import RunOptions  # noqa: E402


def _run(write_messages, messages, tmp_path: Path, name: str = "log"):
    log = write_messages(tmp_path / name, messages)
    summary = run_log(log, tmp_path / f"out_{name}", RunOptions(video=False))
    records = [
        json.loads(line) for line in (tmp_path / f"out_{name}" / "results.jsonl").read_text().splitlines()[1:]
    ]
    return summary, records


def _png_declaring(width: int, height: int) -> bytes:
    """A small valid PNG whose IHDR is rewritten to declare ``width x height`` (with a matching CRC)."""
    import zlib

    ok, png = cv2.imencode(".png", np.zeros((4, 4, 3), np.uint8))
    data = bytearray(png.tobytes())
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)


def test_a_compressed_image_that_declares_400_megapixels_drops_that_frame(
    frame_messages, write_messages, tmp_path: Path
) -> None:
    store = frame_messages.store
    cls = store.types[COMPRESSED_IMAGE]

    def compressed(k, msg):
        ok, jpg = cv2.imencode(".jpg", image_to_bgr(msg))
        data = _png_declaring(20_000, 20_000) if k == 6 else jpg.tobytes()
        return cls(header=msg.header, format="png" if k == 6 else "jpeg", data=np.frombuffer(data, np.uint8))

    summary, records = _run(write_messages, frame_messages(image=compressed), tmp_path)
    assert summary.frames == 9 and len(records) == 9
    reasons = [r for r in summary.detections_dropped if "20000 x 20000" in r]
    assert reasons and "MAX_FRAME_PIXELS" in reasons[0] and summary.detections_dropped[reasons[0]] == 1


def test_raw_images_are_checked_before_any_reshape() -> None:
    from pairedge.core.io.ros.msgdefs import make_typestore

    store = make_typestore()
    msg = store.types["sensor_msgs/msg/Image"]
    header = store.types["std_msgs/msg/Header"](
        stamp=store.types["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id="cam"
    )

    def image(w, h, encoding, step, size):
        return msg(
            header=header,
            height=h,
            width=w,
            encoding=encoding,
            is_bigendian=0,
            step=step,
            data=np.zeros(size, np.uint8),
        )

    with pytest.raises(InputError, match=r"20000 x 20000 pixels \(400.0 MP\)"):
        image_to_bgr(image(20_000, 20_000, "mono8", 20_000, 10))
    with pytest.raises(InputError, match="expected an even width"):
        image_to_bgr(image(5, 4, "yuv422", 10, 40))
    with pytest.raises(InputError, match="at least 2 x 2 pixels"):
        image_to_bgr(image(1, 4, "bayer_rggb8", 1, 4))
    with pytest.raises(InputError, match="expected a step >= 15 bytes"):
        image_to_bgr(image(5, 4, "bgr8", 12, 100))
    with pytest.raises(InputError, match="positive width and height"):
        image_to_bgr(image(0, 4, "bgr8", 0, 0))
    with pytest.raises(InputError, match=r"'bgr\\n8'"):
        image_to_bgr(image(2, 2, "bgr\n8", 6, 12))  # the encoding is escaped in the reason
    red = np.zeros((4, 4), np.uint8)
    red[0::2, 0::2] = 255  # an RGGB mosaic of a red scene
    mosaic = image(4, 4, "bayer_rggb8", 4, 16)
    mosaic.data = red.reshape(-1)
    assert image_to_bgr(mosaic)[1, 1].tolist() == [0, 0, 255]


def test_an_odd_width_yuv422_frame_among_ten_drops_only_itself(
    frame_messages, write_messages, tmp_path
) -> None:
    """The issue's case: the OpenCV assertion used to escape the decoder (exit 1, zero results)."""

    def yuv(k, msg):
        w, h = msg.width - (1 if k == 3 else 0), msg.height
        msg.encoding, msg.width, msg.step = "uyvy", w, 2 * w
        msg.data = np.full(2 * w * h, 128, np.uint8)
        return msg

    summary, records = _run(write_messages, frame_messages(image=yuv), tmp_path)
    assert summary.frames == 9 and len(records) == 9
    assert [r["frame"] for r in records] == [0, 1, 2, 4, 5, 6, 7, 8, 9]  # a gap, not a shift against gold
    (reason,) = [r for r in summary.detections_dropped if "uyvy" in r]
    assert "expected an even width" in reason and summary.detections_dropped[reason] == 1


def test_an_opencv_error_in_one_frame_is_dropped_with_its_reason(monkeypatch) -> None:
    """Any cv2.error while converting one frame costs that frame (not the stream)."""
    from pairedge.apps.ros import runner

    calls = iter([cv2.error("boom"), None, None])

    def convert(msg):
        exc = next(calls)
        if exc is not None:
            raise exc
        return np.zeros((4, 4, 3), np.uint8)

    monkeypatch.setattr(runner, "image_to_bgr", convert)
    decoder = FrameDecoder()
    frames = []
    for msg in _fake_pairs(3):
        frames += decoder.image(msg[0]) + decoder.detections(msg[1])
    frames += decoder.flush()
    assert len(frames) == 2 and any("OpenCV" in r for r in decoder.finish())


def _fake_pairs(n: int, stamps: list[int] | None = None):
    from pairedge.core.io.ros.messages import bgr_to_image, detections_to_msg
    from pairedge.core.io.ros.msgdefs import make_typestore
    from pairedge.core.types import Detections

    store = make_typestore()
    dets = Detections.from_arrays(np.array([[1, 1, 2, 2]], np.float32))
    stamps = stamps or [k * 100_000_000 for k in range(n)]
    return [
        (bgr_to_image(store, np.zeros((4, 4, 3), np.uint8), s), detections_to_msg(store, dets, s))
        for s in stamps
    ]


@pytest.mark.parametrize("which", ["both", "image"])
def test_one_stamp_1000_s_in_the_future_drops_only_its_frame(frame_messages, write_messages, tmp_path, which):
    """The issue's case: 7 of 10 frames used to be dropped with wrong reasons."""
    future = 1000 * 10**9

    def ahead(k, msg):
        if k == 4:
            msg.header.stamp.sec += future // 10**9
        return msg

    messages = frame_messages(image=ahead, dets=ahead if which == "both" else None)
    summary, records = _run(write_messages, messages, tmp_path)
    assert summary.frames == 9 and len(records) == 9
    dropped = summary.detections_dropped
    jump = (
        "header stamp jumps 1,000 s ahead of the stream (the messages after it continue from the earlier "
        "time)"
    )
    if which == "both":
        assert dropped == {jump: 2}
    else:  # its detections had the right stamp: they are what the image was missing
        assert dropped == {jump: 1, "detections without image": 1}


def test_a_log_recorded_in_two_sessions_keeps_every_frame(frame_messages, write_messages, tmp_path) -> None:
    """A real forward jump (ten minutes between sessions): the messages after it continue from the new
    time."""
    gap = 600 * 10**9

    def later(k, msg):
        if k >= 5:
            msg.header.stamp.sec += gap // 10**9
        return msg

    messages = [
        (t, ty, m, lt + (gap if k >= 10 else 0))
        for k, (t, ty, m, lt) in enumerate(frame_messages(image=later, dets=later))
    ]
    summary, records = _run(write_messages, messages, tmp_path)
    assert summary.frames == 10 and not summary.detections_dropped
    stamps = [r["stamp_ns"] for r in records]
    assert stamps[5] - stamps[4] > gap and stamps == sorted(stamps)


def test_stamp_matcher_jump_rules() -> None:
    """First-message outliers, outliers at the end, jumps back in time, and bounded held messages."""
    ms = 1_000_000
    m = StampMatcher()
    out = m.add_image(10**15, "outlier") + m.add_detections(
        10**15, "outlier"
    )  # the very first frame is wrong
    for k in range(5):
        out += m.add_image(k * 33 * ms, f"i{k}") + m.add_detections(k * 33 * ms, f"d{k}")
    out += m.flush()
    assert [x.image for x in out] == [f"i{k}" for k in range(5)]
    assert sum(m.dropped.values()) == 2 and all("ahead of the stream" in r for r in m.dropped)

    m = StampMatcher()
    out = []
    for k in range(4):
        out += m.add_image(k * 33 * ms, k) + m.add_detections(k * 33 * ms, k)
    out += (
        m.add_image(10**15, "last") + m.add_detections(10**15, "last") + m.flush()
    )  # nothing contradicts it
    assert [x.image for x in out] == [0, 1, 2, 3, "last"] and not m.dropped

    m = StampMatcher()
    for k in range(4):
        m.add_image(10**12 + k * 33 * ms, k)
        m.add_detections(10**12 + k * 33 * ms, k)
    m.add_image(5 * 10**9, "back")
    assert list(m.dropped) == [
        "header stamp 995 s behind the stream, more than its reach of 2.0 s (late, or its clock jumped back)"
    ]

    m = StampMatcher()  # one frame every 5 s: steps beyond the 2 s horizon are the stream's own cadence
    out = []
    for k in range(8):
        t = k * 5 * 10**9 + (1000 * 10**9 if k == 5 else 0)  # frame 5 is 1000 s off
        out += m.add_image(t, k) + m.add_detections(t, k)
    out += m.flush()
    assert [x.image for x in out] == [0, 1, 2, 3, 4, 6, 7] and m.reach() == 50 * 10**9
    assert sum(m.dropped.values()) == 2 and all(
        r.startswith("header stamp jumps 1,005 s ahead") for r in m.dropped
    )

    m = StampMatcher(max_pending=8)
    for k in range(3):
        m.add_image(k * 33 * ms, k)
    for k in range(100):  # then every message far from the stream and from each other: held stays bounded
        m.add_image(10**12 * (k + 1), k)
        assert m._held is not None and len(m._held.items) <= 8
    assert sum(n for r, n in m.dropped.items() if "did not continue from its time" in r) == 99


def test_an_epoch_stamped_log_gives_the_results_of_the_same_clip_from_zero(
    sim_frames, tmp_path: Path
) -> None:
    """A bag stamped like a real robot (1.7e9 s) links pairs on the same frames as the clip from 0 and as the
    video of it; the pipeline sees exact durations since the first frame, records keep ``stamp_ns``."""
    from pairedge.apps.ros.write import write_log
    from pairedge.measure.sim.output import write_scene
    from pairedge.runtime.runner.run import run_files

    epoch = 1_700_000_000 * 10**9
    frames = [(image, boxes, k / 15.0) for k, (image, boxes, _) in enumerate(sim_frames)]
    write_log(frames, tmp_path / "zero")
    write_log(frames, tmp_path / "epoch", start_ns=epoch)
    scene = tmp_path / "scene"
    write_scene("static", 2, len(frames), scene, png=True)
    video = run_files(
        scene / "frames", scene / "gt" / "gt.txt", tmp_path / "video", RunOptions(video=False, fps=15.0)
    )
    assert video.frames == len(frames)

    def records(out: Path) -> list[dict]:
        return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()[1:]]

    got = {}
    for name in ("zero", "epoch"):
        run_log(tmp_path / name, tmp_path / f"out_{name}", RunOptions(video=False))
        got[name] = records(tmp_path / f"out_{name}")
    keys = ("interactions", "groups", "tracks")
    expected = [{k: r[k] for k in keys} for r in records(tmp_path / "video")]
    for name in ("zero", "epoch"):
        assert [{k: r[k] for k in keys} for r in got[name]] == expected, name
    assert sum(len(r["interactions"]) for r in expected) > 0
    assert [r["stamp_ns"] - epoch for r in got["epoch"]] == [r["stamp_ns"] for r in got["zero"]]


def test_the_runner_gives_the_pipeline_exact_durations() -> None:
    """(stamp_ns - first_ns) / 1e9 from integers: exact, where stamp / 1e9 at 1.7e9 s keeps only ~0.2 us."""

    class Pipe:
        times: list[float] = []
        labels = ("walking_together", "standing_together", "sitting_together")

        def step(self, image, dets, timestamp, frame_index=None):
            self.times.append(timestamp)

            class Result:
                def to_json_dict(self):
                    return {}

            return Result()

    epoch = 1_700_000_000 * 10**9 + 123
    stamps = [epoch + round(k * 1e9 / 30) for k in range(6)]
    runner = RosRunner(Pipe(), None, messages=False)
    outputs = []
    for image, dets in _fake_pairs(6, stamps):
        outputs += runner.image(image) + runner.detections(dets)
    outputs += runner.flush()
    assert Pipe.times == [(s - stamps[0]) / 1e9 for s in stamps]
    assert [o.record["stamp_ns"] for o in outputs] == stamps


def test_a_box_beyond_float32_drops_only_that_box(frame_messages, write_messages, tmp_path: Path) -> None:
    """The issue's case: one box of 1e308 used to drop its whole frame."""

    def huge(k, msg):
        if k == 2:
            msg.detections[0].bbox.center.position.x = 1e308
        return msg

    summary, records = _run(write_messages, frame_messages(dets=huge), tmp_path)
    assert summary.frames == 10 and len(records) == 10
    assert summary.detections_dropped == {BOX_OUT_OF_RANGE: 1}


def test_box_values_nan_inf_and_overflowing_corners() -> None:
    from pairedge.core.io.ros.messages import detections_to_msg
    from pairedge.core.io.ros.msgdefs import make_typestore
    from pairedge.core.types import Detections

    store = make_typestore()
    boxes = np.array([[10, 20, 30, 60]] * 4, np.float32)
    msg = detections_to_msg(store, Detections.from_arrays(boxes), 1)
    msg.detections[0].bbox.center.position.x = float("nan")  # kept: the runtime drops it with its reason
    msg.detections[1].bbox.center.position.x = 3.0e38  # x + w = 3.0e38 + ... fine: x, x + w < float32 max
    msg.detections[1].bbox.size_x = 0.6e38  # x + w = 3.3e38: still fits
    msg.detections[2].bbox.center.position.x = 3.0e38
    msg.detections[2].bbox.size_x = 1.0e38  # x + w = 3.5e38 overflows float32
    msg.detections[3].results[0].hypothesis.score = 1e300
    dets, skipped = detections_from_msg(msg, TrackIds())
    assert len(dets) == 2 and np.isnan(dets.boxes[0, 0]) and np.isfinite(dets.boxes[1]).all()
    assert skipped == {BOX_OUT_OF_RANGE: 1, "detection score beyond the float32 range (above 3.4e+38)": 1}


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (lambda raw: raw[: len(raw) // 3], "undecodable sensor_msgs/msg/Image message"),  # truncated CDR
        (lambda raw: bytes(np.random.default_rng(0).integers(0, 256, 200, dtype=np.uint8)), "undecodable"),
        (None, "undecodable sensor_msgs/msg/Image message"),  # another type's bytes on the topic
    ],
)
def test_one_undecodable_message_is_dropped_and_the_log_goes_on(
    frame_messages, write_messages, tmp_path, bad, reason
) -> None:
    store = frame_messages.store
    messages = frame_messages()
    for k, (topic, msgtype, msg, log_time) in enumerate(messages):
        if topic == "/camera/image_raw" and k == 6:
            raw = bytes(store.serialize_cdr(msg, msgtype))
            if bad is None:
                raw = bytes(store.serialize_cdr(messages[k + 1][2], messages[k + 1][1]))
            messages[k] = (topic, msgtype, bad(raw) if bad is not None else raw, log_time)
    summary, records = _run(write_messages, messages, tmp_path)
    assert summary.frames == 9 and len(records) == 9
    assert [r["frame"] for r in records] == [0, 1, 2, 4, 5, 6, 7, 8, 9]  # the unread image keeps its place
    assert sum(n for r, n in summary.detections_dropped.items() if r.startswith(reason)) == 1
    assert summary.detections_dropped.get("detections without image") == 1


def test_fuzzed_messages_never_end_the_stream() -> None:
    """Random byte flips, cuts and garbage in image and detection CDR: every message is used or dropped."""
    from pairedge.core.io.ros.messages import bgr_to_image, detections_to_msg
    from pairedge.core.io.ros.msgdefs import DETECTION_ARRAY, IMAGE, make_typestore
    from pairedge.core.types import Detections

    store = make_typestore()
    rng = np.random.default_rng(22)
    dets = Detections.from_arrays(np.array([[1, 1, 2, 2], [3, 3, 4, 4]], np.float32), np.array([1, 2]))
    decoder = FrameDecoder()
    frames = 0
    for k in range(400):
        stamp = k * 33_000_000
        raws = [
            bytearray(store.serialize_cdr(bgr_to_image(store, np.zeros((6, 8, 3), np.uint8), stamp), IMAGE)),
            bytearray(store.serialize_cdr(detections_to_msg(store, dets, stamp), DETECTION_ARRAY)),
        ]
        for raw, msgtype, offer in (
            (raws[0], IMAGE, decoder.image),
            (raws[1], DETECTION_ARRAY, decoder.detections),
        ):
            kind = rng.integers(0, 4)
            if kind == 1:
                for at in rng.integers(0, len(raw), 3):
                    raw[at] = rng.integers(0, 256)
            elif kind == 2:
                raw = raw[: rng.integers(0, len(raw))]
            elif kind == 3:
                raw = bytearray(rng.integers(0, 256, len(raw), dtype=np.uint8).tobytes())
            try:
                msg = store.deserialize_cdr(bytes(raw), msgtype)
            except Exception:
                continue  # log_frames counts it as undecodable
            frames += len(offer(msg))
    frames += len(decoder.flush())
    dropped = decoder.finish()
    assert frames > 50 and sum(dropped.values()) > 0
    assert len(dropped) <= MAX_REASONS


def test_drop_reasons_stay_bounded() -> None:
    counts = DropCounts()
    for k in range(1000):
        counts[f"reason {k}"] += 1
    assert len(counts) == MAX_REASONS and counts[OTHER_REASONS] == 1000 - (MAX_REASONS - 1)
    assert sum(counts.values()) == 1000
    fresh = DropCounts()
    fresh.update({f"r{k}": 2 for k in range(500)})  # dict.update would bypass the cap
    assert len(fresh) == MAX_REASONS and sum(fresh.values()) == 1000
    m = StampMatcher()  # jumps of 500 different sizes: reasons name the size, the counter stays bounded
    for k in range(3):
        m.add_image(k * 33_000_000, k)
    for k in range(500):
        m.add_image(10**12 * (k + 1) + k * 10**9, k)
    assert len(m.dropped) <= MAX_REASONS


def test_eval_of_a_log_keeps_frames_against_their_truth_after_a_dropped_message(
    sim_frames, frame_messages, write_messages, tmp_path: Path
) -> None:
    """``pairedge eval`` on a log: a dropped image leaves a gap in the frame numbers (the frames after it
    still meet their own truth) and timestamps are exact durations from the first frame, epoch stamps or
    not."""
    from pairedge.apps.evaluation.sources import parse_sources

    def yuv(k, msg):  # frame 3 cannot be converted (odd width): dropped
        if k == 3:
            msg.encoding, msg.width, msg.step = "uyvy", msg.width - 1, 2 * (msg.width - 1)
            msg.data = np.full(msg.step * msg.height, 128, np.uint8)
        return msg

    epoch = 1_700_000_000 * 10**9
    logs = tmp_path / "logs"
    logs.mkdir()
    write_messages(logs / "a", frame_messages(image=yuv, start_ns=epoch))
    (source,) = parse_sources(str(logs))
    frames = list(source.open(("walking_together", "standing_together", "sitting_together")))
    assert [f.index for f in frames] == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    span = sim_frames[9][2] - sim_frames[0][2]
    assert frames[0].timestamp == 0.0 and abs(frames[-1].timestamp - span) < 1e-9


def test_a_fifo_named_like_a_log_in_a_fleet_folder_is_refused_not_skipped(tmp_path: Path) -> None:
    import os

    from pairedge.apps.evaluation.sources import parse_sources
    from pairedge.core.errors import FormatError

    logs = tmp_path / "logs"
    logs.mkdir()
    os.mkfifo(logs / "robot.mcap")
    (source,) = parse_sources(str(logs))
    with pytest.raises(FormatError, match="FIFO"):
        list(source.open(("walking_together",)))


def test_a_log_run_removes_the_video_an_earlier_run_left(
    frame_messages, write_messages, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "annotated.mp4").write_bytes(b"old")
    (out / "mine.txt").write_text("keep")
    log = write_messages(tmp_path / "log", frame_messages())
    summary = run_log(log, out, RunOptions(video=False))
    assert not (out / "annotated.mp4").exists() and (out / "mine.txt").read_text() == "keep"
    assert any("removed annotated.mp4" in n for n in summary.notes)
    header = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert "model" in header and "flow_frames" not in header["pipeline"]
