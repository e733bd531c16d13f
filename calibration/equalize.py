"""Per-column scales absorbed before every quantized Gemm, so one per-tensor int8 scale fits every column.

TensorRT quantizes activations per tensor: one scale for all the columns of a Gemm's input. The input
features of a pairedge model are z-scored with training statistics, but their *ranges* still differ by
20x (a speed column with 25-sigma tails next to a bounded cosine), and so do the hidden units (a ReLU unit
that fires rarely but strongly), and the ``a*b`` block of a relation network's ``Concat`` spans 30x the
others. A per-tensor scale set by the widest column leaves the others a handful of int8 levels.

:func:`equalize` divides column ``c`` of the input ``x`` of every Gemm with a constant weight by
``s_c = (r_c / median(r)) ** strength`` (``r_c``: the column's range over the calibration rows, the
``quantile`` of its absolute values) and multiplies the matching weight column by ``s_c``. ``x W^T`` is
unchanged (to float rounding) while every column of ``x`` now spans about the same range: per-column
activation scales, in a graph TensorRT quantizes per tensor. Where it can, the division is folded into the
op that produces ``x`` (no new node):

- the input standardization ``Div`` by a constant (directly, or through ``Slice`` on the feature axis):
  the z-scoring divisor becomes ``std * s`` — the standardization inside the graph absorbs the per-column
  scale differences before the first quantized op;
- a ``Gemm -> Relu`` producer whose output feeds only Gemms: its weight rows and bias are divided by
  ``s`` (``relu(y / s) = relu(y) / s`` for ``s > 0``);

otherwise (a ``Concat`` of several encodings, a product) a ``Mul`` by the constant ``1 / s`` is inserted
right before the Gemm: one point-wise op that TensorRT fuses with the quantization that follows it.
Gemms sharing one weight (the person encoder of a relation network sees person A and person B) get one
``s`` (the larger range per column). This is the data-driven form of cross-layer equalization (Nagel et
al., 2019, "Data-Free Quantization Through Weight Equalization and Bias Correction").
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
from pairedge.calibration.qdq_graph import attribute as _attr
from pairedge.calibration.qdq_rules import _constants
from pairedge.calibration.ranges import tensor_values

#: Equalization factors are kept within [1 / LIMIT, LIMIT].
LIMIT = 1e3


@dataclass(frozen=True)
class Equalized:
    """What :func:`equalize` changed.

    Attributes:
        producers: consumer weight name -> (columns, max/min factor) of every equalized Gemm input.
        folded: weight name -> where its division went ("standardization Div", "producer Gemm ...",
            or "Mul node NAME" for an inserted scale).
    """

    producers: dict[str, tuple[int, float]]
    folded: dict[str, str]


def _maps(model: Any) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    producer = {o: n for n in model.graph.node for o in n.output}
    consumers: dict[str, list[Any]] = defaultdict(list)
    for n in model.graph.node:
        for i in n.input:
            consumers[i].append(n)
    return producer, consumers


def quantized_gemms(model: Any) -> dict[str, list[Any]]:
    """Weight initializer name -> the Gemm nodes that use it as a constant weight (activation in input 0)."""
    inits = {t.name for t in model.graph.initializer}
    groups: dict[str, list[Any]] = defaultdict(list)
    for n in model.graph.node:
        if n.op_type == "Gemm" and len(n.input) > 1 and n.input[1] in inits and n.input[0] not in inits:
            if _attr(n, "transA", 0) == 0:
                groups[n.input[1]].append(n)
    return dict(groups)


def column_ranges(
    model: Any, X: np.ndarray, tensors: list[str], quantile: float = 100.0
) -> dict[str, np.ndarray]:
    """Per-column ``quantile`` of |value| (100: the max) of 2-D ``tensors`` over rows ``X`` (N, F) float32."""

    out = {}
    for t, v in tensor_values(model, X, tensors).items():
        a = np.abs(v.astype(np.float64))
        out[t] = a.max(axis=0) if quantile >= 100.0 else np.percentile(a, quantile, axis=0)
    return out


def factors(ranges: np.ndarray, strength: float = 1.0) -> np.ndarray:
    """(F,) equalization factors of (F,) column ranges: ``(r / median(r)) ** strength``; dead columns 1."""
    live = ranges > 0
    s = np.ones(len(ranges), np.float64)
    if live.any():
        s[live] = np.clip((ranges[live] / np.median(ranges[live])) ** strength, 1.0 / LIMIT, LIMIT)
    return s


def equalize(
    model: Any, X: np.ndarray, quantile: float = 100.0, strength: float = 1.0
) -> tuple[Any, Equalized]:
    """Equalized copy of a pre-processed fp32 ModelProto (same function), ranges measured on rows ``X``.

    ``quantile``: the per-column range (100: max |value|; lower ignores rare outliers). ``strength``: the
    exponent of the factors (1: full equalization; lower spares the consumer's per-channel weight scales).
    """
    import onnx
    from onnx import numpy_helper

    model = onnx.ModelProto.FromString(model.SerializeToString())
    groups = quantized_gemms(model)
    tensors = sorted({n.input[0] for nodes in groups.values() for n in nodes})
    if not tensors:
        return model, Equalized({}, {})
    ranges = column_ranges(model, X, tensors, quantile)
    inits = {t.name: t for t in model.graph.initializer}
    scales: dict[str, np.ndarray] = {}
    producers: dict[str, tuple[int, float]] = {}
    for weight, nodes in groups.items():
        widths = {len(ranges[n.input[0]]) for n in nodes}
        if len(widths) != 1:
            continue
        s = factors(np.max([ranges[n.input[0]] for n in nodes], axis=0), strength)
        if np.allclose(s, 1.0):
            continue
        w = numpy_helper.to_array(inits[weight]).astype(np.float64)
        trans = _attr(nodes[0], "transB", 0) == 1
        if any((_attr(n, "transB", 0) == 1) != trans for n in nodes) or w.shape[1 if trans else 0] != len(s):
            continue
        w = w * (s[None, :] if trans else s[:, None])
        inits[weight].CopyFrom(numpy_helper.from_array(w.astype(np.float32), weight))
        for n in nodes:
            scales[n.name] = s
        producers[weight] = (len(s), float(s.max() / s.min()))
    folded = _apply(model, groups, scales)
    return model, Equalized(producers, folded)


def _apply(model: Any, groups: dict[str, list[Any]], scales: dict[str, np.ndarray]) -> dict[str, str]:
    """Divide the input of every Gemm in ``scales`` by its factors: folded where possible, else a Mul."""
    folded: dict[str, str] = {}
    for weight, nodes in groups.items():
        nodes = [n for n in nodes if n.name in scales]
        if not nodes:
            continue
        actions = _fold_actions(model, nodes, scales)
        if actions is None:
            folded[weight] = "Mul node " + ", ".join(_insert_mul(model, n, scales[n.name]) for n in nodes)
            continue
        for _, action in actions:
            action()
        folded[weight] = ", ".join(sorted({kind for kind, _ in actions}))
    return folded


def _insert_mul(model: Any, gemm: Any, s: np.ndarray) -> str:
    """``gemm``'s input multiplied by the constant ``1 / s`` in a new Mul node just before it; its name."""
    from onnx import helper, numpy_helper

    name = f"{gemm.name}/column_scale"
    const, out = f"{name}.inverse", f"{name}_output_0"
    model.graph.initializer.append(numpy_helper.from_array((1.0 / s).astype(np.float32)[None, :], const))
    mul = helper.make_node("Mul", [gemm.input[0], const], [out], name=name)
    model.graph.node.insert(list(model.graph.node).index(gemm), mul)
    gemm.input[0] = out
    return name


Action = tuple[str, Any]


def _fold_actions(model: Any, gemms: list[Any], scales: dict[str, np.ndarray]) -> list[Action] | None:
    """How to fold ``1 / s`` into the producers of every gemm's input, or None when one of them cannot."""
    producer, consumers = _maps(model)
    inits = {t.name: t for t in model.graph.initializer}
    consts = _consts(model)
    actions: list[Action] = []
    rows: dict[str, tuple[list[Any], np.ndarray]] = {}
    for gemm in gemms:
        s, src = scales[gemm.name], gemm.input[0]
        node = producer.get(src)
        if node is None or any(c is not gemm for c in consumers.get(src, [])):
            return None
        if node.op_type == "Relu":
            gp = producer.get(node.input[0])
            if gp is None or gp.op_type != "Gemm" or len(consumers.get(node.input[0], [])) != 1:
                return None
            if gp.input[1] not in inits or _attr(gp, "transB", 0) != 1:
                return None
            seen, prev = rows.setdefault(gp.input[1], ([], s))
            if not np.allclose(prev, s):
                return None
            seen.append(gp)
            continue
        action = _divisor_action(node, producer, consumers, inits, consts, s)
        if action is None:
            return None
        actions.append(action)
    for weight, (seen, s) in rows.items():
        sharing = [n for n in model.graph.node if n.op_type == "Gemm" and n.input[1] == weight]
        if {n.name for n in sharing} != {n.name for n in seen}:
            return None  # the weight also serves a Gemm whose output must keep its scale
        actions.append((f"producer Gemm {seen[0].name}", _rows_action(inits, seen[0], s)))
    return actions


def _rows_action(inits: dict[str, Any], gemm: Any, s: np.ndarray) -> Any:
    return lambda: _scale_rows(inits, gemm, s)


def _divisor_action(
    node: Any,
    producer: dict[str, Any],
    consumers: dict[str, list[Any]],
    inits: dict[str, Any],
    consts: dict[str, np.ndarray],
    s: np.ndarray,
) -> Action | None:
    """Fold into the standardization ``Div`` by a constant (the node itself, or behind a column Slice)."""
    from onnx import numpy_helper

    cols, div = None, node
    if node.op_type == "Slice":
        cols, div = _slice_cols(node, consts, len(s)), producer.get(node.input[0])
        if cols is None or div is None:
            return None
    if div.op_type != "Div" or div.input[1] not in inits or div.input[0] in inits:
        return None
    shape = numpy_helper.to_array(inits[div.input[1]]).shape
    width = int(np.prod(shape))
    index = np.arange(width) if cols is None else cols
    if len(index) != len(s) or int(index.max(initial=-1)) >= width or len(shape) > 2:
        return None
    if cols is not None and not _slices_only(consumers.get(div.output[0], []), consts, width):
        return None

    def divisor() -> None:
        d = numpy_helper.to_array(inits[div.input[1]]).astype(np.float64).reshape(-1)
        d[index] = d[index] * s
        inits[div.input[1]].CopyFrom(
            numpy_helper.from_array(d.reshape(shape).astype(np.float32), div.input[1])
        )

    return "standardization Div", divisor


def _scale_rows(inits: dict[str, Any], gemm: Any, s: np.ndarray) -> None:
    from onnx import numpy_helper

    w = numpy_helper.to_array(inits[gemm.input[1]]).astype(np.float64)
    inits[gemm.input[1]].CopyFrom(numpy_helper.from_array((w / s[:, None]).astype(np.float32), gemm.input[1]))
    if len(gemm.input) > 2 and gemm.input[2] in inits:
        b = numpy_helper.to_array(inits[gemm.input[2]]).astype(np.float64)
        inits[gemm.input[2]].CopyFrom(numpy_helper.from_array((b / s).astype(np.float32), gemm.input[2]))


def _consts(model: Any) -> dict[str, np.ndarray]:

    return _constants(model)


def _slice_cols(node: Any, consts: dict[str, np.ndarray], width: int) -> np.ndarray | None:
    """Column indices a Slice keeps on the last axis of a 2-D tensor (``width``: kept count), or None."""
    if len(node.input) < 3 or any(i not in consts for i in node.input[1:] if i):
        return None
    starts, ends = consts[node.input[1]].tolist(), consts[node.input[2]].tolist()
    axes = consts[node.input[3]].tolist() if len(node.input) > 3 and node.input[3] else [1]
    steps = consts[node.input[4]].tolist() if len(node.input) > 4 and node.input[4] else [1]
    if len(starts) != 1 or axes[0] not in (1, -1) or steps[0] != 1:
        return None
    start = int(starts[0])
    cols = np.arange(start, start + width)
    return cols if int(ends[0]) >= start + width else None


def _slices_only(nodes: list[Any], consts: dict[str, np.ndarray], width: int) -> bool:
    """Every consumer is a column Slice and no two of them overlap (each column gets one factor)."""
    seen = np.zeros(width, bool)
    for n in nodes:
        if n.op_type != "Slice" or len(n.input) < 3 or any(i not in consts for i in n.input[1:] if i):
            return False
        start, end = int(consts[n.input[1]].reshape(-1)[0]), int(consts[n.input[2]].reshape(-1)[0])
        end = min(end, width)
        if seen[start:end].any():
            return False
        seen[start:end] = True
    return True
