"""Pipeline.step with a fusing flow backend (``flow="cuda"`` on a GPU; the reference in pooled mode here)."""

from __future__ import annotations

import numpy as np
from pairedge.runtime.flow import get_flow_backend
from pairedge.runtime.flow.pooling import PooledFlowStream
from rt_scenes import scene


def test_pipeline_pooled_reference_matches_dense(tmp_path):
    """Pipeline.step with a fusing backend (the reference in pooled mode) = the dense path, per frame."""
    from pairedge.runtime import Pipeline, PipelineConfig, SmoothingConfig
    from rt_onnx_models import write_toy_model

    folder = tmp_path / "m"
    write_toy_model(folder / "stage1.onnx", stage=1, spec_name="pairedge", seed=1)
    write_toy_model(folder / "stage2.onnx", stage=2, spec_name="pairedge", seed=2)
    config = PipelineConfig(smoothing=SmoothingConfig(alpha=1.0))
    frames = list(scene(people=4, frames=4, size=(160, 120)))
    results = {}
    for pooled in (False, True):
        flow = get_flow_backend("reference", scale=0.5, pooled=pooled)
        with Pipeline.load(folder, flow=flow, config=config) as pipe:
            assert isinstance(pipe._stream, PooledFlowStream) == pooled
            results[pooled] = [pipe.step(f.image, f.detections, f.timestamp) for f in frames]
    for dense, pooled in zip(results[False], results[True], strict=True):
        assert not pooled.diagnostics.notes or pooled.diagnostics.notes == dense.diagnostics.notes
        np.testing.assert_allclose(pooled.p_interact, dense.p_interact, rtol=1e-4, atol=1e-6)
        assert "flow_gpu" not in pooled.timings_ms  # CPU backends report wall time only
    assert len(results[True][-1].p_interact) == 6
