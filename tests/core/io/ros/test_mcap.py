"""ROS 2 logs that claim more than they hold: refused in seconds, in bounded memory, before rosbags reads
them.

Every hostile file is built here with a few lines of struct packing (the MCAP record framing), or by
editing a log rosbags wrote.
"""

from __future__ import annotations

import os
import struct
import threading
import tracemalloc
from pathlib import Path

import pytest
from pairedge.core import limits
from pairedge.core.errors import FormatError

pytest.importorskip("rosbags")

from pairedge.apps.ros.bag import list_topics, open_log, run_log  # noqa: E402
from pairedge.core.io.ros.mcap import MAGIC, bound_decompression, inflate, walk_mcap  # noqa: E402
from pairedge.runtime.runner.run import RunOptions  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

MiB = 1 << 20


def _zstd():
    try:
        from compression import zstd  # Python 3.14
    except ImportError:
        from backports import zstd
    return zstd


def rec(op: int, body: bytes) -> bytes:
    return bytes([op]) + struct.pack("<Q", len(body)) + body


def string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<I", len(data)) + data


def chunk(
    records: bytes, compression: str = "", declared: int | None = None, start: int = 0, end: int = 0
) -> bytes:
    data = _zstd().compress(records) if compression == "zstd" else records
    size = len(records) if declared is None else declared
    body = (
        struct.pack("<QQQI", start, end, size, 0) + string(compression) + struct.pack("<Q", len(data)) + data
    )
    return rec(0x06, body)


def mcap(*records: bytes, footer: bytes | None = None) -> bytes:
    """A ros2-profile MCAP file: magic, header, ``records``, data end, footer (no summary), magic."""
    head = MAGIC + rec(0x01, string("ros2") + string("test"))
    end = rec(0x0F, struct.pack("<I", 0)) + (footer or rec(0x02, struct.pack("<QQI", 0, 0, 0))) + MAGIC
    return head + b"".join(records) + end


def message(payload: bytes, channel: int = 1, log_time: int = 0) -> bytes:
    return rec(0x05, struct.pack("<HIQQ", channel, 0, log_time, log_time) + payload)


def one_line_error(args: list[str]) -> str:
    from pairedge.apps.cli import app

    res = CliRunner().invoke(app, args)
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert res.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error:"), res.output
    return lines[0]


def test_a_chunk_that_declares_3_gib_is_refused_from_its_header(tmp_path: Path) -> None:
    """The issue's bomb: a small file whose chunk claims 3 GiB; --list-topics answers in one line."""
    bomb = tmp_path / "bomb.mcap"
    bomb.write_bytes(mcap(chunk(b"\0" * 4096, "zstd", declared=3 << 30)))
    assert bomb.stat().st_size < 1000
    line = one_line_error(["run", str(bomb), "--list-topics"])
    assert (
        "a zstd chunk that declares 3 GiB, more than the 256 MiB ceiling "
        "(pairedge.core.limits.MAX_MCAP_CHUNK_BYTES)" in line
    )


def test_a_chunk_that_inflates_past_its_declared_size_stops_one_byte_past_it(tmp_path: Path) -> None:
    """A chunk that declares 1 MiB but whose zstd stream inflates to 64 MiB: refused after ~1 MiB."""
    records = bytes(64 * MiB)
    bomb = tmp_path / "bomb.mcap"
    bomb.write_bytes(mcap(chunk(records, "zstd", declared=MiB)))
    del records
    assert bomb.stat().st_size < 100_000
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match="inflates to more than the 1048576 bytes it declares"):
            list_topics(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * MiB  # rosbags' own zstd.decompress would have made the 64 MiB first


def test_bounded_inflation_matches_the_library_on_good_chunks() -> None:
    zstd = _zstd()
    data = os.urandom(1000) * 50
    assert inflate(zstd.compress(data), "zstd", len(data)) == data
    assert (
        inflate(zstd.compress(data[:100]) + zstd.compress(data[100:]), "zstd", len(data)) == data
    )  # 2 frames
    import lz4.frame

    assert inflate(lz4.frame.compress(data), "lz4", len(data)) == data
    with pytest.raises(FormatError, match="inflates to more than"):
        inflate(lz4.frame.compress(data), "lz4", len(data) - 1)
    assert bound_decompression()
    from rosbags.rosbag2 import storage_mcap

    assert storage_mcap.DECOMPRESSORS["zstd"](zstd.compress(data), len(data)) == data


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (rec(0x05, b"x" * 40)[:-20], "runs past the end of the"),  # a record cut short
        (bytes([0x05]) + struct.pack("<Q", 1 << 62), "runs past the end of the"),  # a length of 4 EiB
        (chunk(b"abc", "brotli"), "compressed with 'brotli'"),
        (chunk(b"abc", "", declared=10), "uncompressed chunk of 3 bytes that declares 10"),
        (rec(0x06, b"\0" * 20), "shorter than its fixed fields"),
        (rec(0x06, struct.pack("<QQQII", 0, 0, 3, 0, 1 << 30) + b"\0" * 16), "compression name of"),
    ],
)
def test_broken_framing_is_refused_with_its_offset(tmp_path: Path, body: bytes, match: str) -> None:
    path = tmp_path / "broken.mcap"
    data = (
        mcap(body)
        if body[:1] != b"\x05" or len(body) > 30
        else MAGIC + rec(0x01, string("ros2") + string("")) + body
    )
    path.write_bytes(data)
    with pytest.raises(FormatError, match=match) as err:
        list_topics(path)
    assert "at byte" in str(err.value) or "compressed with" in str(err.value)


