"""Range equalization before INT8: rescale channels so one per-tensor int8 scale fits them all.

Per-tensor int8 activations waste their 255 levels when one channel spans 20x the range of the others (a
z-scored input column with outliers, a ReLU unit that fires rarely but strongly). Equalization divides
channel ``c`` of a *producer* by ``s_c`` and multiplies the matching weight columns of every *consumer* by
``s_c``, which leaves the fp32 function unchanged (to float rounding) but balances the ranges:

- producers: a ``Gemm`` with a constant weight (rows and bias scaled; every node sharing that weight is
  scaled alike) or the standardization ``Div`` by a constant vector (its divisor scaled);
- the scale flows through positively homogeneous ops: ``Relu``, ``Abs``, ``Sub`` and ``Add`` (inputs must
  carry the same scale), ``Mul`` (scales multiply), ``Slice`` and ``Concat`` on the feature axis;
- consumers: a ``Gemm`` with a constant weight and ``transB=1`` (its weight columns absorb the scale).

A producer whose output reaches any other op, the graph output, or a consumer weight shared with different
scales is left alone. The choice ``s_c = range_c / median(range)`` (range = max |value| of channel c over
the calibration rows, after the producer's activation) is the data-driven form of cross-layer equalization
(Nagel et al., 2019, "Data-Free Quantization Through Weight Equalization and Bias Correction").
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

_SAME = {"Relu", "Abs"}
_EQUAL_INPUTS = {"Sub", "Add"}


@dataclass(frozen=True)
class Equalized:
    """What :func:`equalize` changed: producer name -> (channels, max/min scale ratio applied)."""

    producers: dict[str, tuple[int, float]]


def _graph_maps(model: Any) -> tuple[dict[str, Any], dict[str, list[Any]], dict[str, np.ndarray]]:
    from pairedge.calibration.qdq_rules import _constants

    producer = {o: n for n in model.graph.node for o in n.output}
    consumers: dict[str, list[Any]] = defaultdict(list)
    for n in model.graph.node:
        for i in n.input:
            consumers[i].append(n)
    return producer, consumers, _constants(model)


def _attr(node: Any, name: str, default: Any) -> Any:
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _slice_cols(node: Any, consts: dict[str, np.ndarray], width: int) -> np.ndarray | None:
    """Column indices a Slice keeps on the last axis of a 2-D tensor, or None when not that form."""
    if len(node.input) < 3 or any(i not in consts for i in node.input[1:] if i):
        return None
    starts, ends = consts[node.input[1]].tolist(), consts[node.input[2]].tolist()
    axes = (
        consts[node.input[3]].tolist() if len(node.input) > 3 and node.input[3] else list(range(len(starts)))
    )
    steps = consts[node.input[4]].tolist() if len(node.input) > 4 and node.input[4] else [1] * len(starts)
    if len(starts) != 1 or axes[0] not in (1, -1) or steps[0] != 1:
        return None
    return np.arange(width)[slice(int(starts[0]), int(ends[0]))]


def _closure(start: list[str], consumers: dict[str, list[Any]]) -> set[str]:
    """Every tensor computed from ``start`` (forward)."""
    seen, queue = set(start), list(start)
    while queue:
        for node in consumers.get(queue.pop(), []):
            for out in node.output:
                if out not in seen:
                    seen.add(out)
                    queue.append(out)
    return seen


def _widths(model: Any) -> dict[str, int | None]:
    """Last-axis width of every 2-D tensor with a known shape (after shape inference)."""
    out: dict[str, int | None] = {}
    for info in [*model.graph.value_info, *model.graph.input, *model.graph.output]:
        dims = info.type.tensor_type.shape.dim
        if len(dims) == 2 and dims[1].HasField("dim_value"):
            out[info.name] = int(dims[1].dim_value)
    return out


def _propagate(
    start: list[str],
    scale: np.ndarray,
    maps: tuple[dict[str, Any], dict[str, list[Any]], dict[str, np.ndarray]],
    outputs: set[str],
    widths: dict[str, int | None],
) -> dict[str, list[tuple[Any, np.ndarray]]] | None:
    """Follow per-column factors from ``start`` tensors to consumer Gemm weights.

    Returns weight name -> [(gemm node, factor per input column)], or None when the scale reaches an op
    it cannot pass.
    """
    producer, consumers, consts = maps
    factor: dict[str, np.ndarray] = {t: scale for t in start}
    reach = _closure(start, consumers)
    queue = list(start)
    absorb: dict[str, list[tuple[Any, np.ndarray]]] = defaultdict(list)
    done: set[str] = set()
    while queue:
        tensor = queue.pop(0)
        if tensor in outputs:
            return None
        for node in consumers.get(tensor, []):
            key = f"{node.name}:{tensor}"
            if key in done:
                continue
            done.add(key)
            op = node.op_type
            if op == "Gemm" and node.input[0] == tensor and node.input[1] in consts:
                if _attr(node, "transB", 0) != 1 or _attr(node, "transA", 0) != 0:
                    return None
                absorb[node.input[1]].append((node, factor[tensor]))
                continue
            if op in _SAME:
                out = factor[tensor]
            elif op == "Slice":
                cols = _slice_cols(node, consts, len(factor[tensor]))
                if cols is None:
                    return None
                out = factor[tensor][cols]
            elif op in _EQUAL_INPUTS | {"Mul", "Concat"}:
                if op == "Concat":  # inputs the scale never reaches pass with factor 1
                    for i in node.input:
                        width = widths.get(i)
                        if i not in factor and i not in reach and width is not None:
                            factor[i] = np.ones(int(width))
                if any(i not in factor for i in node.input):
                    done.discard(key)
                    continue  # wait until every input has its factor
                parts = [factor[i] for i in node.input]
                if op == "Concat":
                    if _attr(node, "axis", 0) not in (1, -1):
                        return None
                    out = np.concatenate(parts)
                elif op == "Mul":
                    if len({len(p) for p in parts}) != 1:
                        return None
                    out = parts[0] * parts[1]
                else:
                    if not np.allclose(parts[0], parts[1]):
                        return None
                    out = parts[0]
            else:
                return None
            factor[node.output[0]] = out
            queue.append(node.output[0])
    joins = _EQUAL_INPUTS | {"Mul", "Concat"}
    waiting = [
        n
        for t in factor
        for n in consumers.get(t, [])
        if n.op_type in joins and any(i not in factor for i in n.input)
    ]
    return None if waiting else absorb


def _tie_shared_columns(
    starts: list[str],
    span: np.ndarray,
    maps: tuple[dict[str, Any], dict[str, list[Any]], dict[str, np.ndarray]],
    outputs: set[str],
    widths: dict[str, int | None],
) -> np.ndarray:
    """Give one span (the max) to producer channels that meet the same consumer weight column.

    A weight shared by two slices of the producer (the person encoder of a relation network sees the
    columns of A and of B) can absorb only one scale per column.
    """
    probe = _propagate(starts, np.arange(1.0, len(span) + 1.0), maps, outputs, widths)
    if not probe:
        return span
    span = span.copy()
    for uses in probe.values():
        if len(uses) < 2 or len({len(f) for _, f in uses}) != 1:
            continue
        index = np.stack([f for _, f in uses]).round().astype(np.int64) - 1  # (uses, columns)
        if (index < 0).any() or (index >= len(span)).any():
            continue
        tied = span[index].max(axis=0)
        for row in index:
            span[row] = np.maximum(span[row], tied)
    return span


def _ranges(model: Any, X: np.ndarray, tensors: list[str]) -> dict[str, np.ndarray]:
    """Per-column max |value| of 2-D ``tensors`` over rows ``X``."""
    import onnx
    from pairedge.calibration.infer import session
    from pairedge.modelmeta import INPUT_NAME

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    have = {o.name for o in probe.graph.output}
    for t in tensors:
        if t not in have:
            probe.graph.output.append(onnx.helper.make_empty_tensor_value_info(t))
    values = session(probe).run(tensors, {INPUT_NAME: np.ascontiguousarray(X, np.float32)})
    return {t: np.abs(v.reshape(len(X), -1)).max(axis=0) for t, v in zip(tensors, values, strict=True)}


def equalize(model: Any, X: np.ndarray) -> tuple[Any, Equalized]:
    """Equalized copy of a pre-processed fp32 ModelProto (same function), ranges measured on rows ``X``."""
    import onnx
    from onnx import numpy_helper

    model = onnx.ModelProto.FromString(model.SerializeToString())
    outputs = {o.name for o in model.graph.output}
    changed: dict[str, tuple[int, float]] = {}
    widths = _widths(model)
    inits = {t.name: t for t in model.graph.initializer}
    for node in list(model.graph.node):
        maps = _graph_maps(model)
        producer, consumers, consts = maps
        if node.op_type == "Gemm" and node.input[1] in inits and _attr(node, "transB", 0) == 1:
            weight = node.input[1]
            group = [n for n in model.graph.node if n.op_type == "Gemm" and n.input[1] == weight]
            if any(len(n.input) > 2 and n.input[2] != node.input[2] for n in group):
                continue
            outs = [n.output[0] for n in group]
            starts = [c.output[0] for o in outs for c in consumers.get(o, []) if c.op_type == "Relu"]
            if len(starts) != len(outs) or any(len(consumers.get(o, [])) != 1 for o in outs):
                continue  # only Gemm -> Relu producers (the ReLU keeps the scale exact)
            name = weight
        elif node.op_type == "Div" and node.input[1] in inits and node.input[0] not in inits:
            group, starts, name = [node], [node.output[0]], node.input[1]
        else:
            continue
        if name in changed:
            continue
        rng = _ranges(model, X, starts)
        span = np.max([rng[s] for s in starts], axis=0).astype(np.float64)
        if span.ndim != 1 or not np.any(span > 0):
            continue
        span = _tie_shared_columns(starts, span, maps, outputs, widths)
        live = span > 0  # a unit that never fires keeps scale 1
        scale = np.ones_like(span)
        scale[live] = np.clip(span[live] / np.median(span[live]), 1e-3, 1e3)
        absorb = _propagate(starts, scale, maps, outputs, widths)
        if not absorb or any(
            not all(np.allclose(f, uses[0][1]) for _, f in uses) for uses in absorb.values()
        ):
            continue
        if node.op_type == "Gemm":
            w = numpy_helper.to_array(inits[name])
            inits[name].CopyFrom(numpy_helper.from_array((w / scale[:, None]).astype(w.dtype), name))
            if len(node.input) > 2 and node.input[2] in inits:
                bname = node.input[2]
                b = numpy_helper.to_array(inits[bname])
                inits[bname].CopyFrom(numpy_helper.from_array((b / scale).astype(b.dtype), bname))
        else:
            d = numpy_helper.to_array(inits[name])
            inits[name].CopyFrom(numpy_helper.from_array((d * scale.reshape(d.shape)).astype(d.dtype), name))
        for wname, uses in absorb.items():
            w = numpy_helper.to_array(inits[wname])
            inits[wname].CopyFrom(numpy_helper.from_array((w * uses[0][1][None, :]).astype(w.dtype), wname))
        changed[name] = (len(scale), float(scale.max() / scale.min()))
    return model, Equalized(changed)
