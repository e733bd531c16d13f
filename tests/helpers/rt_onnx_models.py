"""Tiny ONNX classifiers with pairedge metadata, built with onnx.helper for the runtime tests.

Graph: ``features`` (pairs, F) -> (x - mean) / std -> MatMul W -> Add b -> ``logits`` (pairs, C), the
z-scoring inside the graph as :mod:`pairedge.core.modelmeta` requires. :func:`reference` computes the same in
numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from pairedge.core.features import get_spec
from pairedge.core.modelmeta import ModelMetadata


@dataclass(frozen=True)
class ToyModel:
    """Weights of a linear classifier with baked-in z-scoring."""

    mean: np.ndarray  # (F,) float32
    std: np.ndarray  # (F,) float32
    weight: np.ndarray  # (F, C) float32
    bias: np.ndarray  # (C,) float32

    def reference(self, features: np.ndarray) -> np.ndarray:
        z = (features.astype(np.float64) - self.mean) / self.std
        return (z @ self.weight + self.bias).astype(np.float32)


def toy_weights(num_features: int, num_classes: int, seed: int = 0) -> ToyModel:
    rng = np.random.default_rng(seed)
    return ToyModel(
        mean=rng.normal(size=num_features).astype(np.float32),
        std=rng.uniform(0.5, 2.0, size=num_features).astype(np.float32),
        weight=rng.normal(size=(num_features, num_classes)).astype(np.float32),
        bias=rng.normal(size=num_classes).astype(np.float32),
    )


def toy_proto(
    weights: ToyModel,
    metadata: ModelMetadata | None,
    *,
    input_name: str = "features",
    extra_props: dict[str, str] | None = None,
) -> onnx.ModelProto:
    f, c = weights.weight.shape
    nodes = [
        helper.make_node("Sub", [input_name, "mean"], ["centred"]),
        helper.make_node("Div", ["centred", "std"], ["z"]),
        helper.make_node("MatMul", ["z", "weight"], ["scores"]),
        helper.make_node("Add", ["scores", "bias"], ["logits"]),
    ]
    inits = [
        numpy_helper.from_array(weights.mean, "mean"),
        numpy_helper.from_array(weights.std, "std"),
        numpy_helper.from_array(weights.weight, "weight"),
        numpy_helper.from_array(weights.bias, "bias"),
    ]
    graph = helper.make_graph(
        nodes,
        "toy",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["pairs", f])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["pairs", c])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    props = dict(metadata.to_props()) if metadata is not None else {}
    props.update(extra_props or {})
    helper.set_model_props(model, props)
    onnx.checker.check_model(model)
    return model


def toy_metadata(
    stage: int, spec_name: str = "liang2026", labels: tuple[str, ...] | None = None, **overrides: object
) -> ModelMetadata:
    spec = get_spec(spec_name)
    width = spec.stage1_dim if stage == 1 else spec.stage2_dim
    if labels is None:
        labels = (
            ("not_interacting", "interacting")
            if stage == 1
            else ("walking_together", "standing_together", "sitting_together")
        )
    fields: dict[str, object] = {
        "stage": stage,
        "feature_spec": spec.name,
        "feature_spec_version": spec.version,
        "labels": labels,
        "num_features": width,
        "norm_mean": (0.0,) * width,
        "norm_std": (1.0,) * width,
        "thresholds": {"p_interact": 0.5, "tau_group": 0.5} if stage == 1 else {},
        "architecture": "toy_linear",
    }
    fields.update(overrides)
    return ModelMetadata(**fields)  # type: ignore[arg-type]


def write_toy_model(
    path: Path, stage: int, spec_name: str = "liang2026", seed: int = 0, **overrides: object
) -> ToyModel:
    """Write a toy classifier with valid metadata to ``path``; returns its weights for the reference."""
    meta = toy_metadata(stage, spec_name, **overrides)
    weights = toy_weights(meta.num_features, len(meta.labels), seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(toy_proto(weights, meta), str(path))
    return weights
