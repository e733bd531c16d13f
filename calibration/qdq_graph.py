"""The one Q/DQ graph writer: every quantized Gemm / MatMul reads int8, in the form TensorRT's explicit
quantization fuses into an int8 GEMM (and ONNX Runtime CPU into QGemm / QLinearMatMul).

:func:`qdq_graph` takes a pre-processed fp32 ``onnx.ModelProto`` and one :class:`LayerPlan` per quantized
weight, and returns the QDQ model (the fp32 graph, the same node names, the Q/DQ inserted):

- the weight: a constant int8 initializer ``<w>_quantized`` of the fp32 weight's own shape (symmetric per
  output channel, ``scale[c] = max|W[c]| / 127``, round half to even; the largest weight of a channel maps
  to +-127, none is clipped) read by a per-channel ``DequantizeLinear`` on the output-channel axis;
- the activation input, read once: ``QuantizeLinear -> DequantizeLinear`` with one per-tensor scale
  ``amax / 127`` and int8 zero point 0;
- the bias and the output: float (TensorRT rejects int32 bias Q/DQ; the logits stay float).

Gemms that share a weight (a relation network's person encoder sees person A and person B) share one plan:
one int8 weight, one activation scale. ``pairedge calibrate`` (ranges from calibration rows) and
quantization-aware training (:mod:`pairedge.export.qat`, ranges and weights trained) both write through
here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from pairedge.core.errors import ModelError

#: Symmetric int8: ``scale = range / 127``; weights use [-127, 127], activations saturate at -128 / 127.
LEVELS = 127
#: The smallest scale written (a channel of zeros still gets a positive scale, as the Q/DQ rules require).
MIN_SCALE = 1e-8
WEIGHTED_OPS = ("Gemm", "MatMul")


@dataclass(frozen=True)
class LayerPlan:
    """How one weight's layers read their input.

    Attributes:
        amax: the activation range: the largest magnitude kept (beyond it values saturate).
    """

    amax: float

    def __post_init__(self) -> None:
        if not (np.isfinite(self.amax) and self.amax > 0):
            raise ModelError(f"layer plan: expected a finite range > 0, got {self.amax}")

    @property
    def scale(self) -> float:
        """The int8 step of the input: ``amax / 127`` in float32."""
        return float(np.float32(max(self.amax / LEVELS, MIN_SCALE)))


def attribute(node: Any, name: str, default: Any) -> Any:
    """A node attribute's value, or ``default`` (the one helper every graph module uses)."""
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def weighted_nodes(model: Any) -> dict[str, list[Any]]:
    """Weight initializer name -> the Gemm / MatMul nodes that read it as their constant (C, K) or (K, C)
    weight with the activation in input 0 (Gemm: ``transA=0``, ``alpha = beta = 1``; MatMul: a 2-D weight)."""
    inits = {t.name: t for t in model.graph.initializer}
    out: dict[str, list[Any]] = {}
    for n in model.graph.node:
        if (
            n.op_type not in WEIGHTED_OPS
            or len(n.input) < 2
            or n.input[1] not in inits
            or n.input[0] in inits
        ):
            continue
        if len(inits[n.input[1]].dims) != 2:
            continue
        if n.op_type == "Gemm" and (
            attribute(n, "transA", 0) != 0
            or attribute(n, "alpha", 1.0) != 1.0
            or attribute(n, "beta", 1.0) != 1.0
        ):
            continue
        out.setdefault(n.input[1], []).append(n)
    return out


def _weight_rows(node: Any, w: np.ndarray) -> np.ndarray:
    """The weight as (C, K): output channels first."""
    transposed = node.op_type == "Gemm" and attribute(node, "transB", 0) == 1
    return w if transposed else w.T


