"""Lint a QDQ ONNX model against what TensorRT's explicit quantization accepts (no GPU needed).

:func:`check_qdq_rules` returns one :class:`Issue` per violation (an empty list means the model passes):

- ``int8``: every QuantizeLinear / DequantizeLinear works on int8 (no uint8, int16, int32, fp8);
- ``zero-point``: every zero point is 0 (symmetric quantization), present and constant;
- ``scale``: every scale is a constant, finite, positive float;
- ``per-channel-axis``: a per-channel weight DequantizeLinear quantizes along the output-channel axis of
  the consuming op (Gemm: 0 with ``transB=1``, else 1; MatMul: the last axis; Conv: 0; ConvTranspose: 1),
  and has one scale per channel;
- ``bias``: no bias input (Gemm / Conv input 2) comes through a DequantizeLinear (TensorRT rejects int32
  bias Q/DQ: keep the bias in float);
- ``dangling``: every QuantizeLinear feeds only DequantizeLinear nodes, every DequantizeLinear reads a
  QuantizeLinear or a constant int8 weight, and every Q/DQ output is used;
- ``pair``: the Q and DQ of one activation use the same scale and zero point.

Used by ``pairedge calibrate`` (its own outputs) and reusable by ``pairedge check``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
from pairedge.calibration.qdq_graph import attribute as _attr

Q, DQ = "QuantizeLinear", "DequantizeLinear"
_INT8 = 3  # onnx.TensorProto.INT8


@dataclass(frozen=True)
class Issue:
    """One violation: the rule, the node it concerns, and what is wrong (expected vs got)."""

    rule: str
    node: str
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.node}: {self.message}"


def _constants(model: Any) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    out = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    out[n.output[0]] = numpy_helper.to_array(a.t)
    return out


def _elem_types(model: Any) -> dict[str, int]:
    types = {t.name: t.data_type for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    types[n.output[0]] = a.t.data_type
    for info in [*model.graph.value_info, *model.graph.input, *model.graph.output]:
        if info.type.tensor_type.elem_type:
            types.setdefault(info.name, info.type.tensor_type.elem_type)
    return types


def _channel_axis(node: Any, input_index: int, rank: int) -> int | None:
    """The output-channel axis of the weight at ``input_index`` of ``node``, None when not a weight input."""
    if node.op_type == "Gemm" and input_index == 1:
        return 0 if _attr(node, "transB", 0) == 1 else 1
    if node.op_type == "MatMul" and input_index == 1:
        return rank - 1
    if node.op_type == "Conv" and input_index == 1:
        return 0
    if node.op_type == "ConvTranspose" and input_index == 1:
        return 1
    return None


def check_qdq_rules(model: Any) -> list[Issue]:
    """Every TensorRT explicit-quantization rule ``model`` (an ``onnx.ModelProto``) breaks; [] when none."""
    consts = _constants(model)
    types = _elem_types(model)
    producer = {o: n for n in model.graph.node for o in n.output}
    consumers: dict[str, list[tuple[Any, int]]] = defaultdict(list)
    for n in model.graph.node:
        for k, i in enumerate(n.input):
            consumers[i].append((n, k))
    outputs = {o.name for o in model.graph.output}
    issues: list[Issue] = []
    for node in model.graph.node:
        if node.op_type not in (Q, DQ):
            if node.op_type in ("Gemm", "Conv", "ConvTranspose") and len(node.input) > 2 and node.input[2]:
                src = producer.get(node.input[2])
                if src is not None and src.op_type == DQ:
                    issues.append(
                        Issue(
                            "bias",
                            node.name,
                            f"bias {node.input[2]!r} is quantized (comes "
                            "through a DequantizeLinear); keep the bias in float",
                        )
                    )
            continue
        issues += _check_scale_zero(node, consts, types)
        name = node.name or node.output[0]
        used = consumers.get(node.output[0], [])
        if not used and node.output[0] not in outputs:
            issues.append(Issue("dangling", name, f"{node.op_type} output {node.output[0]!r} is never used"))
        if node.op_type == Q:
            others = sorted({c.op_type for c, _ in used if c.op_type != DQ})
            if others:
                issues.append(
                    Issue("dangling", name, f"QuantizeLinear feeds {others}, expected only DequantizeLinear")
                )
            for dq, _ in used:
                if dq.op_type == DQ:
                    issues += _check_pair(node, dq, consts)
        else:
            src = producer.get(node.input[0])
            if src is None and node.input[0] not in consts:
                issues.append(
                    Issue(
                        "dangling",
                        name,
                        f"DequantizeLinear input {node.input[0]!r} is neither a "
                        "QuantizeLinear output nor a constant int8 weight",
                    )
                )
            elif src is not None and src.op_type != Q:
                issues.append(
                    Issue(
                        "dangling",
                        name,
                        f"DequantizeLinear reads {src.op_type} {src.name!r}, expected a QuantizeLinear or a "
                        "constant",
                    )
                )
            issues += _check_axis(node, consts, consumers, producer)
    return issues


def _check_scale_zero(node: Any, consts: dict[str, np.ndarray], types: dict[str, int]) -> list[Issue]:
    name = node.name or node.output[0]
    issues: list[Issue] = []
    scale = consts.get(node.input[1]) if len(node.input) > 1 else None
    if scale is None:
        issues.append(Issue("scale", name, "scale is not a constant"))
    elif not (np.issubdtype(scale.dtype, np.floating) and np.isfinite(scale).all() and (scale > 0).all()):
        issues.append(
            Issue(
                "scale",
                name,
                f"expected finite positive float scales, got {scale.dtype} {scale.ravel()[:4].tolist()}",
            )
        )
    zp_name = node.input[2] if len(node.input) > 2 else ""
    if not zp_name:
        issues.append(
            Issue("zero-point", name, "no zero point given (defaults to uint8); expected int8 zero 0")
        )
        return issues
    zp = consts.get(zp_name)
    if zp is None:
        issues.append(Issue("zero-point", name, f"zero point {zp_name!r} is not a constant"))
        return issues
    if types.get(zp_name, _INT8) != _INT8 or zp.dtype != np.int8:
        issues.append(Issue("int8", name, f"expected int8 quantization, got {zp.dtype}"))
    if np.any(zp != 0):
        issues.append(
            Issue("zero-point", name, f"expected zero point 0 (symmetric), got {zp.ravel()[:4].tolist()}")
        )
    if node.op_type == DQ and node.input[0] in consts and consts[node.input[0]].dtype != np.int8:
        issues.append(
            Issue("int8", name, f"weight {node.input[0]!r} is {consts[node.input[0]].dtype}, expected int8")
        )
    return issues


def _check_pair(q: Any, dq: Any, consts: dict[str, np.ndarray]) -> list[Issue]:
    def value(node: Any, k: int) -> np.ndarray | None:
        return consts.get(node.input[k]) if len(node.input) > k and node.input[k] else None

    qs, ds, qz, dz = value(q, 1), value(dq, 1), value(q, 2), value(dq, 2)
    if qs is None or ds is None or qz is None or dz is None:
        return []
    if qs.shape != ds.shape or not np.array_equal(qs, ds) or not np.array_equal(qz, dz):
        return [
            Issue(
                "pair",
                dq.name or dq.output[0],
                f"DequantizeLinear scale/zero point differ from its QuantizeLinear {q.name!r}",
            )
        ]
    return []


def _check_axis(
    dq: Any,
    consts: dict[str, np.ndarray],
    consumers: dict[str, list[tuple[Any, int]]],
    producer: dict[str, Any],
) -> list[Issue]:
    name = dq.name or dq.output[0]
    scale = consts.get(dq.input[1])
    if scale is None or scale.size <= 1:
        return []
    weight = consts.get(dq.input[0])
    src = producer.get(dq.input[0])
    if weight is None and src is not None and src.op_type == Q:
        weight = consts.get(src.input[0])
    if weight is None:
        return [
            Issue(
                "per-channel-axis",
                name,
                "per-channel scales on an activation; TensorRT expects per-tensor activation scales",
            )
        ]
    axis = int(_attr(dq, "axis", 1))
    axis = axis + weight.ndim if axis < 0 else axis
    issues: list[Issue] = []
    for node, k in consumers.get(dq.output[0], []):
        expected = _channel_axis(node, k, weight.ndim)
        if expected is None:
            continue
        if axis != expected:
            issues.append(
                Issue(
                    "per-channel-axis",
                    name,
                    f"weight of {node.op_type} {node.name!r} quantized "
                    f"along axis {axis}, expected the output-channel axis {expected}",
                )
            )
        elif weight.shape[axis] != scale.size:
            issues.append(
                Issue(
                    "per-channel-axis", name, f"{scale.size} scales for {weight.shape[axis]} output channels"
                )
            )
    return issues
