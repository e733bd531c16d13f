"""The live ROS 2 node against a fake rclpy (tests/helpers/fake_rclpy.py): the parameters it declares, the QoS
it picks, the worker thread that runs every pipeline step (never a callback), drops counted and reported on
/diagnostics, and a shutdown that joins the thread."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("rosbags")

import fake_rclpy  # noqa: E402
from fake_rclpy import FakeNode, detections_msg, image_msg  # noqa: E402
from pairedge.apps.ros.node_core import REPLACED  # noqa: E402
from pairedge.apps.ros.node_params import PARAMETERS  # noqa: E402
from pairedge.core.errors import InputError  # noqa: E402
from pairedge.runtime import Deployment  # noqa: E402

#: Fast settings for tests: the bundled model without optical flow.
FAST = {"flow": "none", "backend": "ort-cpu", "detector": ""}  # boxes from the detections topic
SECOND = 1_000_000_000
START = 10 * SECOND


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def idle(node: Any) -> bool:
    """Every pair put in the slot was either processed or replaced (the worker waits for the next one)."""
    slot = node.core.slot
    return slot.offered == node.core.worker.processed + slot.replaced


@pytest.fixture()
def fake(monkeypatch: pytest.MonkeyPatch) -> fake_rclpy.FakeRclpy:
    return fake_rclpy.install(monkeypatch)


@pytest.fixture()
def make_node(fake: fake_rclpy.FakeRclpy, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``make_node(**overrides)``: a started node (destroyed at the end of the test if the test did not)."""
    from pairedge.apps.ros.node import build_node

    nodes: list[Any] = []

    def make(**overrides: Any) -> Any:
        monkeypatch.setattr(FakeNode, "OVERRIDES", {**FAST, **overrides})
        node = build_node(fake.rclpy)()
        nodes.append(node)
        return node

    yield make
    for node in nodes:
        if not node.destroyed:
            node.destroy_node()


def stamp_of(seconds: float) -> int:
    """A frame's header stamp: 10 s + its simulated time."""
    return START + int(round(seconds * 1e9))


def feed(fake: Any, node: Any, frames: list[Any], wait: bool = False) -> int:
    """Deliver each frame's image then its detections through the subscription callbacks (``wait``: until
    the worker is idle after each pair); the count fed."""
    image_cb = node.subscription(node.config.image_topic).callback
    dets_cb = node.subscription(node.config.detections_topic).callback
    for image, truth, seconds in frames:
        image_cb(image_msg(fake, image, stamp_of(seconds)))
        dets_cb(detections_msg(fake, truth.boxes, truth.track_ids, stamp_of(seconds)))
        if wait:
            wait_for(lambda: idle(node))
    return len(frames)


@pytest.fixture(scope="module")
def frames20() -> list[Any]:
    """Twenty frames (15 fps) of a simulated scene whose pairs are confirmed after about ten frames."""
    from pairedge.measure.sim import simulate

    return [(f.image, f.truth, f.timestamp) for f in simulate("static", seed=2, frames=20)]


def test_node_declares_exactly_the_parameter_table(make_node: Any) -> None:
    node = make_node()
    assert list(node.declared) == [p.name for p in PARAMETERS]
    for p in PARAMETERS:
        default, descriptor = node.declared[p.name]
        assert default == p.default and type(default) is type(p.default)
        assert descriptor.description == p.description and descriptor.read_only is True


def test_inputs_use_the_sensor_data_qos_by_default(make_node: Any) -> None:
    node = make_node()
    subs = {s.topic: s for s in node.subscriptions}
    assert set(subs) == {"image", "detections"}
    for sub in subs.values():
        assert sub.qos.reliability is fake_rclpy.ReliabilityPolicy.BEST_EFFORT
        assert sub.qos.history is fake_rclpy.HistoryPolicy.KEEP_LAST and sub.qos.depth == 5
        assert sub.qos.durability is fake_rclpy.DurabilityPolicy.VOLATILE
    assert (
        subs["image"].msg_type.__name__ == "Image"
        and subs["detections"].msg_type.__name__ == "Detection2DArray"
    )
    outputs = {p.topic: p for p in node.publishers}
    assert {t: p.msg_type.__name__ for t, p in outputs.items()} == {
        "/pairedge/interactions": "String",
        "/pairedge/markers": "MarkerArray",
        "/pairedge/pairs": "Detection2DArray",
        "/diagnostics": "DiagnosticArray",
    }
    assert all(
        p.qos.reliability is fake_rclpy.ReliabilityPolicy.RELIABLE and p.qos.depth == 10
        for p in outputs.values()
    )
    assert [period for period, _ in node.timers] == [1.0]


