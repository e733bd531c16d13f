"""Classifier-backend conformance suite, parametrised over every backend available on this machine."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from pairedge.core.bundled import default_model_dir
from pairedge.core.errors import BackendError, InputError
from pairedge.runtime import Deployment, PipelineConfig
from pairedge.runtime.backends import (
    BACKENDS,
    Backend,
    available_backends,
    backend_class,
    get_backend,
    load_model,
    resolve_backend_name,
)
from pairedge.runtime.backends.ort import OnnxRuntimeBackend, OrtOptions
from rt_onnx_models import write_toy_model

AVAILABLE = [name for name, reason in available_backends().items() if reason is None]
# Every available backend, plus the CPU backend with IO binding (the code path GPU providers use).
VARIANTS = [(name, OrtOptions()) for name in AVAILABLE] + [("onnxruntime", OrtOptions(io_binding=True))]
IDS = [f"{name}{'-iobinding' if opts.io_binding else ''}" for name, opts in VARIANTS]


@pytest.fixture(params=VARIANTS, ids=IDS)
def stage2(request: pytest.FixtureRequest, tmp_path: Path):
    name, options = request.param
    weights = write_toy_model(tmp_path / "stage2.onnx", stage=2, seed=3)
    backend = get_backend(name, tmp_path / "stage2.onnx", options)
    with backend:
        yield backend, weights


def test_registry_and_auto() -> None:
    assert {"onnxruntime", "onnxruntime-cuda", "onnxruntime-tensorrt"} <= set(BACKENDS)
    assert "onnxruntime" in AVAILABLE
    assert resolve_backend_name("auto") in AVAILABLE
    with pytest.raises(InputError, match="unknown classifier backend"):
        get_backend("tensorflow", "x.onnx")


def test_unavailable_backend_says_why(tmp_path: Path) -> None:
    write_toy_model(tmp_path / "m.onnx", stage=1)
    for name, reason in available_backends().items():
        if reason is not None:
            with pytest.raises(BackendError, match="not available"):
                get_backend(name, tmp_path / "m.onnx")
            assert ("TensorRT" if name == "tensorrt" else "onnxruntime") in reason


@pytest.mark.parametrize("n", [0, 1, 7, 512])
def test_outputs_match_numpy(stage2, n: int) -> None:
    backend, weights = stage2
    x = np.random.default_rng(n).normal(size=(n, backend.num_features)).astype(np.float32)
    got = backend.infer(x)
    assert got.shape == (n, 3) and got.dtype == np.float32
    np.testing.assert_allclose(got, weights.reference(x), rtol=1e-4, atol=1e-4)


def test_batch_sizes_can_change_between_calls(stage2) -> None:
    backend, weights = stage2
    rng = np.random.default_rng(0)
    for n in (5, 1, 300, 0, 2):
        x = rng.normal(size=(n, backend.num_features)).astype(np.float32)
        np.testing.assert_allclose(backend.infer(x), weights.reference(x), rtol=1e-4, atol=1e-4)


def test_empty_batch_does_not_call_the_model(stage2, monkeypatch: pytest.MonkeyPatch) -> None:
    backend, _ = stage2

    def boom(features: np.ndarray) -> np.ndarray:
        raise AssertionError("_infer called for an empty batch")

    monkeypatch.setattr(backend, "_infer", boom)
    out = backend.infer(np.zeros((0, backend.num_features), np.float32))
    assert out.shape == (0, 3)


def test_results_are_owned_by_the_caller(stage2) -> None:
    backend, _ = stage2
    x = np.ones((4, backend.num_features), np.float32)
    first = backend.infer(x)
    keep = first.copy()
    backend.infer(-x)
    np.testing.assert_array_equal(first, keep)


def test_non_contiguous_input_is_accepted(stage2) -> None:
    backend, weights = stage2
    wide = np.random.default_rng(1).normal(size=(6, 2 * backend.num_features)).astype(np.float32)
    x = wide[:, ::2]
    np.testing.assert_allclose(
        backend.infer(x), weights.reference(np.ascontiguousarray(x)), rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda f: np.zeros((3, f), np.float64), "float32"),
        (lambda f: np.zeros((3, f + 1), np.float32), "shape"),
        (lambda f: np.zeros(f, np.float32), "shape"),
        (lambda f: np.zeros((1, 3, f), np.float32), "shape"),
        (lambda f: np.full((2, f), np.nan, np.float32), "NaN"),
        (lambda f: np.full((2, f), np.inf, np.float32), "NaN or inf"),
        (lambda f: [[0.0] * f], "numpy array"),
    ],
)
def test_bad_inputs_raise_input_error(stage2, make, match: str) -> None:
    backend, _ = stage2
    with pytest.raises(InputError, match=match):
        backend.infer(make(backend.num_features))


def test_lifecycle(tmp_path: Path) -> None:
    write_toy_model(tmp_path / "m.onnx", stage=1)
    backend = get_backend("onnxruntime", tmp_path / "m.onnx")
    assert isinstance(backend, Backend) and not backend.is_active
    x = np.zeros((2, backend.num_features), np.float32)
    with pytest.raises(BackendError, match="not active"):
        backend.infer(x)
    with backend as active:
        assert active is backend and backend.is_active
        assert backend.infer(x).shape == (2, 2)
    assert not backend.is_active
    backend.activate()
    backend.activate()  # idempotent
    assert backend.infer(x).shape == (2, 2)
    backend.deactivate()
    backend.deactivate()
    with pytest.raises(BackendError):
        backend.infer(x)


def test_model_file_is_checked_once_and_shared(tmp_path: Path) -> None:
    write_toy_model(tmp_path / "m.onnx", stage=2)
    model = load_model(tmp_path / "m.onnx", stage=2)
    a, b = get_backend("onnxruntime", model), get_backend("onnxruntime", model)
    assert a.model is b.model and a.num_classes == 3 and model.labels[0] == "walking_together"


def test_thread_option_is_validated() -> None:
    with pytest.raises(InputError, match="intra_op_threads"):
        OrtOptions(intra_op_threads=-1)
    with pytest.raises(InputError, match="optimization"):
        OrtOptions(optimization="max")
    for bad in [(1, 64), (64, 1, 512), (0, 1, 2), (1.0, 2, 3)]:
        with pytest.raises(InputError, match="trt_profile"):
            OrtOptions(trt_profile=bad)  # type: ignore[arg-type]
    assert OrtOptions(trt_profile=(1, 64, 512)).trt_profile == (1, 64, 512)


# -- backend_options: Typed classifier-backend options: each backend declares the dataclass it takes
# (``Backend.options_type``) and options of another type are refused in one line before the model file is
# read.


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
