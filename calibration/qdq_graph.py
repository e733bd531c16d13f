"""The QDQ graph ``pairedge calibrate`` writes: every quantized Gemm / MatMul reads int8, in TensorRT's form.

:func:`qdq_graph` takes a pre-processed fp32 ``onnx.ModelProto`` and one :class:`LayerPlan` per quantized
weight, and returns the QDQ model (the fp32 graph, the same node names, the Q/DQ inserted):

- the weight: a constant int8 initializer ``<w>_quantized`` (symmetric per output channel,
  ``scale[c] = max|W[c]| / 127``, round half to even; the largest weight of a channel maps to +-127, none is
  clipped) read by a per-channel ``DequantizeLinear`` on the output-channel axis;
- the activation input: its float rewrite (``Add`` of a constant per copy, ``Concat`` of the copies), then
  ``QuantizeLinear -> DequantizeLinear`` with one per-tensor scale and int8 zero point 0;
- the bias (the rewrite folded in) and the output: float (TensorRT rejects int32 bias Q/DQ; the logits stay
  float).

Two exact rewrites of a layer's input spend the int8 grid better (the same ones quantization-aware training
uses, :mod:`pairedge.export.qat_fake`; both are float ops before the ``QuantizeLinear`` plus a bias change,
so the Gemm still reads int8 and the function is unchanged before rounding):

- **offset** (an input that is never negative on the calibration rows: a ReLU's output, ``|a - b|``,
  ``a * b``): quantize ``x - amax / 2`` with the range ``amax / 2`` and add ``W @ (amax / 2)`` to the bias:
  the grid spans ``[0, amax]`` with 254 steps instead of 127, and zero stays exact (it maps to -127);
- **copies**: read the input ``n`` times, copy ``k`` shifted by ``(k - (n - 1) / 2) * step / n`` (``step``
  the int8 step), with the int8 weight tiled ``n`` times along its input axis and its scales divided by
  ``n`` (exactly ``W / n`` per copy), and ``W @ shifts`` taken off the bias: the copies' rounding errors
  average out (a grid ``n`` times finer) for ``n`` times the multiplies of that layer.

Gemms that share a weight (a relation network's person encoder sees person A and person B) share one plan:
one int8 weight, one folded bias, one activation scale.
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
        amax: the activation range (the largest magnitude kept; with ``offset``, the top of ``[0, amax]``).
        offset: the input is never negative: quantize it over ``[0, amax]`` (module docstring).
        copies: how many shifted copies of the input the layer reads (1: the plain input).
    """

    amax: float
    offset: bool = False
    copies: int = 1

    def __post_init__(self) -> None:
        if not (np.isfinite(self.amax) and self.amax > 0) or self.copies < 1:
            raise ModelError(f"layer plan: expected a finite range > 0 and copies >= 1, got {self.amax}, {self.copies}")

    @property
    def scale(self) -> float:
        """The int8 step of the rewritten input: ``amax / 127``, or ``amax / 254`` with the offset."""
        return float(np.float32(max(self.amax / (2 * LEVELS if self.offset else LEVELS), MIN_SCALE)))

    @property
    def shifts(self) -> tuple[float, ...]:
        """(copies,) the constant added to the input for each copy (the offset's ``-amax / 2`` included)."""
        base = -float(np.float32(self.amax)) / 2 if self.offset else 0.0
        n, step = self.copies, self.scale
        return tuple(float(np.float32(base + (k - (n - 1) / 2) * step / n)) for k in range(n))


def _attr(node: Any, name: str, default: Any) -> Any:
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
        if n.op_type not in WEIGHTED_OPS or len(n.input) < 2 or n.input[1] not in inits or n.input[0] in inits:
            continue
        if len(inits[n.input[1]].dims) != 2:
            continue
        if n.op_type == "Gemm" and (_attr(n, "transA", 0) != 0 or _attr(n, "alpha", 1.0) != 1.0
                                    or _attr(n, "beta", 1.0) != 1.0):  # fmt: skip
            continue
        out.setdefault(n.input[1], []).append(n)
    return out


def _weight_rows(node: Any, w: np.ndarray) -> np.ndarray:
    """The weight as (C, K): output channels first."""
    transposed = node.op_type == "Gemm" and _attr(node, "transB", 0) == 1
    return w if transposed else w.T