def test_a_message_above_the_ceiling_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.mcap"
    path.write_bytes(mcap(message(b"x" * 300)))
    monkeypatch.setattr(limits, "MAX_MESSAGE_BYTES", 200)  # read when called: a ceiling users may change
    with pytest.raises(FormatError, match=r"a message 300 bytes, more than the 200 bytes ceiling"):
        walk_mcap(path, path.stat().st_size)


def test_too_many_records_and_a_footer_that_points_inside_a_record(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "many.mcap"
    path.write_bytes(mcap(*(message(b"") for _ in range(50))))
    walk_mcap(path, path.stat().st_size)
    monkeypatch.setattr(limits, "MAX_MCAP_RECORDS", 20)
    with pytest.raises(FormatError, match="more than 20 records"):
        walk_mcap(path, path.stat().st_size)
    odd = tmp_path / "odd.mcap"
    odd.write_bytes(mcap(message(b"abc"), footer=rec(0x02, struct.pack("<QQI", 40, 0, 0))))
    with pytest.raises(FormatError, match="summary offset 40 is not the start of a record"):
        walk_mcap(odd, odd.stat().st_size)


def test_overlapping_chunks_are_bounded_together(tmp_path: Path, monkeypatch) -> None:
    """rosbags inflates every chunk whose time range overlaps the one it reads: their sum is bounded."""
    body = [chunk(b"\0" * 100, "zstd", declared=600, start=0, end=10)]
    offset = len(MAGIC) + len(rec(0x01, string("ros2") + string("test")))
    indexes = []
    for k, (start, end) in enumerate([(0, 10), (5, 20), (30, 40)]):
        if k:
            body.append(chunk(b"\0" * 100, "zstd", declared=600, start=start, end=end))
        pos = offset + sum(len(b) for b in body[:-1])
        data_len = len(_zstd().compress(b"\0" * 100))
        index = struct.pack("<QQQQ", start, end, pos, len(body[-1])) + struct.pack("<I", 0)
        index += struct.pack("<Q", 0) + string("zstd") + struct.pack("<QQ", data_len, 600)
        indexes.append(rec(0x08, index))
    path = tmp_path / "overlap.mcap"
    path.write_bytes(mcap(*body, *indexes))
    assert walk_mcap(path, path.stat().st_size).chunks == 3
    monkeypatch.setattr(limits, "MAX_MCAP_OVERLAP_BYTES", 1000)  # chunks 1 and 2 overlap: 1200 together
    with pytest.raises(FormatError, match="overlapping time ranges declare 1.2 KiB together"):
        walk_mcap(path, path.stat().st_size)
    bad = tmp_path / "bad_index.mcap"
    index = struct.pack("<QQQQ", 0, 1, 10**9, 100) + struct.pack("<I", 0)
    index += struct.pack("<Q", 0) + string("zstd") + struct.pack("<QQ", 10, 600)
    bad.write_bytes(mcap(rec(0x08, index)))
    with pytest.raises(FormatError, match="points outside the file"):
        walk_mcap(bad, bad.stat().st_size)


def test_non_regular_files_are_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.mcap"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.db3"
    zero.symlink_to("/dev/zero")
    folder = tmp_path / "bag"
    folder.mkdir()
    os.mkfifo(folder / "metadata.yaml")
    done: list[str] = []

    def attempt() -> None:
        for path in (fifo, zero, folder):
            with pytest.raises(FormatError) as err:
                list_topics(path)
            done.append(str(err.value))

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(20)
    assert len(done) == 3, "a FIFO or /dev/zero was opened"
    assert "FIFO" in done[0] and "character device (a symlink to it)" in done[1] and "FIFO" in done[2]


def test_metadata_listing_a_device_and_whole_file_compression_are_refused(sim_frames, tmp_path: Path) -> None:
    from pairedge.apps.ros.write import write_log

    write_log(sim_frames[:2], tmp_path / "log", storage="sqlite3")
    meta = tmp_path / "log" / "metadata.yaml"
    text = meta.read_text()
    (data,) = (tmp_path / "log").glob("*.db3")
    data.unlink()
    data.symlink_to("/dev/zero")
    with pytest.raises(FormatError, match="character device"):
        list_topics(tmp_path / "log")
    write_log(sim_frames[:2], tmp_path / "log2", storage="mcap")
    meta = tmp_path / "log2" / "metadata.yaml"
    text = meta.read_text()
    assert "compression_mode: ''" in text
    meta.write_text(text.replace("compression_mode: ''", "compression_mode: file"))
    with pytest.raises(FormatError, match=r"zstd-compressed whole .*\(ros2 bag convert\)"):
        list_topics(tmp_path / "log2")


def test_compressed_logs_that_rosbags_writes_still_run(sim_frames, tmp_path: Path) -> None:
    """zstd chunks (MCAP storage compression) and per-message zstd go through the bounded inflaters."""
    from pairedge.core.io.ros.messages import bgr_to_image, detections_to_msg
    from pairedge.core.io.ros.msgdefs import DETECTION_ARRAY, IMAGE, make_typestore
    from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer

    store = make_typestore()
    for mode in (CompressionMode.STORAGE, CompressionMode.MESSAGE):
        path = tmp_path / mode.name
        writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
        writer.set_compression(mode, CompressionFormat.ZSTD)
        with writer:
            img = writer.add_connection("/cam", IMAGE, typestore=store)
            det = writer.add_connection("/det", DETECTION_ARRAY, typestore=store)
            for image, boxes, t in sim_frames[:4]:
                stamp = int(round(t * 1e9))
                writer.write(img, stamp, store.serialize_cdr(bgr_to_image(store, image, stamp), IMAGE))
                writer.write(
                    det, stamp, store.serialize_cdr(detections_to_msg(store, boxes, stamp), DETECTION_ARRAY)
                )
        summary = run_log(path, tmp_path / f"out_{mode.name}", RunOptions(video=False))
        assert summary.frames == 4 and not summary.detections_dropped, mode


def test_sqlite_messages_above_the_ceiling_are_dropped_unread(
    frame_messages, write_messages, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sqlite3: each message is measured with length(data) in SQL; one too big is dropped, the rest run."""
    import numpy as np
    from pairedge.core.io.ros.messages import bgr_to_image

    store = frame_messages.store

    def bigger(k, msg):
        if k != 4:
            return msg
        image = np.zeros((msg.height * 2, msg.width, 3), np.uint8)
        return bgr_to_image(store, image, msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec)

    log = write_messages(tmp_path / "log", frame_messages(image=bigger), storage="sqlite3")
    h, w = frame_messages()[0][2].height, frame_messages()[0][2].width
    monkeypatch.setattr(limits, "MAX_MESSAGE_BYTES", int(h * w * 3 * 1.5))
    summary = run_log(log, tmp_path / "out", RunOptions(video=False))
    assert summary.frames == 9
    dropped = summary.detections_dropped
    assert (
        dropped[
            "message on /camera/image_raw above the 1.3 MiB ceiling "
            "(pairedge.core.limits.MAX_MESSAGE_BYTES), not read"
        ]
        == 1
    )
    assert dropped["detections without image"] == 1


def test_a_log_path_that_does_not_exist_is_named_as_a_log(tmp_path: Path) -> None:
    from pairedge.apps.ros.bag import is_log

    assert is_log(tmp_path / "missing.mcap") and is_log(tmp_path / "MISSING.DB3")
    assert not is_log(tmp_path / "missing.mp4")
    with pytest.raises(FormatError, match="no such file or folder; expected a rosbag2 folder"):
        with open_log(tmp_path / "missing.mcap"):
            pass


def test_a_storage_failure_in_the_middle_of_a_log_is_one_format_error(
    sim_frames, tmp_path: Path, monkeypatch
) -> None:
    """A chunk whose checksum fails (or a corrupt sqlite page) after some messages: one FormatError naming
    the log and how far it got, never a traceback from inside rosbags."""
    from pairedge.apps.ros.write import write_log
    from rosbags.rosbag2 import storage_mcap
    from rosbags.rosbag2.errors import ReaderError

    write_log(sim_frames[:4], tmp_path / "log", storage="mcap")
    original = storage_mcap.McapReader.messages

    def failing(self, *args, **kwargs):
        for k, message in enumerate(original(self, *args, **kwargs)):
            if k == 3:
                raise ReaderError("Chunk checksum mismatch.")
            yield message

    monkeypatch.setattr(storage_mcap.McapReader, "messages", failing)
    with pytest.raises(
        FormatError, match=r"log: unreadable after 3 messages \(ReaderError: Chunk checksum mismatch"
    ):
        run_log(tmp_path / "log", tmp_path / "out", RunOptions(video=False))
