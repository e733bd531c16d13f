"""Fleet evaluation: many sources, one task each, local or on a 2-worker Ray cluster, pooled exactly."""

from __future__ import annotations

import numpy as np
import pytest
from pairedge.evaluation.evaluate import evaluate, pool
from pairedge.evaluation.fleet_eval import evaluate_many
from pairedge.evaluation.sources import StreamSource, parse_sources
from pairedge.runtime.run import resolve_model

FRAMES = 8


def _sources() -> list[StreamSource]:
    scenes = parse_sources("sim:static+moving:seeds=0-3", frames=FRAMES)
    broken = StreamSource("video", "video:missing.mp4", {"video": "/nonexistent/missing.mp4",
                                                          "detections": "/nonexistent/d.txt", "gold": None})  # fmt: skip
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


@pytest.mark.slow
def test_ray_fleet_equals_local() -> None:
    pytest.importorskip("ray")
    model = resolve_model(None)
    sources = _sources()
    local = evaluate_many(model, sources, max_frames=FRAMES)
    remote = evaluate_many(model, sources, max_frames=FRAMES, executor="ray", workers=2)
    assert remote.failures == local.failures
    assert remote.report is not None and local.report is not None
    assert remote.report.summary() == local.report.summary() or all(
        a == b or (np.isnan(a) and np.isnan(b))
        for a, b in zip(remote.report.summary().values(), local.report.summary().values(), strict=True)
    )
    assert np.array_equal(remote.report.confusion, local.report.confusion)
    assert remote.report.stage1 == local.report.stage1 and remote.report.per_source == local.report.per_source