def quantize_weight(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(C, K) float weight -> ((C, K) int8, (C,) float32 scales), symmetric per output channel, in float32
    arithmetic (``rint(W / scale)``: what quantization-aware training's fake quantization rounds, bit for
    bit)."""
    w = np.asarray(w, np.float32)
    scales = np.maximum(np.abs(w).max(axis=1) / np.float32(LEVELS), np.float32(MIN_SCALE)).astype(np.float32)
    q = np.clip(np.rint(w / scales[:, None]), -LEVELS, LEVELS).astype(np.int8)
    return q, scales


def qdq_graph(model: Any, plans: Mapping[str, LayerPlan], exclude: tuple[str, ...] = ()) -> Any:
    """The QDQ ``onnx.ModelProto`` of ``model`` (module docstring); ``model`` is not modified.

    Args:
        model: a pre-processed fp32 ModelProto.
        plans: weight initializer name -> its :class:`LayerPlan` (weights without a plan stay float).
        exclude: node names kept in float (no Q/DQ) even when their weight has a plan.

    Raises:
        ModelError: a plan for a weight no quantizable Gemm / MatMul reads.
    """
    import onnx
    from onnx import numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    groups = weighted_nodes(out)
    unknown = sorted(set(plans) - set(groups))
    if unknown:
        raise ModelError(
            f"quantization plans for {unknown[:4]}: no Gemm / MatMul reads them as a constant weight"
        )
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    inserted: dict[str, list[Any]] = {}  # node name -> nodes to put before it
    done: set[str] = set()
    for weight, nodes in groups.items():
        plan = plans.get(weight)
        nodes = [n for n in nodes if n.name not in exclude]
        if plan is None or not nodes:
            continue
        rows = _weight_rows(nodes[0], inits[weight].astype(np.float32))
        if len({(n.op_type, attribute(n, "transB", 0)) for n in nodes}) > 1:
            raise ModelError(f"weight {weight!r}: its Gemms read it in different layouts")
        before = [_weight(graph, weight, rows, nodes[0])]
        for node in nodes:
            x = node.input[0]
            if x not in done:
                before += _activation(graph, x, plan)
                done.add(x)
            node.input[0], node.input[1] = f"{x}_dequantized", f"{weight}_dequantized"
            inserted.setdefault(node.name, []).extend(before)
            before = []
    nodes_out: list[Any] = []
    for node in graph.node:
        nodes_out += inserted.get(node.name, [])
        nodes_out.append(node)
    del graph.node[:]
    graph.node.extend(nodes_out)
    _prune(graph)
    return out


def _weight(graph: Any, weight: str, rows: np.ndarray, node: Any) -> Any:
    """The int8 weight (the fp32 weight's shape) and its per-channel DequantizeLinear."""
    from onnx import helper, numpy_helper

    q, scales = quantize_weight(rows)
    transposed = node.op_type == "Gemm" and attribute(node, "transB", 0) == 1
    stored, axis = (q, 0) if transposed else (np.ascontiguousarray(q.T), 1)
    graph.initializer.extend(
        [
            numpy_helper.from_array(stored, f"{weight}_quantized"),
            numpy_helper.from_array(scales, f"{weight}_scale"),
            numpy_helper.from_array(np.zeros(len(scales), np.int8), f"{weight}_zero_point"),
        ]
    )
    return helper.make_node(
        "DequantizeLinear",
        [f"{weight}_quantized", f"{weight}_scale", f"{weight}_zero_point"],
        [f"{weight}_dequantized"],
        name=f"{weight}_DequantizeLinear",
        axis=axis,
    )


def _activation(graph: Any, x: str, plan: LayerPlan) -> list[Any]:
    """``QuantizeLinear -> DequantizeLinear`` of the tensor ``x`` with the plan's per-tensor scale."""
    from onnx import helper, numpy_helper

    graph.initializer.extend(
        [
            numpy_helper.from_array(np.asarray(plan.scale, np.float32), f"{x}_scale"),
            numpy_helper.from_array(np.asarray(0, np.int8), f"{x}_zero_point"),
        ]
    )
    args = [f"{x}_scale", f"{x}_zero_point"]
    return [
        helper.make_node("QuantizeLinear", [x, *args], [f"{x}_quantized"], name=f"{x}_QuantizeLinear"),
        helper.make_node(
            "DequantizeLinear", [f"{x}_quantized", *args], [f"{x}_dequantized"], name=f"{x}_DequantizeLinear"
        ),
    ]


def _prune(graph: Any) -> None:
    """Drop initializers no node reads any more (the float weights now stored in int8), and their inputs."""
    used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
    gone = {t.name for t in graph.initializer if t.name not in used}
    keep = [t for t in graph.initializer if t.name not in gone]
    del graph.initializer[:]
    graph.initializer.extend(keep)
    inputs = [i for i in graph.input if i.name not in gone]
    del graph.input[:]
    graph.input.extend(inputs)
