"""The streaming runtime a robot embeds: pipeline, flow backends, classifier backends.

>>> from pairedge.runtime import Deployment
>>> with Deployment("model_dir").load() as pipe:  # stage1.onnx + stage2.onnx
...     result = pipe.step(frame_bgr, detections, timestamp)
...     result.interactions, result.groups, result.timings_ms
>>> with Deployment("model_dir", precision="int8", backend="auto").load() as pipe:  # int8 files
...     ...

``Deployment`` is the one door: it owns the precision and both backends and hands them down.

Never imports torch; TensorRT / CUDA bindings are imported lazily by the backends that need them.
"""

from pairedge.runtime.config import FlowConfig, PipelineConfig, SmoothingConfig, ValidationConfig
from pairedge.runtime.deployment import Deployment
from pairedge.runtime.pipeline import Pipeline
from pairedge.runtime.tracker import IoUTracker, TrackerConfig
from pairedge.runtime.types import Diagnostics, FrameResult, Group, Interaction

__all__ = [
    "Deployment",
    "Diagnostics",
    "FlowConfig",
    "FrameResult",
    "Group",
    "Interaction",
    "IoUTracker",
    "Pipeline",
    "PipelineConfig",
    "SmoothingConfig",
    "TrackerConfig",
    "ValidationConfig",
]