def test_reliable_qos_depth_and_compressed_images_when_asked(make_node: Any) -> None:
    node = make_node(
        qos="reliable", qos_depth=20, compressed=True, image_topic="/cam/compressed", output_depth=3
    )
    sub = node.subscription("/cam/compressed")
    assert sub.msg_type.__name__ == "CompressedImage"
    assert sub.qos.reliability is fake_rclpy.ReliabilityPolicy.RELIABLE and sub.qos.depth == 20
    assert node.publisher("/pairedge/pairs").qos.depth == 3


def test_node_runs_the_deployment_its_parameters_name(make_node: Any) -> None:
    node = make_node(precision="fp32", max_people=7, tracking="always")
    assert node.core.pipe.flow is None and node.core.runner.pipe is node.core.pipe
    config = node.core.pipe.config
    assert (config.max_people, config.tracking, config.tracker) == (7, "always", "iou")
    assert any("precision fp32" in text for level, text in node.logged if level == "info")
    node.destroy_node()
    assert node.destroyed and not node.core.pipe.stage1.is_active
    assert Deployment(backend="ort-cpu", flow="none").backend == "onnxruntime"


def test_node_hands_its_tracker_to_the_runtime(make_node: Any) -> None:
    pytest.importorskip("trackers")
    from pairedge.runtime.tracker_backends import LibraryTracker

    node = make_node(tracker="botsort")
    assert node.core.pipe.config.tracker == "botsort"
    assert isinstance(node.core.pipe._tracker, LibraryTracker)


def test_every_pipeline_step_runs_on_the_worker_thread(
    make_node: Any, fake: Any, frames20: list[Any]
) -> None:
    node = make_node()
    pipe = node.core.pipe
    steps: list[str] = []
    real_step = pipe.step

    def recording_step(*args: Any, **kwargs: Any) -> Any:
        steps.append(threading.current_thread().name)
        return real_step(*args, **kwargs)

    pipe.step = recording_step
    feed(fake, node, frames20, wait=True)  # one pair at a time: the worker keeps up
    results = node.publisher("/pairedge/interactions")
    assert steps and set(steps) == {node.core.worker.thread.name} != {threading.current_thread().name}
    assert len(results.published) == len(steps) == node.core.frames
    # the first three pairs are released together once their stamps agree: the newest of them runs
    assert len(steps) + node.core.slot.replaced == len(frames20) and node.core.drops()[REPLACED] == 2
    for topic in ("/pairedge/interactions", "/pairedge/markers", "/pairedge/pairs"):
        assert set(node.publisher(topic).threads) == {node.core.worker.thread.name}
    records = [json.loads(m.data) for m in results.published]
    assert [r["stamp_ns"] for r in records] == [stamp_of(seconds) for _, _, seconds in frames20[2:]]
    assert any(r["interactions"] for r in records)  # the scene has interactions
    last = node.publisher("/pairedge/pairs").published[-1]
    stamp = stamp_of(frames20[-1][2])
    assert (last.header.stamp.sec, last.header.stamp.nanosec) == divmod(stamp, SECOND)
    assert [d.id for d in last.detections] == [
        "-".join(map(str, i["ids"])) for i in records[-1]["interactions"]
    ]


