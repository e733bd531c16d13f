"""ONNX Runtime's calibration tools as pairedge uses them: a data reader in equal batches, the KL-divergence
(entropy) range calibrator, and a quiet context for both.

Used by :mod:`pairedge.calibration.ranges` (the "gemm" placement's entropy ranges) and
:mod:`pairedge.calibration.quantize` (ONNX Runtime's own "all" placement), so neither imports the other.

ONNX Runtime's histogram calibrators (Entropy, Percentile) stack the calibration batches and crash when the
last batch is smaller than the others; :class:`ArrayReader` therefore feeds equal batches (a single batch
up to ``batch_rows`` rows; above that, equal batches with the last one padded by rows from the start).
"""

from __future__ import annotations

import contextlib
import io
import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.errors import InputError
from pairedge.core.modelmeta import INPUT_NAME

#: Histogram size of the entropy calibrator (ONNX Runtime's default of 128 bins for 128 quantized bins
#: leaves the KL search a single candidate: the min-max range).
ENTROPY_BINS = 2048
ENTROPY_QUANTIZED_BINS = 128


class ArrayReader:
    """ONNX Runtime ``CalibrationDataReader`` over (N, F) rows, in equal batches (see module docstring)."""

    def __init__(self, X: np.ndarray, batch_rows: int = 8192) -> None:
        X = np.ascontiguousarray(X, np.float32)
        if not len(X):
            raise InputError("calibration needs at least one sample, got zero")
        k = -(-len(X) // batch_rows)
        size = -(-len(X) // k)
        padded = np.concatenate([X, X[: k * size - len(X)]]) if k * size > len(X) else X
        self.batches = [padded[i * size : (i + 1) * size] for i in range(k)]
        self._next = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self._next >= len(self.batches):
            return None
        batch = self.batches[self._next]
        self._next += 1
        return {INPUT_NAME: batch}

    def rewind(self) -> None:
        self._next = 0


def entropy_ranges(model: Any, X: np.ndarray, batch_rows: int = 8192) -> dict[str, list[dict[str, Any]]]:
    """KL-divergence (entropy) ranges of every tensor of ``model`` (a ModelProto) on (N, F) rows ``X``,
    symmetric, as ONNX Runtime's ``TensorQuantOverrides`` (``{name: [{"rmin", "rmax"}]}``)."""
    import onnx

    with tempfile.TemporaryDirectory(prefix="pairedge-q-") as tmp, quiet():
        src = Path(tmp) / "in.onnx"
        onnx.save(model, str(src))
        return entropy_ranges_of_file(src, Path(tmp), X, batch_rows)


def entropy_ranges_of_file(
    src: Path, tmp: Path, X: np.ndarray, batch_rows: int = 8192
) -> dict[str, list[dict[str, Any]]]:
    """:func:`entropy_ranges` of the model saved at ``src``, the calibrator's scratch files in ``tmp``."""
    from onnxruntime.quantization.calibrate import CalibrationMethod, create_calibrator

    calibrator = create_calibrator(
        str(src),
        None,
        str(tmp / "augmented.onnx"),
        CalibrationMethod.Entropy,
        extra_options={
            "symmetric": True,
            "num_bins": ENTROPY_BINS,
            "num_quantized_bins": ENTROPY_QUANTIZED_BINS,
        },
    )
    calibrator.collect_data(ArrayReader(X, batch_rows))
    ranges = calibrator.compute_data()
    out = {}
    for name, value in ranges.items():
        lo, hi = (float(v) for v in value.range_value)
        bound = max(abs(lo), abs(hi), 1e-12)
        out[name] = [{"rmin": np.float32(-bound), "rmax": np.float32(bound)}]
    return out


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence ONNX Runtime's quantization tools (they print progress to stdout and log warnings)."""
    logger = logging.getLogger()
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)
