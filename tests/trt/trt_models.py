"""ONNX files for the TensorRT tests: fp16 and Q/DQ int8 variants of a model, made with ONNX Runtime's tools."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

DEFAULT_MODEL = Path(__file__).resolve().parents[2] / "sdk" / "models" / "default"


def make_fp16(src: Path, dst: Path) -> None:
    """float16 weights and compute, float32 inputs / outputs (casts at the edges), metadata kept."""
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = onnx.load(str(src))
    half = convert_float_to_float16(model, keep_io_types=True)
    del half.metadata_props[:]
    half.metadata_props.extend(model.metadata_props)
    onnx.save(half, str(dst))


def make_int8(src: Path, dst: Path, samples: int = 256) -> None:
    """Static Q/DQ int8 (symmetric, per-channel weights, bias not quantized), calibrated on Gaussian features."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    model = onnx.load(str(src))
    width = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    rng = np.random.default_rng(0)
    batches = [{"features": rng.normal(size=(16, width)).astype(np.float32)} for _ in range(samples // 16)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter(batches)

        def get_next(self) -> dict | None:
            return next(self._it, None)

    quantize_static(
        str(src),
        str(dst),
        Reader(),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
        extra_options={"ActivationSymmetric": True, "WeightSymmetric": True, "QuantizeBias": False},
    )
    out = onnx.load(str(dst))
    del out.metadata_props[:]
    out.metadata_props.extend(model.metadata_props)
    onnx.save(out, str(dst))
