"""Optical-flow backends behind one interface (:class:`FlowBackend`) with a registry by name.

>>> from pairedge.runtime.flow import get_flow_backend
>>> flow = get_flow_backend("dis", preset="medium", scale=0.5)
>>> from pairedge.runtime.flow.dis import DISFlow
>>> flow = get_flow_backend("dis", DISFlow.Options(preset="medium", scale=0.5))  # the same, typed

Backends: ``dis`` (OpenCV DIS, the CPU default) and ``farneback`` (OpenCV Farneback with the exact
parameters of the ``liang2026`` features). :class:`FlowStream` feeds a stream of frames to a backend and
keeps the previous frame in a reused buffer.
"""

from pairedge.runtime.flow.base import FlowBackend, FlowOptions, PoolRequest, scaled_size
from pairedge.runtime.flow.registry import (
    DEFAULT_FLOW_BACKEND,
    FLOW_BACKENDS,
    available_flow_backends,
    flow_backend_class,
    get_flow_backend,
)
from pairedge.runtime.flow.stream import FlowStream

__all__ = [
    "DEFAULT_FLOW_BACKEND",
    "FLOW_BACKENDS",
    "FlowBackend",
    "FlowOptions",
    "FlowStream",
    "PoolRequest",
    "available_flow_backends",
    "flow_backend_class",
    "get_flow_backend",
    "scaled_size",
]
