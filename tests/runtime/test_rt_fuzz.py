"""Fuzzing the pipeline with malformed frames, detections and timestamps: never an exception (SPEC 9)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from pairedge.runtime import Pipeline
from pairedge.types import Detections
from rt_onnx_models import write_toy_model

coords = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.floats(-100.0, 200.0, width=32),
    st.sampled_from([0.0, 5.0, 40.0, 80.0, -3.0]),
)
frames = st.one_of(
    st.none(),
    st.sampled_from(["uint8", "float32", "int16", "bool"]).flatmap(
        lambda dt: st.sampled_from([(48, 64), (48, 64, 3), (48, 64, 4), (48, 64, 1), (3, 64, 3), (0, 0)]).map(
            lambda shape: np.zeros(shape, dt)
        )
    ),
)


@pytest.mark.parametrize("spec", ["liang2026", "pairedge"])
def test_pipeline_survives_fuzzed_input(tmp_path: Path, spec: str) -> None:
    write_toy_model(tmp_path / "m" / "stage1.onnx", stage=1, spec_name=spec)
    write_toy_model(tmp_path / "m" / "stage2.onnx", stage=2, spec_name=spec)
    pipe = Pipeline.load(tmp_path / "m", flow="dis")

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        frames,
        arrays(np.float32, st.tuples(st.integers(0, 6), st.just(4)), elements=coords),
        st.lists(st.integers(-3, 4), min_size=6, max_size=6),
        st.floats(allow_nan=True, allow_infinity=True),
    )
    def run(frame, boxes, ids, timestamp) -> None:
        n = len(boxes)
        dets = Detections(boxes, np.array(ids[:n], np.int64), np.ones(n, np.float32))
        result = pipe.step(frame, dets, timestamp)
        assert np.isfinite(result.timestamp)
        assert np.isfinite(result.p_interact).all() and np.isfinite(result.probs).all()
        assert len(result.track_ids) == len(np.unique(result.track_ids))
        assert result.to_json_dict()["frame"] == result.frame_index

    with pipe:
        run()
