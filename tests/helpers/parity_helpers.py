"""Candidate model folders for the parity tests: the bundled model with one thing changed."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
from pairedge.core.bundled import default_model_dir

Edit = Callable[[onnx.ModelProto, dict[str, str]], None]


def make_candidate(tmp: Path, edits: dict[int, Edit] | None = None) -> Path:
    """A copy of the bundled model's two ONNX files (no manifest), stage ``n`` changed by ``edits[n]``."""
    folder = tmp / "candidate"
    folder.mkdir(parents=True, exist_ok=True)
    for stage in (1, 2):
        src = default_model_dir() / f"stage{stage}.onnx"
        if edits is None or stage not in edits:
            shutil.copy(src, folder / src.name)
            continue
        model = onnx.load(str(src))
        props = {p.key: p.value for p in model.metadata_props}
        edits[stage](model, props)
        del model.metadata_props[:]
        for k, v in props.items():
            model.metadata_props.add(key=k, value=v)
        onnx.save(model, str(folder / src.name))
    return folder


def set_initializer(model: onnx.ModelProto, name: str, change: Callable[[np.ndarray], np.ndarray]) -> None:
    """Replace initializer ``name`` by ``change(its value)``."""
    for k, init in enumerate(model.graph.initializer):
        if init.name == name:
            new = numpy_helper.from_array(change(numpy_helper.to_array(init).copy()), name)
            model.graph.initializer[k].CopyFrom(new)
            return
    raise KeyError(name)


def set_extra(props: dict[str, str], **values: object) -> None:
    extra = json.loads(props.get("pairedge.extra", "{}"))
    extra.update(values)
    props["pairedge.extra"] = json.dumps(extra)


def box_only_toy(path: Path, stage: int) -> None:
    """A random-weight MLP of the pairedge spec in box-only mode with the CAD8 label set."""
    from onnx import TensorProto, helper, numpy_helper
    from pairedge.core.features import get_spec
    from pairedge.core.labels import CAD8, STAGE1
    from pairedge.core.modelmeta import ModelMetadata

    spec = get_spec("pairedge")
    f = spec.stage1_dim if stage == 1 else spec.stage2_dim
    labels = STAGE1.classes if stage == 1 else CAD8.classes
    w = np.random.default_rng(stage).normal(size=(f, len(labels))).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["features", "w"], ["logits"])],
        "toy",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["pairs", f])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["pairs", len(labels)])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    meta = ModelMetadata(
        stage=stage,
        feature_spec="pairedge",
        feature_spec_version=spec.version,
        labels=labels,
        num_features=f,
        norm_mean=(0.0,) * f,
        norm_std=(1.0,) * f,
        extra={"feature_config": {"motion": "boxes"}},
    )
    for k, v in meta.to_props().items():
        model.metadata_props.add(key=k, value=v)
    onnx.save(model, str(path))
