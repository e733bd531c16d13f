"""Which precision each Gemm of a built engine runs in, read back from TensorRT's engine inspector.

A Q/DQ ONNX only *asks* for int8: TensorRT fuses ``DequantizeLinear -> Gemm`` into an int8 GEMM where it has
a kernel, and otherwise runs the layer in higher precision. ``pairedge build`` therefore reads the built
engine back and records, per ONNX Gemm / MatMul node, the datatype of the engine layer that computes it::

    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED  # before the build (names only otherwise)
    engine = trt.Runtime(logger).deserialize_cuda_engine(plan)    # set Runtime.DLA_core = N first for DLA
    context = engine.create_execution_context()
    context.set_input_shape(name, opt)                            # else "N/A due to dynamic shapes"
    inspector = engine.create_engine_inspector()
    inspector.execution_context = context
    info      = json.loads(inspector.get_engine_information(trt.LayerInformationFormat.JSON))

``info["Layers"]`` holds one object per engine layer; its ``Name`` joins the ONNX nodes TensorRT fused into
it with ``" + "`` and each input's ``"Format/Datatype"`` names the datatype (``"Row major linear Int8
format"``, ``"... Half ..."``, ``"... Float ..."``). A Gemm's precision is its layer's first input's.
Checked here over the recording fake (``tests/export/trt``); TensorRT's own output is not verified here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pairedge.core.errors import BackendError

#: Substrings of ``"Format/Datatype"`` -> precision, in the order they are tried.
DATATYPES = (
    ("Int8", "int8"),
    ("INT8", "int8"),
    ("Half", "fp16"),
    ("FP16", "fp16"),
    ("BF16", "bf16"),
    ("Float", "fp32"),
    ("FP32", "fp32"),
)
WEIGHTED_OPS = ("Gemm", "MatMul")


def enable_detailed_layers(trt: Any, config: Any) -> bool:
    """Ask the build for per-layer details (formats, datatypes); False where this TensorRT has no such
    setting."""
    verbosity = getattr(trt, "ProfilingVerbosity", None)
    if verbosity is None:
        return False
    config.profiling_verbosity = verbosity.DETAILED
    return True


def engine_layers(
    trt: Any, plan: bytes, logger: Any, shapes: Mapping[str, Sequence[int]], dla_core: int | None = None
) -> list[dict[str, Any]]:
    """The engine's layers as TensorRT's inspector describes them (module docstring).

    Args:
        plan: the serialized engine; ``logger``: the build's logger (TensorRT holds it while deserializing).
        shapes: input name -> the shape the inspector reports formats at (the profile's opt).
        dla_core: the DLA core a DLA engine was built for (the runtime must point at it).

    Raises:
        BackendError: the engine just built does not deserialize.
    """
    runtime = trt.Runtime(logger)
    if dla_core is not None:
        runtime.DLA_core = dla_core
    engine = runtime.deserialize_cuda_engine(plan)
    if engine is None:
        raise BackendError("TensorRT could not deserialize the engine it has just built (see its log)")
    context = engine.create_execution_context()
    for name, shape in shapes.items():
        context.set_input_shape(name, tuple(shape))
    inspector = engine.create_engine_inspector()
    inspector.execution_context = context
    text = inspector.get_engine_information(trt.LayerInformationFormat.JSON)
    del inspector, context, engine, runtime  # the context before the engine, the engine before the runtime
    try:
        info = json.loads(text)
    except ValueError:
        return []
    layers = info.get("Layers", []) if isinstance(info, dict) else []
    return [row for row in layers if isinstance(row, dict)]  # LAYER_NAMES_ONLY gives bare strings


def datatype(row: Mapping[str, Any]) -> str:
    """The precision of an engine layer's (``row``'s) first input (``"unknown"`` when the inspector does not
    say)."""
    inputs = row.get("Inputs") or []
    text = str(inputs[0].get("Format/Datatype", "")) if inputs and isinstance(inputs[0], dict) else ""
    return next((p for key, p in DATATYPES if key in text), "unknown")


def weighted_node_names(onnx_path: Path) -> list[str]:
    """Names of the ONNX file's Gemm / MatMul nodes, in graph order."""
    import onnx

    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    return [n.name for n in graph.node if n.op_type in WEIGHTED_OPS and n.name]


def gemm_precisions(layers: Sequence[Mapping[str, Any]], names: Sequence[str]) -> dict[str, str]:
    """ONNX Gemm / MatMul node name -> the precision of the engine layer that computes it (``"unknown"``:
    no row names it, e.g. a build without detailed layer information)."""
    out: dict[str, str] = {}
    parts = [
        (row, [p.strip() for p in str(row.get("Name", "")).split(" + ")])
        for row in layers
        if row.get("LayerType") != "Reformat"
    ]
    for name in names:
        match = next((row for row, ps in parts if name in ps), None)
        out[name] = "unknown" if match is None else datatype(match)
    return out


def int8_requested(onnx_path: Path) -> list[str]:
    """The Gemm / MatMul nodes the ONNX asks to run in int8: both inputs come from ``DequantizeLinear``."""
    import onnx

    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    producer = {o: n.op_type for n in graph.node for o in n.output}
    return [
        n.name
        for n in graph.node
        if n.op_type in WEIGHTED_OPS
        and n.name
        and all(producer.get(i) == "DequantizeLinear" for i in n.input[:2])
    ]


def int8_summary(precisions: Mapping[str, str], requested: Sequence[str]) -> tuple[str, list[str]]:
    """A one-line account of where the Gemms run (``"10 of 10 Gemms int8"``) and the Gemms the ONNX asked
    in int8 that the engine runs otherwise (TensorRT had no int8 kernel for them, or did not fuse the
    Q/DQ)."""
    if not precisions or set(precisions.values()) == {"unknown"}:
        return "Gemm precisions unknown (this TensorRT gave no detailed layer information)", []
    int8 = sum(p == "int8" for p in precisions.values())
    missed = [g for g in requested if precisions.get(g) != "int8"]
    return f"{int8} of {len(precisions)} Gemms int8", missed
