"""The model loader refuses unusable or unsafe model files with a clear ModelError (SPEC section 9)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from pairedge.core.errors import ModelError
from pairedge.core.features import get_spec
from pairedge.runtime.backends import get_backend, load_model
from rt_onnx_models import toy_metadata, toy_proto, toy_weights, write_toy_model


def _save(proto: onnx.ModelProto, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(proto.SerializeToString())
    return path


def test_valid_model_loads(tmp_path: Path) -> None:
    write_toy_model(tmp_path / "stage1.onnx", stage=1)
    model = load_model(tmp_path / "stage1.onnx", stage=1)
    assert model.metadata.stage == 1 and model.spec.name == "liang2026"
    assert model.num_features == get_spec("liang2026").stage1_dim and model.num_classes == 2
    assert not model.has_external_data and model.path.is_absolute()


def test_missing_file_and_garbage(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not found"):
        load_model(tmp_path / "nope.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"\x00\xffnot a protobuf" * 10)
    with pytest.raises(ModelError, match="not a readable ONNX model"):
        load_model(tmp_path / "junk.onnx")


def test_missing_metadata(tmp_path: Path) -> None:
    proto = toy_proto(toy_weights(7, 2), None)
    with pytest.raises(ModelError, match="metadata key .* missing"):
        load_model(_save(proto, tmp_path / "m.onnx"))


def test_unknown_spec_and_wrong_version(tmp_path: Path) -> None:
    meta = toy_metadata(1, feature_spec="openpose2019")
    with pytest.raises(ModelError, match="unknown feature spec 'openpose2019'"):
        load_model(_save(toy_proto(toy_weights(7, 2), meta), tmp_path / "a.onnx"))
    meta = toy_metadata(1, feature_spec_version="0.0-old")
    with pytest.raises(ModelError, match="re-export"):
        load_model(_save(toy_proto(toy_weights(7, 2), meta), tmp_path / "b.onnx"))


def test_width_and_stage_mismatch(tmp_path: Path) -> None:
    meta = toy_metadata(1, num_features=5, norm_mean=(0.0,) * 5, norm_std=(1.0,) * 5)
    with pytest.raises(ModelError, match="expects 7 features"):
        load_model(_save(toy_proto(toy_weights(5, 2), meta), tmp_path / "a.onnx"))
    write_toy_model(tmp_path / "s2.onnx", stage=2)
    with pytest.raises(ModelError, match="expected a stage-1 model"):
        load_model(tmp_path / "s2.onnx", stage=1)
    # graph width disagrees with the metadata
    meta = toy_metadata(2)
    with pytest.raises(ModelError, match=r"output logits: expected shape \(pairs, 3\)"):
        load_model(_save(toy_proto(toy_weights(meta.num_features, 4), meta), tmp_path / "c.onnx"))


def test_wrong_input_name(tmp_path: Path) -> None:
    proto = toy_proto(toy_weights(7, 2), toy_metadata(1), input_name="x")
    with pytest.raises(ModelError, match="expected one input 'features'"):
        load_model(_save(proto, tmp_path / "m.onnx"))


def _external(tmp_path: Path) -> tuple[onnx.ModelProto, Path]:
    """A model whose initializers live in ``weights.data`` next to it."""
    folder = tmp_path / "model"
    folder.mkdir()
    weights = toy_weights(10, 3, seed=1)
    proto = toy_proto(weights, toy_metadata(2))
    onnx.save_model(
        proto,
        str(folder / "stage2.onnx"),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.data",
        size_threshold=0,
    )
    return onnx.load(str(folder / "stage2.onnx"), load_external_data=False), folder


def _relocate(proto: onnx.ModelProto, location: str) -> onnx.ModelProto:
    for tensor in proto.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    return proto


def test_external_data_inside_the_folder_runs(tmp_path: Path) -> None:
    _, folder = _external(tmp_path)
    model = load_model(folder / "stage2.onnx")
    assert model.has_external_data
    with get_backend("onnxruntime", model) as backend:
        assert backend.infer(np.zeros((3, 10), np.float32)).shape == (3, 3)


@pytest.mark.parametrize("kind", ["dotdot", "absolute"])
def test_external_data_escaping_the_folder_is_refused(tmp_path: Path, kind: str) -> None:
    proto, folder = _external(tmp_path)
    outside = tmp_path / "secret.data"
    (folder / "weights.data").rename(outside)
    location = "../secret.data" if kind == "dotdot" else str(outside)
    _save(_relocate(proto, location), folder / "stage2.onnx")
    with pytest.raises(ModelError, match="outside the model folder"):
        load_model(folder / "stage2.onnx")


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks on this platform")
def test_external_data_symlink_escaping_is_refused(tmp_path: Path) -> None:
    _, folder = _external(tmp_path)
    outside = tmp_path / "elsewhere.data"
    (folder / "weights.data").rename(outside)
    (folder / "weights.data").symlink_to(outside)
    with pytest.raises(ModelError, match="outside the model folder"):
        load_model(folder / "stage2.onnx")


def test_missing_external_data(tmp_path: Path) -> None:
    _, folder = _external(tmp_path)
    (folder / "weights.data").unlink()
    with pytest.raises(ModelError, match="missing"):
        load_model(folder / "stage2.onnx")
