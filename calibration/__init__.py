"""INT8 post-training quantization: calibration data readers, QDQ ONNX, calibration reports."""
