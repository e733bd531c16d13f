"""Typed flow options and the declared FlowBackend contract (close, GPU time, pooled flow) of every
backend."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.core.features.flowpool import pooled_reference
from pairedge.runtime.flow import (
    FLOW_BACKENDS,
    FlowOptions,
    PoolRequest,
    flow_backend_class,
    get_flow_backend,
)
from pairedge.runtime.flow.dis import DISFlow
from pairedge.runtime.flow.farneback import FarnebackFlow
from pairedge.runtime.flow.reference import ReferenceFlow
from rt_scenes import scene


@pytest.mark.parametrize("name", sorted(FLOW_BACKENDS))
def test_every_backend_declares_frozen_options_with_a_scale(name: str) -> None:
    cls = flow_backend_class(name)  # the CUDA class imports without a GPU: only its module is loaded
    assert issubclass(cls.Options, FlowOptions) and cls.Options is not FlowOptions
    options = cls.Options()
    assert 0 < options.scale <= 1 and isinstance(options.scale, float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.scale = 0.3  # type: ignore[misc]
    assert cls.options_for(0.25).scale == 0.25


def test_options_and_keywords_build_the_same_backend() -> None:
    typed = get_flow_backend("dis", DISFlow.Options(preset="ultrafast", scale=0.25))
    keywords = get_flow_backend("dis", preset="ultrafast", scale=0.25)
    assert typed.options == keywords.options == DISFlow(preset="ultrafast", scale=0.25).options
    assert repr(typed) == "DISFlow(preset='ultrafast', scale=0.25)" and typed.preset == "ultrafast"
    assert DISFlow.options_for(0.5, None) == DISFlow.Options(preset="fast", scale=0.5)
    assert DISFlow.options_for(0.5, "medium").preset == "medium"
    assert FarnebackFlow.options_for(1.0, "medium") == FarnebackFlow.Options(scale=1.0)  # no presets: ignored
    assert get_flow_backend("farneback", scale=None).scale == 1.0  # None keeps the default
    assert get_flow_backend("farneback").preset is None


def test_options_of_another_backend_or_mixed_with_keywords_are_refused() -> None:
    with pytest.raises(InputError, match=r"expected FarnebackFlow.Options, got DISFlow.Options"):
        get_flow_backend("farneback", DISFlow.Options())
    with pytest.raises(InputError, match="not both"):
        get_flow_backend("dis", DISFlow.Options(), scale=0.5)
    with pytest.raises(InputError, match=r"unknown option\(s\) \['preset'\]"):
        get_flow_backend("farneback", preset="fast")
    with pytest.raises(InputError, match="preset"):
        DISFlow.Options(preset="slow")


def test_cpu_backends_declare_close_gpu_time_and_cpu_pooling() -> None:
    frames = [f.image[:, :, 1].copy() for f in scene(people=2, frames=2, size=(96, 64))]
    boxes = np.array([[10, 10, 30, 40], [50, 5, 20, 30]], np.float64)
    request = PoolRequest(boxes, (0.15, 0.05), 8)
    for backend in (get_flow_backend("dis"), ReferenceFlow(scale=0.5)):
        assert not backend.emulated and backend.gpu_ms() is None and not backend.fuses_pooling
        a, b = (backend.resize(f, k) for k, f in enumerate(frames))
        pooled = backend.compute_pooled(a, b, request)
        want = pooled_reference(backend.compute_scaled(a, b), boxes, backend.scale, (0.15, 0.05), 8)
        np.testing.assert_array_equal(pooled.moments, want.moments)
        np.testing.assert_array_equal(pooled.grid, want.grid)
        backend.close()
        backend.close()  # idempotent
    assert ReferenceFlow(pooled=True).fuses_pooling
