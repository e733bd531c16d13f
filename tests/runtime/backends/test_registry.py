"""One vocabulary of classifier backends: registry names everywhere, short aliases accepted, unknown
refused."""

from __future__ import annotations

import pytest
from pairedge.core.errors import InputError
from pairedge.runtime.backends import ALIASES, BACKENDS, canonical_backend_name, resolve_backend_name


def test_aliases_map_onto_registry_names() -> None:
    assert set(ALIASES.values()) <= set(BACKENDS)
    assert canonical_backend_name("ort-cpu") == "onnxruntime"
    assert canonical_backend_name("ORT-TRT") == "onnxruntime-tensorrt"
    assert canonical_backend_name("auto") == "auto"
    assert resolve_backend_name("ort-cpu") == "onnxruntime"
    for name in BACKENDS:
        assert canonical_backend_name(name) == name


def test_unknown_backend_lists_names_and_aliases() -> None:
    with pytest.raises(
        InputError, match="unknown classifier backend 'bogus'.*onnxruntime.*ort-cpu = onnxruntime"
    ):
        canonical_backend_name("bogus")
