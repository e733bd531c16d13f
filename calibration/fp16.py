"""FP16 conversion: weights and compute in float16, the I/O contract kept in float32.

The model still takes ``features`` float32 (pairs, F) and returns ``logits`` float32 (pairs, C): a ``Cast``
to float16 follows the input and a ``Cast`` back to float32 precedes the output. Float initializers and
``Constant`` values become float16. Nodes named in ``keep_fp32`` (by default the input standardization,
``Sub`` / ``Div`` / ``Mul`` / ``Add`` nodes reading the graph input directly: raw features minus a mean in
float16 lose digits where the mean is large against the spread) stay in float32 with Casts at the region
boundary. The result runs on ONNX Runtime CPU (float16 Gemm, Relu, Concat, ... kernels) and is the typed
ONNX a strongly typed TensorRT network builds in fp16.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from pairedge.core.modelmeta import INPUT_NAME, OUTPUT_NAME

_STANDARDIZE = {"Sub", "Div", "Mul", "Add"}


def standardization_nodes(model: Any) -> list[str]:
    """Names of the element-wise nodes at the head of the graph that standardize the raw input."""
    consts = {t.name for t in model.graph.initializer} | {
        n.output[0] for n in model.graph.node if n.op_type == "Constant"
    }
    reached = {INPUT_NAME}
    names: list[str] = []
    for node in model.graph.node:
        if node.op_type in _STANDARDIZE and all(i in reached or i in consts for i in node.input):
            if any(i in reached for i in node.input):
                names.append(node.name)
                reached.update(node.output)
    return names


#: Operands that ONNX types float32 whatever the data's type: (op type, input index). Resize's ``roi`` and
#: ``scales`` (a detector's upsampling).
_FLOAT32_OPERANDS = {("Resize", 1), ("Resize", 2), ("Upsample", 1)}


def to_fp16(
    model: Any,
    keep_fp32: Iterable[str] | None = None,
    input_name: str = INPUT_NAME,
    output_name: str = OUTPUT_NAME,
) -> Any:
    """A float16 copy of an fp32 ModelProto with float32 input/output (see the module docstring).

    Args:
        model: the fp32 model, one float input ``input_name`` and one float output ``output_name`` (the
            classifier's ``features`` / ``logits`` by default; a detector's ``images`` / ``output``).
        keep_fp32: names of nodes that stay float32; None: the input standardization
            (:func:`standardization_nodes`; classifiers).
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    m = onnx.ModelProto.FromString(model.SerializeToString())
    g = m.graph
    keep = set(standardization_nodes(m) if keep_fp32 is None else keep_fp32)
    const_nodes = {n.output[0]: n for n in g.node if n.op_type == "Constant"}
    inits = {t.name: t for t in g.initializer}
    # Which precision each tensor is produced in.
    kind: dict[str, str] = {input_name: "fp32"}
    for name in inits:
        kind[name] = "const"
    for n in g.node:
        if n.op_type == "Constant":
            kind[n.output[0]] = "const"
    compute = [n for n in g.node if n.op_type != "Constant"]
    for n in compute:
        for o in n.output:
            kind[o] = "fp32" if n.name in keep else "fp16"
    # Constants used by fp16 nodes become fp16 (a copy when fp32 nodes use them too).
    users: dict[str, set[str]] = {}
    for n in compute:
        for k, i in enumerate(n.input):
            fp32 = n.name in keep or (n.op_type, k) in _FLOAT32_OPERANDS
            users.setdefault(i, set()).add("fp32" if fp32 else "fp16")
    renamed: dict[str, str] = {}
    for name, who in users.items():
        if kind.get(name) != "const" or "fp16" not in who:
            continue
        array = (
            numpy_helper.to_array(inits[name])
            if name in inits
            else numpy_helper.to_array(const_nodes[name].attribute[0].t)
        )
        if array.dtype != np.float32:
            continue
        new = name if who == {"fp16"} else f"{name}__fp16"
        tensor = numpy_helper.from_array(array.astype(np.float16), new)
        if new == name and name in inits:
            inits[name].CopyFrom(tensor)
        elif new == name:
            const_nodes[name].attribute[0].t.CopyFrom(tensor)
        else:
            g.initializer.append(tensor)
            renamed[name] = new
    # Casts where a tensor crosses between regions.
    casts: list[Any] = []
    made: dict[tuple[str, str], str] = {}

    def cast(tensor: str, to: str) -> str:
        key = (tensor, to)
        if key not in made:
            made[key] = f"{tensor}__to_{to}"
            elem = TensorProto.FLOAT16 if to == "fp16" else TensorProto.FLOAT
            casts.append(helper.make_node("Cast", [tensor], [made[key]], to=elem, name=f"Cast_{made[key]}"))
        return made[key]

    for n in compute:
        region = "fp32" if n.name in keep else "fp16"
        for k, i in enumerate(n.input):
            if not i or (n.op_type, k) in _FLOAT32_OPERANDS:
                continue
            if kind.get(i) == "const":
                if region == "fp16" and i in renamed:
                    n.input[k] = renamed[i]
            elif kind.get(i) in ("fp32", "fp16") and kind[i] != region:
                n.input[k] = cast(i, region)
        if region == "fp16" and n.op_type == "Cast":
            for a in n.attribute:
                if a.name == "to" and a.i == TensorProto.FLOAT:
                    a.i = TensorProto.FLOAT16
    out_kind = kind.get(output_name)
    if out_kind == "fp16":
        inner = f"{output_name}__fp16"
        for n in compute:
            for k, o in enumerate(n.output):
                if o == output_name:
                    n.output[k] = inner
            for k, i in enumerate(n.input):
                if i == output_name:
                    n.input[k] = inner
        casts.append(
            helper.make_node(
                "Cast", [inner], [output_name], to=TensorProto.FLOAT, name=f"Cast_{output_name}_fp32"
            )
        )
    nodes = [n for n in g.node if n.op_type == "Constant"] + casts + compute
    _topological(g, nodes)
    del g.value_info[:]
    m = onnx.shape_inference.infer_shapes(m)
    onnx.checker.check_model(m)
    return m


def _topological(graph: Any, nodes: list[Any]) -> None:
    """Replace ``graph.node`` with ``nodes`` in an order where every input is produced first."""
    ready = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    pending = list(nodes)
    ordered: list[Any] = []
    while pending:
        progressed = False
        for n in list(pending):
            if all(i in ready for i in n.input):
                ordered.append(n)
                ready.update(n.output)
                pending.remove(n)
                progressed = True
        if not progressed:
            raise ValueError(f"fp16 conversion: cannot order nodes {[n.name for n in pending]}")
    del graph.node[:]
    graph.node.extend(ordered)