def quantize_weight(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(C, K) float weight -> ((C, K) int8, (C,) float32 scales), symmetric per output channel."""
    scales = np.maximum(np.abs(w).max(axis=1) / LEVELS, MIN_SCALE).astype(np.float32)
    q = np.clip(np.rint(w / scales[:, None].astype(np.float64)), -LEVELS, LEVELS).astype(np.int8)
    return q, scales


def quantize_weight_copies(w: np.ndarray, copies: int) -> tuple[np.ndarray, np.ndarray]:
    """(C, K) float weight read by ``copies`` input copies -> ((C, copies * K) int8, (C,) float32 scales).

    Every copy's block stores ``W / copies`` on the grid ``scale / copies`` (``scale`` that of
    :func:`quantize_weight`). Their sum, what the layer computes with, is ``W`` rounded to a grid ``copies``
    times finer: the blocks hold ``floor`` or ``ceil`` of ``W / scale`` such that their ints add up to
    ``round(copies * W / scale)`` (the +1s rotate through the copies from element to element). Every int
    stays within [-127, 127].
    """
    scales = np.maximum(np.abs(w).max(axis=1) / LEVELS, MIN_SCALE).astype(np.float32)
    total = np.clip(np.rint(copies * w / scales[:, None].astype(np.float64)), -LEVELS * copies, LEVELS * copies)
    base, extra = np.floor_divide(total, copies), np.mod(total, copies)
    rot = np.arange(w.size).reshape(w.shape) % copies
    blocks = [base + ((k + rot) % copies < extra) for k in range(copies)]
    q = np.concatenate(blocks, axis=1).astype(np.int8)
    return q, (scales / np.float32(copies)).astype(np.float32)


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
        raise ModelError(f"quantization plans for {unknown[:4]}: no Gemm / MatMul reads them as a constant weight")
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    inserted: dict[str, list[Any]] = {}  # node name -> nodes to put before it
    done: set[str] = set()
    for weight, nodes in groups.items():
        plan = plans.get(weight)
        nodes = [n for n in nodes if n.name not in exclude]
        if plan is None or not nodes:
            continue
        rows = _weight_rows(nodes[0], inits[weight].astype(np.float64))
        if len({(n.op_type, _attr(n, "transB", 0)) for n in nodes}) > 1:
            raise ModelError(f"weight {weight!r}: its Gemms read it in different layouts")
        before, bias = _weight(graph, weight, rows, plan, nodes[0])
        for node in nodes:
            x = node.input[0]
            if x not in done:
                before += _activation(graph, x, plan)
                done.add(x)
            node.input[0], node.input[1] = f"{x}_dequantized", f"{weight}_dequantized"
            if bias is not None and node.op_type == "Gemm":
                while len(node.input) < 3:
                    node.input.append("")
                node.input[2] = bias
            elif bias is not None:  # MatMul: the folded bias is an Add after it
                before_add = _matmul_bias(graph, node, bias)
                inserted.setdefault(f"after:{node.name}", []).append(before_add)
            inserted.setdefault(node.name, []).extend(before)
            before = []
    nodes_out: list[Any] = []
    for node in graph.node:
        nodes_out += inserted.get(node.name, [])
        nodes_out.append(node)
        nodes_out += inserted.get(f"after:{node.name}", [])
    del graph.node[:]
    graph.node.extend(nodes_out)
    _prune(graph)
    return out


def _weight(graph: Any, weight: str, rows: np.ndarray, plan: LayerPlan, node: Any) -> tuple[list[Any], str | None]:
    """The int8 weight (tiled for the copies), its DequantizeLinear and the folded float bias name."""
    from onnx import helper, numpy_helper

    q, scales = quantize_weight_copies(rows, plan.copies)
    transposed = node.op_type == "Gemm" and _attr(node, "transB", 0) == 1
    stored, axis = (q, 0) if transposed else (np.ascontiguousarray(q.T), 1)
    graph.initializer.extend([
        numpy_helper.from_array(stored, f"{weight}_quantized"),
        numpy_helper.from_array(scales, f"{weight}_scale"),
        numpy_helper.from_array(np.zeros(len(scales), np.int8), f"{weight}_zero_point"),
    ])  # fmt: skip
    dq = helper.make_node("DequantizeLinear", [f"{weight}_quantized", f"{weight}_scale", f"{weight}_zero_point"],
                          [f"{weight}_dequantized"], name=f"{weight}_DequantizeLinear", axis=axis)  # fmt: skip
    shift = np.repeat(np.asarray(plan.shifts, np.float64), rows.shape[1])
    correction = (q.astype(np.float64) * scales[:, None].astype(np.float64)) @ shift
    bias = node.input[2] if node.op_type == "Gemm" and len(node.input) > 2 and node.input[2] else None
    if not np.any(correction):
        return [dq], bias
    inits = {t.name: t for t in graph.initializer}
    base = numpy_helper.to_array(inits[bias]).astype(np.float64) if bias else np.zeros(len(scales))
    folded = f"{weight}_bias_folded"
    graph.initializer.append(numpy_helper.from_array((base - correction).astype(np.float32), folded))
    return [dq], folded


def _matmul_bias(graph: Any, node: Any, bias: str) -> Any:
    """An ``Add`` of the folded bias after a MatMul (its output renamed); returns the Add node."""
    from onnx import helper

    y = node.output[0]
    node.output[0] = f"{y}_before_bias"
    return helper.make_node("Add", [node.output[0], bias], [y], name=f"{node.name}_Add_bias")


def _activation(graph: Any, x: str, plan: LayerPlan) -> list[Any]:
    """The float rewrite of ``x`` (offset, shifted copies) and its QuantizeLinear -> DequantizeLinear."""
    from onnx import helper, numpy_helper

    nodes: list[Any] = []
    parts = []
    for k, shift in enumerate(plan.shifts):
        if shift == 0.0:
            parts.append(x)
            continue
        name = f"{x}_shift{k}"
        graph.initializer.append(numpy_helper.from_array(np.asarray(shift, np.float32), name))
        nodes.append(helper.make_node("Add", [x, name], [f"{name}_out"], name=f"{x}_Add_shift{k}"))
        parts.append(f"{name}_out")
    src = parts[0]
    if len(parts) > 1:
        src = f"{x}_copies"
        nodes.append(helper.make_node("Concat", parts, [src], name=f"{x}_Concat_copies", axis=-1))
    graph.initializer.extend([
        numpy_helper.from_array(np.asarray(plan.scale, np.float32), f"{x}_scale"),
        numpy_helper.from_array(np.asarray(0, np.int8), f"{x}_zero_point"),
    ])  # fmt: skip
    args = [f"{x}_scale", f"{x}_zero_point"]
    return [
        *nodes,
        helper.make_node("QuantizeLinear", [src, *args], [f"{x}_quantized"], name=f"{x}_QuantizeLinear"),
        helper.make_node("DequantizeLinear", [f"{x}_quantized", *args], [f"{x}_dequantized"],
                         name=f"{x}_DequantizeLinear"),  # fmt: skip
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
