"""ONNX files for the TensorRT tests: the fp16 and Q/DQ int8 variants ``pairedge calibrate`` makes, produced
with its own functions (``pairedge.calibration.fp16.to_fp16`` and ``pairedge.calibration.quantize``) on
Gaussian calibration rows, so the tests see the same graph structure as a calibrated model folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

DEFAULT_MODEL = Path(__file__).resolve().parents[3] / "sdk" / "models" / "default"


def make_fp16(src: Path, dst: Path) -> None:
    """float16 weights and compute, float32 inputs / outputs, the standardisation kept in float32."""
    from pairedge.calibration.fp16 import to_fp16

    onnx.save(to_fp16(onnx.load(str(src))), str(dst))


def make_int8(src: Path, dst: Path, rows: int = 512) -> None:
    """Static Q/DQ int8 with calibrate's TensorRT settings (symmetric, per-channel weights, float bias)."""
    from pairedge.calibration.quantize import QuantConfig, preprocess, quantize

    model = onnx.load(str(src))
    width = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    x = np.random.default_rng(0).normal(size=(rows, width)).astype(np.float32)
    onnx.save(quantize(preprocess(model), x, QuantConfig()), str(dst))
