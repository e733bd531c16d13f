"""ROS 2 logs in and out: bags written from simulated scenes run like the image-folder + MOT path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import FormatError, InputError
from pairedge.core.types import Detections
from pairedge.measure.sim import simulate

pytest.importorskip("rosbags")

from pairedge.apps.ros.bag import (  # noqa: E402
    MARKERS_TOPIC,
    RESULTS_TOPIC,
    LogTopics,
    list_topics,
    open_log,
    run_log,
)
from pairedge.apps.ros.write import write_log  # noqa: E402
from pairedge.core.io.ros.messages import (  # noqa: E402
    TrackIds,
    bgr_to_image,
    detections_from_msg,
    detections_to_msg,
    image_to_bgr,
)
from pairedge.core.io.ros.msgdefs import make_typestore  # noqa: E402
from pairedge.runtime.runner.run import RunOptions, run_files  # noqa: E402

FRAMES = 12


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    """A simulated scene as PNG frames + MOT ground truth, and the same frames in memory."""
    from pairedge.measure.sim.output import write_scene

    folder = tmp_path_factory.mktemp("scene")
    write_scene("static", 2, FRAMES, folder, png=True)
    frames = [(f.image, f.truth, f.timestamp) for f in simulate("static", seed=2, frames=FRAMES)]
    return folder, frames


def _records(path: Path) -> list[dict]:
    lines = path.read_text().splitlines()[1:]
    return [json.loads(line) for line in lines]


def _comparable(record: dict) -> dict:
    return {k: record[k] for k in ("interactions", "groups", "tracks")}


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_bag_run_equals_video_run_and_writes_output_bag(scene, tmp_path: Path, storage: str) -> None:
    folder, frames = scene
    video = run_files(
        folder / "frames", folder / "gt" / "gt.txt", tmp_path / "video", RunOptions(video=False, fps=15.0)
    )
    assert video.frames == FRAMES
    write_log(frames, tmp_path / "log", storage=storage)
    summary = run_log(
        tmp_path / "log", tmp_path / "bag", RunOptions(video=False), out_bag=tmp_path / "outbag"
    )
    assert summary.frames == FRAMES and not summary.detections_dropped
    expected = [_comparable(r) for r in _records(tmp_path / "video" / "results.jsonl")]
    got = [_comparable(r) for r in _records(tmp_path / "bag" / "results.jsonl")]
    assert got == expected
    assert sum(len(r["interactions"]) for r in got) > 0  # the scene has interactions to compare

    # the output bag: input topics untouched, plus one record and one marker array per frame
    topics = {t.name: t for t in list_topics(tmp_path / "outbag")}
    assert topics["/camera/image_raw"].count == FRAMES and topics["/detections"].count == FRAMES
    assert topics[RESULTS_TOPIC].count == FRAMES and topics[MARKERS_TOPIC].count == FRAMES
    assert any((tmp_path / "outbag").glob("*.mcap" if storage == "mcap" else "*.db3"))
    with open_log(tmp_path / "outbag") as reader:
        store = make_typestore(reader.connections)
        conns = [c for c in reader.connections if c.topic in (RESULTS_TOPIC, MARKERS_TOPIC)]
        decoded = [(c.topic, store.deserialize_cdr(raw, c.msgtype)) for c, _, raw in reader.messages(conns)]
    strings = [json.loads(m.data) for t, m in decoded if t == RESULTS_TOPIC]
    assert [_comparable(r) for r in strings] == expected
    markers = [m for t, m in decoded if t == MARKERS_TOPIC]
    for record, array in zip(strings, markers, strict=True):
        assert array.markers[0].action == 3  # DELETEALL first
        links = [m for m in array.markers if m.ns == "pairedge/pairs"]
        assert (len(links[0].points) if links else 0) == 2 * len(record["interactions"])
        assert len([m for m in array.markers if m.ns == "pairedge/groups"]) == len(record["groups"])


def test_bare_mcap_file_and_bare_output(scene, tmp_path: Path) -> None:
    _, frames = scene
    write_log(frames[:4], tmp_path / "log", storage="mcap")
    (data,) = (tmp_path / "log").glob("*.mcap")
    summary = run_log(data, tmp_path / "out", RunOptions(video=False), out_bag=tmp_path / "result.mcap")
    assert summary.frames == 4
    assert (tmp_path / "result.mcap").is_file()
    assert {t.name for t in list_topics(tmp_path / "result.mcap")} >= {RESULTS_TOPIC, MARKERS_TOPIC}


def test_no_output_messages_are_built_without_an_output_bag(scene, tmp_path: Path, monkeypatch) -> None:
    """Without --out-bag nothing publishes the String / MarkerArray, so they are not built per frame."""
    from pairedge.apps.ros import runner

    _, frames = scene
    write_log(frames[:3], tmp_path / "log", storage="mcap")

    def unexpected(*args, **kwargs):
        raise AssertionError("output message built without an output bag")

    monkeypatch.setattr(runner, "result_to_string", unexpected)
    monkeypatch.setattr(runner, "result_to_markers", unexpected)
    summary = run_log(tmp_path / "log", tmp_path / "out", RunOptions(video=False))
    assert summary.frames == 3 and len(_records(tmp_path / "out" / "results.jsonl")) == 3


def test_output_bag_that_fails_to_open_leaves_nothing_behind(scene, tmp_path: Path, monkeypatch) -> None:
    """A failure while the output bag is being set up closes its writer and removes the half-made files."""
    import rosbags.rosbag2 as rosbag2

    _, frames = scene
    write_log(frames[:2], tmp_path / "log", storage="mcap")
    (data,) = (tmp_path / "log").glob("*.mcap")
    out = tmp_path / "bags"

    def broken(self, *args, **kwargs):
        raise RuntimeError("add_connection failed")

    monkeypatch.setattr(rosbag2.Writer, "add_connection", broken)
    with pytest.raises(RuntimeError, match="add_connection failed"):
        run_log(data, tmp_path / "out", RunOptions(video=False), out_bag=out / "result.mcap")
    assert not out.exists()  # no temporary folder, no partial bag, not even the folder made for it


def test_unpaired_messages_are_dropped_and_reported(scene, tmp_path: Path) -> None:
    """Images without detections and detections without images: dropped, counted, the rest still runs."""
    from pairedge.core.io.ros.msgdefs import DETECTION_ARRAY, IMAGE
    from rosbags.rosbag2 import StoragePlugin, Writer

    _, frames = scene
    store = make_typestore()
    with Writer(tmp_path / "log", version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        img = writer.add_connection("/cam", IMAGE, typestore=store)
        det = writer.add_connection("/det", DETECTION_ARRAY, typestore=store)
        for k, (image, dets, t) in enumerate(frames[:6]):
            stamp = int(t * 1e9)
            if k != 2:  # frame 2: the detector published nothing
                writer.write(
                    det, stamp, store.serialize_cdr(detections_to_msg(store, dets, stamp), DETECTION_ARRAY)
                )
            if k != 4:  # frame 4: the camera message was lost
                writer.write(img, stamp, store.serialize_cdr(bgr_to_image(store, image, stamp), IMAGE))
    summary = run_log(tmp_path / "log", tmp_path / "out", RunOptions(video=False))
    assert summary.frames == 4
    assert summary.detections_dropped == {"image without detections": 1, "detections without image": 1}


def test_missing_topics_and_corrupt_logs(scene, tmp_path: Path) -> None:
    _, frames = scene
    write_log(frames[:2], tmp_path / "log", storage="sqlite3")
    with pytest.raises(InputError, match="no topic '/nope'.*--image-topic"):
        run_log(tmp_path / "log", tmp_path / "out", topics=LogTopics(image="/nope"))
    with pytest.raises(InputError, match="carries vision_msgs/msg/Detection2DArray"):
        run_log(tmp_path / "log", tmp_path / "out", topics=LogTopics(image="/detections"))
    junk = tmp_path / "junk.mcap"
    junk.write_bytes(b"\x89MCAP0\r\n" + bytes(range(256)) * 4)
    with pytest.raises(FormatError, match="at byte 8: a record .* runs past the end of the 1.0 KiB file"):
        list_topics(junk)  # the framing walk refuses it before rosbags reads a length it claims
    (data,) = (tmp_path / "log").glob("*.db3")
    cut = tmp_path / "cut.db3"
    cut.write_bytes(data.read_bytes()[:3000])
    with pytest.raises(FormatError):
        list_topics(cut)
    with pytest.raises(InputError, match="exists"):
        run_log(tmp_path / "log", tmp_path / "out", RunOptions(video=False), out_bag=tmp_path / "log")


def test_image_encodings_round_trip() -> None:
    import cv2

    store = make_typestore()
    rng = np.random.default_rng(0)
    bgr = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    msg = bgr_to_image(store, bgr, 5)
    assert np.array_equal(image_to_bgr(msg), bgr)
    msg.encoding, msg.data = "rgb8", bgr[..., ::-1].copy().reshape(-1)
    assert np.array_equal(image_to_bgr(msg), bgr)
    # a padded row stride (step > width * channels)
    padded = np.zeros((5, 7 * 3 + 3), np.uint8)
    padded[:, :21] = bgr.reshape(5, 21)
    msg.encoding, msg.step, msg.data = "bgr8", 24, padded.reshape(-1)
    assert np.array_equal(image_to_bgr(msg), bgr)
    gray16 = (rng.integers(0, 65536, (5, 7))).astype(">u2")
    msg.encoding, msg.is_bigendian, msg.step, msg.data = "mono16", 1, 14, gray16.view(np.uint8).reshape(-1)
    assert np.array_equal(image_to_bgr(msg)[..., 0], (gray16.astype(np.uint16) >> 8).astype(np.uint8))
    msg.encoding = "32FC1"
    with pytest.raises(InputError, match="32FC1.*not supported"):
        image_to_bgr(msg)
    msg.encoding, msg.is_bigendian, msg.step, msg.data = "bgr8", 0, 21, bgr.reshape(-1)[:50]
    with pytest.raises(InputError, match="bytes of data"):
        image_to_bgr(msg)
    ok, png = cv2.imencode(".png", bgr)
    compressed = store.types["sensor_msgs/msg/CompressedImage"](
        header=msg.header, format="png", data=png.reshape(-1)
    )
    assert np.array_equal(image_to_bgr(compressed), bgr)
    compressed.data = np.frombuffer(b"not an image", np.uint8)
    with pytest.raises(InputError, match="not an image pairedge can measure"):
        image_to_bgr(compressed)
    compressed.data = png.reshape(-1)[:60]  # a valid header, then the bytes stop
    with pytest.raises(InputError, match="do not decode"):
        image_to_bgr(compressed)


def test_detections_round_trip_ids_and_classes() -> None:
    store = make_typestore()
    dets = Detections.from_arrays(
        np.array([[10, 20, 30, 60], [100, 50, 20, 40]], np.float32), np.array([7, -1]), np.array([0.9, 0.5])
    )
    msg = detections_to_msg(store, dets, 123)
    got, skipped = detections_from_msg(msg, TrackIds())
    assert not skipped
    assert np.allclose(got.boxes, dets.boxes) and got.track_ids.tolist() == [7, -1]
    assert np.allclose(got.scores, dets.scores)
    _, skipped = detections_from_msg(msg, TrackIds(), frozenset({"car"}))
    assert skipped == {"detection of another class": 2}
    ids = TrackIds()
    assert [ids("a"), ids("b"), ids("a"), ids("12"), ids("")] == [2**40, 2**40 + 1, 2**40, 12, -1]
    small = TrackIds(capacity=2)
    assert [small("a"), small("b"), small("a"), small("c"), small("a"), small("b")] == [
        2**40,
        2**40 + 1,
        2**40,
        2**40 + 2,
        2**40,
        2**40 + 3,  # "b" was the least recent name: evicted
    ]
    assert len(small._names) == 2
