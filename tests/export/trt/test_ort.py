"""ONNX Runtime's TensorRT provider options: engine + timing caches, int8 from Q/DQ, the pair profile."""

from __future__ import annotations

from pathlib import Path

from pairedge.core.features import get_spec
from pairedge.runtime.backends import load_model
from pairedge.runtime.backends.ort import OnnxRuntimeTensorRTBackend, OrtOptions


def _trt_options(onnx: Path, **kwargs) -> dict:
    backend = OnnxRuntimeTensorRTBackend(load_model(onnx), OrtOptions(**kwargs))
    (name, options), *fallbacks = backend._provider_list()
    assert name == "TensorrtExecutionProvider" and fallbacks[-1] == "CPUExecutionProvider"
    return options


def test_int8_follows_the_qdq_graph(full_model_dir: Path) -> None:
    assert _trt_options(full_model_dir / "stage1.int8.onnx").get("trt_int8_enable") is True
    assert "trt_int8_enable" not in _trt_options(full_model_dir / "stage1.onnx")
    assert "trt_int8_enable" not in _trt_options(full_model_dir / "stage1.int8.onnx", trt_int8=False)


def test_caches_and_profile(model_dir: Path, tmp_path: Path) -> None:
    opts = _trt_options(model_dir / "stage2.onnx", trt_cache_dir=str(tmp_path), trt_profile=(1, 64, 512))
    assert opts["trt_engine_cache_enable"] and opts["trt_engine_cache_path"] == str(tmp_path)
    assert opts["trt_timing_cache_enable"] and opts["trt_timing_cache_path"] == str(tmp_path)
    assert (
        opts["trt_profile_min_shapes"],
        opts["trt_profile_opt_shapes"],
        opts["trt_profile_max_shapes"],
    ) == tuple(f"features:{n}x{get_spec('pairedge').stage2_dim}" for n in (1, 64, 512))
    assert "trt_profile_min_shapes" not in _trt_options(model_dir / "stage2.onnx")
