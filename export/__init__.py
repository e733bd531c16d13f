"""PyTorch model definitions, training, ONNX export and TensorRT engine building.

The modules here that define or train models import torch at module level; nothing outside
``pairedge.export`` imports them at module level (ruff rule TID253 enforces it).
"""
