"""INT8 post-training quantization: calibration readers, QDQ ONNX, calibration reports (``pairedge
calibrate``).

Public entry points: :func:`pairedge.calibration.api.calibrate` with
:class:`~pairedge.calibration.api.CalibrateOptions`, and
:func:`pairedge.calibration.qdq_rules.check_qdq_rules` (the TensorRT explicit-quantization lint that
``pairedge check`` reuses). Modules import ONNX and ONNX Runtime lazily, inside the functions that need them.
"""

from pairedge.calibration.api import DEFAULT_METHOD, CalibrateOptions, CalibrationResult, calibrate
from pairedge.calibration.qdq_rules import Issue, check_qdq_rules

__all__ = ["DEFAULT_METHOD", "CalibrateOptions", "CalibrationResult", "Issue", "calibrate", "check_qdq_rules"]
