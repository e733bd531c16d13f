"""The QDQ ONNX file of a quantization-aware-trained model, through the one Q/DQ writer.

:func:`qdq_graph` starts from the fp32 ONNX file the model was imported from (same nodes, same names, same
metadata) and builds on :func:`pairedge.calibration.qdq_graph.qdq_graph`, the writer ``pairedge calibrate``
uses too:

1. the trained float weights and biases replace the fp32 file's (the initializer names are the torch
   state-dict keys);
2. after the normalisation (the z-scoring and the input squashing stay float, first), ``Mul`` by the input
   gains of the range equalisation (:mod:`pairedge.export.qat.equalize`);
3. every Gemm / MatMul between Q/DQ with the trained activation range of its layer
   (:class:`~pairedge.calibration.qdq_graph.LayerPlan`): int8 per-channel weights of the fp32 shape, the input
   read once, int8 per tensor; bias and output float. A layer the config keeps float
   (:mod:`pairedge.export.qat.sensitivity`) gets its trained float weights and no Q/DQ.

:func:`gemm_inputs_quantized` is the structural check the recipe and its tests apply to the result.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pairedge.calibration.qdq_graph import LayerPlan
from pairedge.calibration.qdq_graph import qdq_graph as write_qdq
from pairedge.core.errors import ModelError
from pairedge.export.qat import fake
from torch import nn

QUANTIZED_OPS = ("Gemm", "MatMul")
_INT8 = 3  # onnx.TensorProto.INT8


def qdq_graph(fp32: Any, model: nn.Module, gain: np.ndarray | None = None) -> Any:
    """The QDQ ``onnx.ModelProto`` of a fake-quantized model (module docstring); ``fp32`` is not modified.

    Args:
        fp32: the fp32 ModelProto whose weight initializers are named by the torch state-dict keys.
        model: the fine-tuned model, its Linear layers :class:`~pairedge.export.qat.fake.QuantLinear` with
            calibrated ranges.
        gain: (F,) input gains multiplied into the normalisation's output (None: none).

    Raises:
        ModelError: a layer whose weight the graph lacks, a Gemm / MatMul without a layer, a graph without the
            normalisation the gains go after.
    """
    import onnx
    from onnx import numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(fp32)
    graph = out.graph
    inits = {t.name: t for t in graph.initializer}
    layers = fake.quant_layers(model)
    floats = fake.float_layers(model)
    plans = {}
    for path, layer in {**layers, **floats}.items():
        for name, value in ((f"{path}.weight", layer.weight), (f"{path}.bias", layer.bias)):
            if name not in inits:
                raise ModelError(f"the fp32 graph has no initializer {name!r} for the trained layer {path!r}")
            array = value.detach().cpu().numpy().astype(np.float32)
            inits[name].CopyFrom(numpy_helper.from_array(array, name))
        if path in layers:
            plans[f"{path}.weight"] = LayerPlan(amax=float(np.float32(layer.amax)))
    kept = {f"{path}.weight" for path in floats}
    missing = [
        n.name for n in graph.node if n.op_type in QUANTIZED_OPS and n.input[1] not in set(plans) | kept
    ]
    if missing:
        raise ModelError(f"Gemm / MatMul {missing[:3]}: their weights are no trained quantized layer")
    if gain is not None:
        _insert_gain(graph, np.asarray(gain, np.float32))
    qdq = write_qdq(out, plans)
    onnx.checker.check_model(qdq, full_check=True)
    return qdq


def _norm_output(graph: Any) -> Any:
    """The last node of the normalisation (``/norm/...``: the z-scoring, the squashing, the mask): the gains
    go after its output."""
    named = [n for n in graph.node if n.name.startswith("/norm/") and n.op_type != "Constant"]
    if named:
        return named[-1]
    div = next((n for n in graph.node if n.op_type == "Div" and "norm.std" in n.input), None)
    if div is None:
        raise ModelError(
            "the graph has no normalisation (/norm/ nodes, a Div by norm.std) to put the input gains after"
        )
    return div


def _insert_gain(graph: Any, gain: np.ndarray) -> None:
    """Multiply the normalisation's output by ``gain`` for all its consumers."""
    from onnx import helper, numpy_helper

    last = _norm_output(graph)
    z, out = last.output[0], f"{last.output[0]}_equalized"
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name == z:
                node.input[k] = out
    graph.initializer.append(numpy_helper.from_array(gain, "norm.gain"))
    mul = helper.make_node("Mul", [z, "norm.gain"], [out], name="/norm_gain/Mul")
    graph.node.insert(list(graph.node).index(last) + 1, mul)


def float_nodes(model: Any, float_weights: set[str]) -> list[str]:
    """Names of the Gemm / MatMul nodes of ``model`` that read one of ``float_weights`` (initializer names of
    the layers kept float), in graph order."""
    return [n.name for n in model.graph.node if n.op_type in QUANTIZED_OPS and n.input[1] in float_weights]


def gemm_inputs_quantized(model: Any, float_weights: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Every Gemm / MatMul of ``model`` whose activation or weight input does not come straight from a
    DequantizeLinear (fed by a QuantizeLinear, or an int8 constant for the weight), except those reading a
    weight of ``float_weights`` (the layers a sensitivity sweep keeps float); [] when all the others run in
    int8."""
    producer = {o: n for n in model.graph.node for o in n.output}
    consts = {t.name: t.data_type for t in model.graph.initializer}
    problems = []
    for node in model.graph.node:
        if node.op_type not in QUANTIZED_OPS or node.input[1] in float_weights:
            continue
        for k, what in ((0, "activation"), (1, "weight")):
            dq = producer.get(node.input[k])
            src = dq.input[0] if dq is not None and dq.op_type == "DequantizeLinear" else None
            ok = src is not None and (
                (src in producer and producer[src].op_type == "QuantizeLinear") or consts.get(src) == _INT8
            )
            if not ok:
                problems.append(
                    f"{node.op_type} {node.name!r}: its {what} input {node.input[k]!r} is not int8"
                )
    return problems
