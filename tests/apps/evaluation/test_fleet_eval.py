"""Fleet evaluation: many sources, one task each, local or on a 2-worker Ray cluster, pooled exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pairedge.apps.evaluation.evaluate import evaluate, pool
from pairedge.apps.evaluation.fleet_eval import evaluate_many
from pairedge.apps.evaluation.sources import StreamSource, parse_sources
from pairedge.measure.sim import simulate
from pairedge.runtime import PipelineConfig
from pairedge.runtime.runner.run import resolve_model

FRAMES = 8


def _sources() -> list[StreamSource]:
    scenes = parse_sources("sim:static+moving:seeds=0-3", frames=FRAMES)
    broken = StreamSource(
        "video",
        "video:missing.mp4",
        {"video": "/nonexistent/missing.mp4", "detections": "/nonexistent/d.txt", "gold": None},
    )
    return [*scenes[:4], broken, *scenes[4:]]


def test_local_fleet_equals_pooling_serial_reports_and_reports_failures() -> None:
    model = resolve_model(None)
    sources = _sources()
    result = evaluate_many(model, sources, max_frames=FRAMES)
    assert len(result.outcomes) == 9 and [o.key for o in result.outcomes] == [s.name for s in sources]
    (failed,) = result.failures
    assert failed[0] == "video:missing.mp4" and "no such file" in failed[1]
    serial = pool([evaluate(model, s, max_frames=FRAMES) for s in sources if s.kind == "sim"])
    assert result.report is not None and result.report.frames == 8 * FRAMES
    assert np.array_equal(result.report.confusion, serial.confusion)
    assert result.report.stage1 == serial.stage1 and result.report.sources == serial.sources


def _sim_logs(root: Path, count: int) -> None:
    """``count`` simulated robot logs with their gold pairs, laid out as ``pairedge simulate --bag`` does."""
    from pairedge.apps.ros.write import write_log
    from pairedge.measure.sim.output import write_scene

    for k in range(count):
        preset = ("static", "moving")[k % 2]
        folder = root / f"robot{k}"
        write_scene(preset, k // 2, FRAMES, folder)
        write_log(
            ((f.image, f.detections, f.timestamp) for f in simulate(preset, seed=k // 2, frames=FRAMES)),
            folder / "log",
            storage=("mcap", "sqlite3")[k % 2],
        )


def test_log_sources_equal_the_scenes_they_record(tmp_path: Path) -> None:
    pytest.importorskip("rosbags")
    _sim_logs(tmp_path, 2)
    logs = parse_sources(str(tmp_path))
    assert [s.name for s in logs] == ["log:robot0/log", "log:robot1/log"]
    assert all(s.params["gold"].endswith("pairs_gt_paper3.jsonl") for s in logs)
    model = resolve_model(None)
    scenes = parse_sources("sim:static+moving:seeds=0:boxes=detections", frames=FRAMES)
    at_once = PipelineConfig(confirm_s=0.0)  # 8 frames: report links without waiting for them to hold
    from_logs = pool([evaluate(model, s, config=at_once) for s in logs])
    from_scenes = pool([evaluate(model, s, config=at_once) for s in scenes])
    assert from_logs.frames == from_scenes.frames == 2 * FRAMES
    assert (
        np.array_equal(from_logs.confusion, from_scenes.confusion) and from_logs.stage1 == from_scenes.stage1
    )
    assert from_logs.confusion.sum() > 0


@pytest.mark.slow
def test_ray_fleet_equals_local_on_eight_logs(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    pytest.importorskip("rosbags")
    _sim_logs(tmp_path, 8)
    (tmp_path / "robot8" / "log").mkdir(parents=True)
    (tmp_path / "robot8" / "log" / "metadata.yaml").write_text("not: [a rosbag2")  # a corrupt log
    sources = parse_sources(str(tmp_path))
    assert len(sources) == 9
    model = resolve_model(None)
    local = evaluate_many(model, sources)
    remote = evaluate_many(model, sources, executor="ray", workers=2)
    assert [k for k, _ in local.failures] == ["log:robot8/log"] and remote.failures == local.failures
    assert remote.report is not None and local.report is not None and local.report.frames == 8 * FRAMES
    assert np.array_equal(remote.report.confusion, local.report.confusion)
    assert remote.report.stage1 == local.report.stage1 and remote.report.per_source == local.report.per_source


def test_log_source_reports_messages_dropped_while_pairing(tmp_path: Path) -> None:
    pytest.importorskip("rosbags")
    from pairedge.core.io.ros.messages import bgr_to_image, detections_to_msg
    from pairedge.core.io.ros.msgdefs import DETECTION_ARRAY, IMAGE, make_typestore
    from rosbags.rosbag2 import StoragePlugin, Writer

    store = make_typestore()
    with Writer(tmp_path / "log", version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        img = writer.add_connection("/cam", IMAGE, typestore=store)
        det = writer.add_connection("/det", DETECTION_ARRAY, typestore=store)
        for k, f in enumerate(simulate("static", seed=0, frames=4)):
            stamp = int(f.timestamp * 1e9)
            writer.write(img, stamp, store.serialize_cdr(bgr_to_image(store, f.image, stamp), IMAGE))
            if k != 1:  # the detector published nothing for frame 1
                msg = detections_to_msg(store, f.truth, stamp)
                writer.write(det, stamp + 1, store.serialize_cdr(msg, DETECTION_ARRAY))
    (source,) = parse_sources(str(tmp_path / "log"))
    report = evaluate(resolve_model(None), source)
    assert report.frames == 3
    assert any("messages dropped while pairing: 1 x image without detections" in n for n in report.notes)
