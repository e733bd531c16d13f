"""Typed classifier-backend options: each backend declares the dataclass it takes (``Backend.options_type``)
and options of another type are refused in one line before the model file is read."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from pairedge.core.bundled import default_model_dir
from pairedge.core.errors import InputError
from pairedge.runtime import Deployment, PipelineConfig
from pairedge.runtime.backends import BACKENDS, Backend, backend_class, get_backend
from pairedge.runtime.backends.ort import OnnxRuntimeBackend, OrtOptions
from rt_onnx_models import write_toy_model


@dataclass(frozen=True)
class OtherOptions:
    """Options of some other backend."""

    device_id: int = 0


def test_onnx_runtime_backends_declare_their_options() -> None:
    for name in ("onnxruntime", "onnxruntime-cuda", "onnxruntime-tensorrt"):
        assert backend_class(name).options_type is OrtOptions
    for name in BACKENDS:  # every declared type is a dataclass
        declared = backend_class(name).options_type
        assert declared is None or hasattr(declared, "__dataclass_fields__")


def test_options_of_another_type_are_refused_before_the_model_is_read(tmp_path: Path) -> None:
    missing = tmp_path / "never_read.onnx"
    with pytest.raises(InputError, match="expected options of type OrtOptions .* got OtherOptions"):
        get_backend("onnxruntime", missing, OtherOptions())
    write_toy_model(tmp_path / "m.onnx", stage=1)
    with get_backend("onnxruntime", tmp_path / "m.onnx", OrtOptions(intra_op_threads=2)) as backend:
        assert backend.options.intra_op_threads == 2
    with get_backend("onnxruntime", tmp_path / "m.onnx") as backend:
        assert backend.options == OrtOptions()


def test_the_backend_itself_refuses_them_too(tmp_path: Path) -> None:
    from pairedge.runtime.backends.model import load_model

    write_toy_model(tmp_path / "m.onnx", stage=1)
    with pytest.raises(InputError, match="OrtOptions"):
        OnnxRuntimeBackend(load_model(tmp_path / "m.onnx"), OtherOptions())  # type: ignore[arg-type]


def test_check_options_without_a_declared_type_passes_them_on() -> None:
    class Undeclared(Backend):
        def _activate(self) -> None: ...
        def _deactivate(self) -> None: ...
        def _infer(self, features):  # type: ignore[no-untyped-def]
            return features

    options = OtherOptions()
    assert Undeclared.check_options(options) is options and Undeclared.check_options(None) is None


def test_pipeline_config_takes_an_options_dataclass_only() -> None:
    assert PipelineConfig(backend_options=OrtOptions()).backend_options == OrtOptions()
    for bad in ({"intra_op_threads": 1}, OrtOptions):
        with pytest.raises(InputError, match="backend_options: expected the backend's options dataclass"):
            PipelineConfig(backend_options=bad)
    with pytest.raises(InputError, match="expected options of type OrtOptions"):
        Deployment(default_model_dir(), backend="onnxruntime").load(
            PipelineConfig(backend_options=OtherOptions())
        )