def test_callbacks_return_while_a_step_is_running_and_replaced_frames_are_counted(
    make_node: Any, fake: Any, sim_frames: list[Any]
) -> None:
    node = make_node()
    pipe = node.core.pipe
    entered, release = threading.Event(), threading.Event()
    real_step = pipe.step

    def blocked_step(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        assert release.wait(30)
        return real_step(*args, **kwargs)

    pipe.step = blocked_step
    feed(fake, node, sim_frames[:4])
    assert entered.wait(30)  # the worker is inside a step that cannot finish
    start = time.perf_counter()
    fed = feed(fake, node, sim_frames[4:])
    assert time.perf_counter() - start < 5.0, "a callback waited for the pipeline"
    release.set()
    wait_for(lambda: idle(node))
    assert fed == len(sim_frames) - 4
    # the step in hand and the newest pair run; every other pair was replaced in the slot
    assert node.core.frames == 2 and node.core.slot.replaced == len(sim_frames) - 2
    period, diagnose = node.timers[0]
    diagnose()
    report = node.publisher("/diagnostics").published[-1]
    status = report.status[0]
    assert status.level == b"\x01" and status.name == "pairedge: node"  # WARN: drops in the period
    values = {kv.key: kv.value for kv in status.values}
    assert values[f"dropped: {REPLACED}"] == str(node.core.slot.replaced) and values["frames"] == "2"
    diagnose()  # no new drops since: OK
    assert node.publisher("/diagnostics").published[-1].status[0].level == b"\x00"


def test_a_failing_step_costs_its_frame_only(make_node: Any, fake: Any, sim_frames: list[Any]) -> None:
    node = make_node()
    pipe = node.core.pipe
    real_step = pipe.step
    calls = []

    def flaky_step(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("cuda: an illegal memory access")
        return real_step(*args, **kwargs)

    pipe.step = flaky_step
    feed(fake, node, sim_frames, wait=True)
    assert node.core.drops()["pipeline step failed (RuntimeError)"] == 1
    assert node.core.frames == len(calls) - 1 and node.core.worker.thread.is_alive()
    assert [t for level, t in node.logged if level == "warning"] == [
        "pipeline step failed (RuntimeError): cuda: an illegal memory access"
    ]


def test_shutdown_joins_the_worker_and_logs_the_summary(
    make_node: Any, fake: Any, sim_frames: list[Any]
) -> None:
    node = make_node()
    feed(fake, node, sim_frames[:5], wait=True)
    node.subscription("image").callback(image_msg(fake, sim_frames[5][0], 20 * SECOND))  # never paired
    node.destroy_node()
    assert not node.core.worker.thread.is_alive() and node.destroyed
    assert not node.core.pipe.stage1.is_active
    summary = [t for level, t in node.logged if level == "info" and "frames published" in t]
    assert len(summary) == 1 and f"{node.core.frames} frames published" in summary[0]
    assert summary[0] == (
        "pairedge: 3 frames published; dropped 3 (frame replaced before the worker took it (latest-frame "
        "policy): 2; header stamp jumps 9.7 s ahead of the stream (the stream ended before later messages "
        "confirmed it): 1)"
    )
    assert node.core.slot.put("late") is False  # closed: nothing is taken after shutdown


def test_detector_mode_subscribes_to_the_image_only(make_node: Any, fake: Any, sim_frames: list[Any]) -> None:
    node = make_node(detector="hog", max_people=5)
    assert [s.topic for s in node.subscriptions] == ["image"]
    assert node.core.detector is not None and node.core.detector.options.max_detections == 5
    calls: list[str] = []
    real = node.core.detector.detect

    def detect(image: Any) -> Any:
        calls.append(threading.current_thread().name)
        return real(image)

    node.core.detector.detect = detect
    cb = node.subscription("image").callback
    for image, _, seconds in sim_frames[:3]:
        cb(image_msg(fake, image, stamp_of(seconds)))
        wait_for(lambda: idle(node))
    assert node.core.frames == 3 and set(calls) == {node.core.worker.thread.name}
    assert len(node.publisher("/pairedge/interactions").published) == 3


def test_node_refuses_a_wrong_backend_name_at_start(make_node: Any) -> None:
    with pytest.raises(InputError, match="unknown classifier backend 'tensorflow'"):
        make_node(backend="tensorflow")
    with pytest.raises(InputError, match="parameter qos: expected one of sensor_data, reliable, got 'fast'"):
        make_node(qos="fast")


def test_main_spins_the_node_and_shuts_down(
    fake: Any, monkeypatch: pytest.MonkeyPatch, sim_frames: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from pairedge.apps.ros.node import main

    monkeypatch.setattr(FakeNode, "OVERRIDES", dict(FAST))

    def run_then_ctrl_c(node: Any) -> None:
        feed(fake, node, sim_frames, wait=True)
        raise fake_rclpy.ExternalShutdownException()  # what spin raises on Ctrl-C (Iron and later)

    fake.spin.append(run_then_ctrl_c)
    main(["--ros-args"])
    (node,) = fake.nodes
    assert node.destroyed and not node.core.worker.thread.is_alive() and fake.shutdown == [True]
    assert node.core.frames == len(sim_frames) - 2
    fake.spin.clear()
    monkeypatch.setattr(FakeNode, "OVERRIDES", {**FAST, "precision": "int4"})
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 1 and fake.shutdown == [True, True]
    err = capsys.readouterr().err.strip()
    assert err.startswith("pairedge_node: ") and "int4" in err and "\n" not in err
