"""The QDQ ONNX file of a quantization-aware-trained model: the fp32 graph with every Gemm / MatMul in int8.

:func:`qdq_graph` starts from the fp32 ONNX file the model was imported from (same nodes, same names, same
metadata), and puts every Gemm / MatMul between Q/DQ, in the form TensorRT's explicit quantization runs in
int8 and :func:`pairedge.calibration.qdq_rules.check_qdq_rules` accepts:

- after the normalisation (the z-scoring stays float, first), ``Mul`` by the input gains of the range
  equalisation (:mod:`pairedge.export.qat_equalize`): every quantized tensor has one sensible range;
- the activation input: its float rewrite (``Add`` of each copy's shift, the offset of a never-negative
  input included, and ``Concat`` of the copies; :mod:`pairedge.export.qat_fake`), then
  ``QuantizeLinear -> DequantizeLinear`` with the layer's per-tensor scale, int8 zero point 0;
- the weight: a constant int8 initializer ``<w>_quantized`` read by a per-output-channel
  ``DequantizeLinear`` (axis 0 for ``Gemm`` with ``transB=1``, the last axis for ``MatMul``);
- the bias (the shifts folded in) and the output: float (TensorRT rejects int32 bias Q/DQ; the logits stay
  float).

:func:`gemm_inputs_quantized` is the structural check the recipe and its tests apply to the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from pairedge.core.errors import ModelError
from pairedge.export.qat_fake import LayerExport

QUANTIZED_OPS = ("Gemm", "MatMul")
_INT8 = 3  # onnx.TensorProto.INT8


def _attr(node: Any, name: str, default: Any) -> Any:
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def qdq_graph(fp32: Any, layers: Mapping[str, LayerExport], gain: np.ndarray | None = None) -> Any:
    """The QDQ ``onnx.ModelProto`` (see the module docstring); ``fp32`` is not modified.

    Args:
        fp32: the fp32 ModelProto whose weight initializers are named by the torch state-dict keys.
        layers: weight initializer name -> what the quantized layer stores (every Gemm / MatMul needs one).
        gain: (F,) input gains multiplied into the normalisation's output (None: none).

    Raises:
        ModelError: a Gemm / MatMul whose weight has no entry in ``layers``, a graph without the
            normalisation the gains go after, or a tensor two layers would rewrite differently.
    """
    import onnx

    model = onnx.ModelProto()
    model.CopyFrom(fp32)
    graph = model.graph
    if gain is not None:
        _insert_gain(graph, np.asarray(gain, np.float32))
    nodes: list[Any] = []
    made: set[str] = set()
    inputs: dict[str, LayerExport] = {}
    for original in graph.node:
        node = onnx.NodeProto()
        node.CopyFrom(original)
        if node.op_type in QUANTIZED_OPS:
            w_name = node.input[1]
            layer = layers.get(w_name)
            if layer is None:
                raise ModelError(f"{node.op_type} {node.name!r}: its weight {w_name!r} is no quantized layer")
            if node.op_type == "Gemm" and (_attr(node, "transB", 0) != 1 or _attr(node, "transA", 0) != 0):
                raise ModelError(f"Gemm {node.name!r}: expected transA=0, transB=1 (torch's Linear layout)")
            if w_name not in made:
                nodes.append(_weight_dq(graph, node, w_name, layer))
                made.add(w_name)
            x = node.input[0]
            if x not in inputs:
                nodes += _activation_qdq(graph, x, layer)
                inputs[x] = layer
            elif _rewrite(inputs[x]) != _rewrite(layer):
                raise ModelError(f"tensor {x!r} feeds two layers that quantize it differently")
            node.input[0], node.input[1] = f"{x}_dequantized", f"{w_name}_dequantized"
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    used = {i for n in graph.node for i in n.input}
    keep = [t for t in graph.initializer if t.name in used]  # the float weights are now int8 initializers
    del graph.initializer[:]
    graph.initializer.extend(keep)
    onnx.checker.check_model(model, full_check=True)
    return model


def _rewrite(layer: LayerExport) -> tuple[float, tuple[float, ...]]:
    return layer.act_scale, layer.shifts


def _insert_gain(graph: Any, gain: np.ndarray) -> None:
    """Multiply the normalisation's output (the Div by ``norm.std``) by ``gain`` for all its consumers."""
    from onnx import helper, numpy_helper

    div = next((n for n in graph.node if n.op_type == "Div" and "norm.std" in n.input), None)
    if div is None:
        raise ModelError("the graph has no normalisation (Div by norm.std) to put the input gains after")
    z, out = div.output[0], f"{div.output[0]}_equalized"
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name == z:
                node.input[k] = out
    graph.initializer.append(numpy_helper.from_array(gain, "norm.gain"))
    mul = helper.make_node("Mul", [z, "norm.gain"], [out], name="/norm/Mul_gain")
    graph.node.insert(list(graph.node).index(div) + 1, mul)


