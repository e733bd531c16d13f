"""The Deployment value: each field checked once at construction with the error the CLI prints, the bundled
model by name, one line for run notes, and the pipeline it opens equal to Pipeline.load's."""

from __future__ import annotations

import pickle
from dataclasses import FrozenInstanceError, replace
from pathlib import Path

import pytest
from pairedge.core.artefacts import PRECISIONS, check_precision
from pairedge.core.bundled import default_model_dir, describe_model
from pairedge.core.errors import InputError
from pairedge.runtime import Deployment, Pipeline
from pairedge.runtime.backends.registry import canonical_backend_name
from pairedge.runtime.deployment import check_flow_name
from pairedge.runtime.flow.registry import FLOW_BACKENDS
from pairedge.runtime.runner.run import RunOptions
from run_demo_helpers import toy_model


def test_defaults_are_the_bundled_model_at_fp32_on_auto_backends() -> None:
    d = Deployment()
    assert (d.model, d.precision, d.backend, d.flow) == ("default", "fp32", "auto", "auto")
    assert d.folder == default_model_dir()
    assert Deployment(None) == d  # None (an unset --model) is the bundled model too
    assert Deployment(str(default_model_dir())).folder == default_model_dir()


def test_fields_are_checked_once_with_the_validators_messages() -> None:
    """The messages are the ones the shared validators give (the CLI prints them as its one error line)."""
    with pytest.raises(InputError) as expected:
        check_precision("fp8")
    with pytest.raises(InputError) as got:
        Deployment(precision="fp8")
    assert str(got.value) == str(expected.value)
    with pytest.raises(InputError) as expected:
        canonical_backend_name("tensorflow")
    with pytest.raises(InputError) as got:
        Deployment(backend="tensorflow")
    assert str(got.value) == str(expected.value)
    with pytest.raises(InputError, match="unknown flow backend 'opencv'.*'auto' or 'none'"):
        Deployment(flow="opencv")
    with pytest.raises(InputError, match="precision"):
        Deployment(precision=16)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="model"):
        Deployment(model=3)  # type: ignore[arg-type]


def test_names_accepted_and_aliases_stored_as_registry_names() -> None:
    for precision in PRECISIONS:
        assert Deployment(precision=precision).precision == precision
    assert Deployment(backend="ORT-CPU").backend == "onnxruntime"
    assert Deployment(backend=" trt ").backend == "tensorrt"
    for flow in ("auto", "none", *FLOW_BACKENDS):
        assert check_flow_name(flow) == flow == Deployment(flow=flow).flow


def test_frozen_picklable_and_replace_checks_again(tmp_path: Path) -> None:
    d = Deployment(toy_model(tmp_path / "m"), precision="fp16", backend="ort-cpu", flow="none")
    with pytest.raises(FrozenInstanceError):
        d.precision = "int8"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(d)) == d  # Ray ships it to the eval workers
    assert replace(d, flow="dis").flow == "dis" and replace(d, flow="dis").folder == d.folder
    with pytest.raises(InputError, match="precision"):
        replace(d, precision="bf16")


def test_describe_names_the_model_precision_and_backends(tmp_path: Path) -> None:
    bundled = Deployment(precision="int8", backend="onnxruntime")
    assert bundled.describe().startswith(describe_model(default_model_dir()))
    assert "precision int8, classifier backend onnxruntime, flow auto" in bundled.describe()
    own = Deployment(tmp_path / "mine")
    assert own.describe().startswith(f"{tmp_path / 'mine'}, precision fp32")


def test_load_opens_what_pipeline_load_opens() -> None:
    with Deployment(backend="onnxruntime", flow="farneback").load() as a:
        with Pipeline.load(default_model_dir(), "onnxruntime", "farneback") as b:
            assert a.describe() == b.describe()
    with Deployment(backend="onnxruntime", flow="none").load() as pipe:
        assert pipe.flow is None


def test_model_files_are_checked_by_load(tmp_path: Path) -> None:
    """A folder is resolved at construction; its files are read (and refused) by load()."""
    from pairedge.core.errors import ModelError

    d = Deployment(tmp_path / "missing")
    with pytest.raises(ModelError, match="expected a model directory"):
        d.load()
    fp32_only = Deployment(toy_model(tmp_path / "toy"), precision="int8")
    with pytest.raises(ModelError, match="no int8 models here"):
        fp32_only.load()


def test_run_options_hold_the_deployment_once() -> None:
    options = RunOptions(Deployment(backend="ort-cpu", precision="fp16"), video=False)
    assert options.deployment.backend == "onnxruntime"
    assert (options.deployment.folder, options.deployment.flow, options.deployment.precision) == (
        default_model_dir(),
        "auto",
        "fp16",
    )
    assert not hasattr(options, "model") and not hasattr(
        options, "precision"
    )  # no second copy of the settings
    assert RunOptions().deployment == Deployment()
    assert "precision" not in RunOptions.__dataclass_fields__  # typed once: in the Deployment
