"""ONNX export: graph contract, metadata, checker, and ONNX Runtime vs PyTorch parity for every
architecture."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from pairedge.core.errors import ModelError  # noqa: E402
from pairedge.core.labels import CAD8, PAPER3, STAGE1  # noqa: E402
from pairedge.core.modelmeta import ModelMetadata  # noqa: E402
from pairedge.export.checkpoint import Checkpoint  # noqa: E402
from pairedge.export.models import ModelConfig, build_model, set_normalization  # noqa: E402
from pairedge.export.onnx_export import export_checkpoint, max_abs_difference  # noqa: E402

CASES = [
    (ModelConfig("stage1_mlp", 7, 2), STAGE1.classes),
    (ModelConfig("relation_net", 14, 8, person_features=4, pair_features=6), CAD8.classes),
    (ModelConfig("residual_mlp", 10, 3, dropout=0.3), PAPER3.classes),
    (ModelConfig("paper_adaptive_geometric", 7, 2), STAGE1.classes),
]


def _checkpoint(config: ModelConfig, labels: tuple[str, ...], seed: int = 0) -> Checkpoint:
    """A model with non-trivial normalisation and BatchNorm running statistics (as after training)."""
    torch.manual_seed(seed)
    model = build_model(config)
    f = config.num_features
    set_normalization(model, np.linspace(-5, 50, f), np.linspace(0.01, 20, f))
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm1d):
                module.running_mean.uniform_(-1, 1)
                module.running_var.uniform_(0.5, 2)
                module.weight.uniform_(0.5, 1.5)
    model.train()  # export must switch to eval mode itself
    return Checkpoint(
        model=model,
        config=config,
        stage=1 if labels == STAGE1.classes else 2,
        labels=labels,
        feature_spec="liang2026",
        feature_spec_version="1",
        thresholds={"p_interact": 0.5},
        data_fingerprint="sha256:test",
    )


@pytest.mark.parametrize(("config", "labels"), CASES, ids=lambda c: getattr(c, "architecture", ""))
def test_export_parity_and_contract(config: ModelConfig, labels: tuple[str, ...], tmp_path: Path) -> None:
    ckpt = _checkpoint(config, labels)
    result = export_checkpoint(ckpt, tmp_path / "m.onnx", check_batches=(1, 300))
    assert result.max_abs_diff <= 1e-5
    assert result.batch_sizes == (1, 300)
    assert result.onnx_bytes < 1_000_000
    proto = onnx.load(str(result.path))
    onnx.checker.check_model(proto, full_check=True)
    assert {o.domain: o.version for o in proto.opset_import}[""] == 17
    inp, out = proto.graph.input[0], proto.graph.output[0]
    assert (inp.name, out.name) == ("features", "logits")
    assert inp.type.tensor_type.shape.dim[0].dim_param == "pairs"
    assert out.type.tensor_type.shape.dim[1].dim_value == len(labels)
    assert [n.op_type for n in proto.graph.node if n.op_type != "Identity"][:2] == ["Sub", "Div"]
    meta = ModelMetadata.from_props({p.key: p.value for p in proto.metadata_props})
    assert meta == result.metadata
    assert meta.labels == labels and meta.architecture == config.architecture
    assert meta.norm_std[0] == pytest.approx(0.01) and meta.pairedge_version
    # dropout is inactive: two runs agree, and batch composition does not change a row's logits
    session = ort.InferenceSession(str(result.path), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).normal(size=(5, config.num_features)).astype(np.float32) * 10
    (a,) = session.run(None, {"features": x})
    (b,) = session.run(None, {"features": x[:1]})
    assert np.allclose(a[:1], b, atol=1e-6)
    assert ckpt.model.training, "the caller's model must not be modified"


def test_parity_on_given_inputs_within_four_std(tmp_path: Path) -> None:
    config, labels = CASES[2]
    ckpt = _checkpoint(config, labels)
    meta = ckpt.metadata()
    z = np.random.default_rng(2).uniform(-4, 4, size=(64, 10))
    real = (np.asarray(meta.norm_mean) + z * np.asarray(meta.norm_std)).astype(np.float32)
    result = export_checkpoint(ckpt, tmp_path / "m.onnx", check_inputs=real)
    assert result.max_abs_diff <= 1e-5
    assert max_abs_difference(ckpt.model, result.path, real) <= 1e-5


def test_parity_detects_a_different_model(tmp_path: Path) -> None:
    config, labels = CASES[0]
    result = export_checkpoint(_checkpoint(config, labels, seed=0), tmp_path / "m.onnx")
    other = _checkpoint(config, labels, seed=1).model
    x = np.random.default_rng(0).normal(size=(10, 7)).astype(np.float32)
    assert max_abs_difference(other, result.path, x) > 1e-3


def test_metadata_must_match_buffers(tmp_path: Path) -> None:
    config, labels = CASES[0]
    ckpt = _checkpoint(config, labels)
    from pairedge.export.onnx_export import export_model

    meta = ckpt.metadata()
    bad = ModelMetadata(**{**meta.__dict__, "norm_mean": tuple(0.0 for _ in meta.norm_mean)})
    with pytest.raises(ModelError, match="normalisation"):
        export_model(ckpt.model, bad, tmp_path / "m.onnx")
