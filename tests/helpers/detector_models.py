"""ONNX person detectors built with ``onnx.helper`` that emit known boxes, one per accepted layout.

Each graph takes a real image input (so the detector's pre-processing runs) and returns constant outputs
plus ``0 * ReduceMean(image)``, so the output depends on the input graph-wise and ONNX Runtime cannot fold
the input away. What the layout detection reads is as the real exports declare it
(``tests/fixtures/detectors/signatures.json``): Ultralytics' metadata keys, one candidate per grid cell
(``pad_to_grid``), an ``Exp`` node in a decoded YOLOX graph.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def pad_to_grid(rows: np.ndarray, size: tuple[int, int], per_cell: int = 1) -> np.ndarray:
    """``rows`` (N, K) followed by zero rows up to ``per_cell`` x the stride-8/16/32 grid cells of
    ``size``."""
    cells = per_cell * sum((size[0] // s) * (size[1] // s) for s in (8, 16, 32))
    return np.concatenate([rows, np.zeros((cells - len(rows), rows.shape[1]), rows.dtype)]).astype(np.float32)


#: The metadata keys an Ultralytics export writes (values shortened), as in signatures.json.
ULTRALYTICS_METADATA = {
    "description": "Ultralytics YOLOv8n model",
    "author": "Ultralytics",
    "version": "8.4.190",
    "stride": "32",
    "task": "detect",
    "head": "Detect",
    "batch": "1",
    "names": "{0: 'person', 1: 'car'}",
    "args": "{'batch': 1, 'nms': False}",
    "end2end": "False",
}


def _graph_outputs(
    consts: dict[str, np.ndarray],
    size: tuple[int, int],
    extra_inputs: list | None = None,
    image_shape=None,
    exp: bool = False,
) -> onnx.GraphProto:
    h, w = size
    shape = image_shape if image_shape is not None else [1, 3, h, w]
    inputs = [helper.make_tensor_value_info("images", TensorProto.FLOAT, shape), *(extra_inputs or [])]
    nodes = [helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0)]
    if exp:  # a decoded head computes exp(log wh): 0 * exp(mean) keeps the outputs as given
        nodes += [helper.make_node("Exp", ["mean"], ["e"]), helper.make_node("Mul", ["e", "zero"], ["nil"])]
    else:
        nodes.append(helper.make_node("Mul", ["mean", "zero"], ["nil"]))
    inits = [numpy_helper.from_array(np.zeros((), np.float32), "zero")]
    outputs = []
    for name, value in consts.items():
        inits.append(numpy_helper.from_array(value, f"{name}_const"))
        if value.dtype == np.float32:
            nodes.append(helper.make_node("Add", [f"{name}_const", "nil"], [name]))
        else:
            nodes.append(helper.make_node("Identity", [f"{name}_const"], [name]))
        elem = TensorProto.FLOAT if value.dtype == np.float32 else TensorProto.INT64
        outputs.append(helper.make_tensor_value_info(name, elem, list(value.shape)))
    return helper.make_graph(nodes, "detector", inputs, outputs, inits)


def save(graph: onnx.GraphProto, path: Path, metadata: dict[str, str] | None = None) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    for key, value in (metadata or {}).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def ultralytics_model(path: Path, rows: np.ndarray, size=(320, 320), metadata: bool = True) -> Path:
    """``rows`` (N, 4 + C): cx cy w h + class scores in network pixels -> output0 [1, 4 + C, cells]."""
    out = np.ascontiguousarray(pad_to_grid(rows, size).T[None])
    meta = {**ULTRALYTICS_METADATA, "imgsz": str(list(size))} if metadata else None
    return save(_graph_outputs({"output0": out}, size), path, meta)


def yolox_model(path: Path, rows: np.ndarray, size=(320, 320), decoded: bool = True) -> Path:
    """``rows`` (N, 5 + C): cx cy w h (decoded; raw: dx dy log_w log_h of the first cells), objectness, class
    scores -> output [1, cells, 5 + C]."""
    return save(_graph_outputs({"output": pad_to_grid(rows, size)[None]}, size, exp=decoded), path)


def detr_model(
    path: Path,
    boxes: np.ndarray,
    scores: np.ndarray,
    labels: np.ndarray,
    size=(320, 320),
    size_input: bool = True,
    metadata: dict[str, str] | None = None,
) -> Path:
    """DETR outputs boxes [1, N, 4], scores [1, N], labels [1, N]; with RT-DETR's orig_target_sizes input."""
    extra = (
        [helper.make_tensor_value_info("orig_target_sizes", TensorProto.INT64, [1, 2])] if size_input else []
    )
    consts = {
        "labels": labels[None].astype(np.int64),
        "boxes": boxes[None].astype(np.float32),
        "scores": scores[None].astype(np.float32),
    }
    return save(_graph_outputs(consts, size, extra), path, metadata)


def raw_model(path: Path, outputs: dict[str, np.ndarray], size=(320, 320)) -> Path:
    """Any constant float outputs (for layouts that must be refused)."""
    return save(_graph_outputs({k: v.astype(np.float32) for k, v in outputs.items()}, size), path)