def _weight_dq(graph: Any, node: Any, w_name: str, layer: LayerExport) -> Any:
    """The int8 weight, its scales and zero points, the folded float bias, and the per-channel DequantizeLinear."""
    from onnx import helper, numpy_helper

    values = layer.weight if node.op_type == "Gemm" else layer.weight.T  # MatMul's weight is (K, C)
    axis = 0 if node.op_type == "Gemm" else 1
    graph.initializer.extend([
        numpy_helper.from_array(np.ascontiguousarray(values, np.int8), f"{w_name}_quantized"),
        numpy_helper.from_array(np.asarray(layer.weight_scales, np.float32), f"{w_name}_scale"),
        numpy_helper.from_array(np.zeros(len(layer.weight_scales), np.int8), f"{w_name}_zero_point"),
    ])  # fmt: skip
    if node.op_type == "Gemm" and len(node.input) > 2 and node.input[2]:
        bias = next(t for t in graph.initializer if t.name == node.input[2])
        bias.CopyFrom(numpy_helper.from_array(np.asarray(layer.bias, np.float32), node.input[2]))
    return helper.make_node(
        "DequantizeLinear",
        [f"{w_name}_quantized", f"{w_name}_scale", f"{w_name}_zero_point"],
        [f"{w_name}_dequantized"],
        name=f"{w_name}_DequantizeLinear",
        axis=axis,
    )


def _activation_qdq(graph: Any, x: str, layer: LayerExport) -> list[Any]:
    """The float rewrite of the activation ``x`` (offset or shifted copies), then QuantizeLinear ->
    DequantizeLinear with the layer's per-tensor scale and zero point 0."""
    from onnx import helper, numpy_helper

    nodes: list[Any] = []
    parts = []
    for k, shift in enumerate(layer.shifts):
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
        nodes.append(helper.make_node("Concat", parts, [src], name=f"{x}_Concat_copies", axis=1))
    graph.initializer.extend([
        numpy_helper.from_array(np.asarray(layer.act_scale, np.float32), f"{x}_scale"),
        numpy_helper.from_array(np.asarray(0, np.int8), f"{x}_zero_point"),
    ])  # fmt: skip
    args = [f"{x}_scale", f"{x}_zero_point"]
    return [
        *nodes,
        helper.make_node("QuantizeLinear", [src, *args], [f"{x}_quantized"], name=f"{x}_QuantizeLinear"),
        helper.make_node("DequantizeLinear", [f"{x}_quantized", *args], [f"{x}_dequantized"],
                         name=f"{x}_DequantizeLinear"),  # fmt: skip
    ]


def gemm_inputs_quantized(model: Any) -> list[str]:
    """Every Gemm / MatMul of ``model`` whose activation or weight input does not come straight from a
    DequantizeLinear (fed by a QuantizeLinear, or an int8 constant for the weight); [] when all run in int8."""
    producer = {o: n for n in model.graph.node for o in n.output}
    consts = {t.name: t.data_type for t in model.graph.initializer}
    problems = []
    for node in model.graph.node:
        if node.op_type not in QUANTIZED_OPS:
            continue
        for k, what in ((0, "activation"), (1, "weight")):
            dq = producer.get(node.input[k])
            src = dq.input[0] if dq is not None and dq.op_type == "DequantizeLinear" else None
            ok = src is not None and (
                (src in producer and producer[src].op_type == "QuantizeLinear") or consts.get(src) == _INT8
            )
            if not ok:
                problems.append(f"{node.op_type} {node.name!r}: its {what} input {node.input[k]!r} is not int8")
    return problems
