"""What a detector ONNX declares, read once without its weights: inputs, outputs, metadata, node types.

Both the ONNX Runtime detector (:mod:`pairedge.runtime.detectors.onnx`) and ``pairedge build --detector``
(:mod:`pairedge.export.tensorrt.detector`) read a detector through :func:`read_detector_graph`, so they see
the same inputs and tell its layout apart from the same facts
(:func:`pairedge.runtime.detectors.layouts.identify`). The image input's declared size is checked against
:data:`pairedge.core.limits.MAX_DETECTOR_INPUT_SIDE` here, before any session or engine is made: a graph
that declares ``[1, 3, 20000, 20000]`` would need gigabytes per frame.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pairedge.core import limits
from pairedge.core.errors import ModelError

#: RT-DETR's second input: the original image size (width, height), int64 ``[1, 2]``.
SIZE_INPUT = "orig_target_sizes"
#: Node types of ONNX Runtime's quantizers (QOperator and QDQ formats, dynamic quantization).
QUANTIZED_OPS = frozenset(
    {
        "QuantizeLinear",
        "DequantizeLinear",
        "ConvInteger",
        "MatMulInteger",
        "QLinearConv",
        "QLinearMatMul",
        "QLinearAdd",
        "QLinearMul",
        "DynamicQuantizeLinear",
    }
)
_QDQ = frozenset({"QuantizeLinear", "DequantizeLinear"})

Dim = int | str


@dataclass(frozen=True)
class DetectorGraph:
    """A detector ONNX's declared interface.

    Attributes:
        name: the file name (messages).
        image_input: the image input's name; image_shape its ``[N, 3, H, W]`` (int, or str when symbolic);
            image_type ``"float32"`` or ``"float16"``.
        size_input: RT-DETR's ``orig_target_sizes`` input name, or None.
        outputs: ``(name, shape)`` of every output.
        metadata: ``metadata_props``.
        op_types: every node type (subgraphs included).
    """

    name: str
    image_input: str
    image_shape: tuple[Dim, ...]
    image_type: str
    size_input: str | None
    outputs: tuple[tuple[str, tuple[Dim, ...]], ...]
    metadata: Mapping[str, str]
    op_types: frozenset[str]

    @property
    def fixed_size(self) -> tuple[int, int] | None:
        """(height, width) when the image input declares both, else None."""
        h, w = self.image_shape[2], self.image_shape[3]
        return (h, w) if isinstance(h, int) and isinstance(w, int) and h > 0 and w > 0 else None

    @property
    def has_qdq(self) -> bool:
        """Q/DQ nodes (TensorRT's explicit quantization reads them)."""
        return bool(self.op_types & _QDQ)

    @property
    def quantized(self) -> bool:
        """Any node of ONNX Runtime's quantizers."""
        return bool(self.op_types & QUANTIZED_OPS)

    def precision_note(self) -> str:
        """``", fp16"`` / ``", quantized"`` / ``""`` for descriptions."""
        if self.quantized:
            return ", quantized"
        return ", fp16" if self.image_type == "float16" else ""


def _dims(vi: Any) -> tuple[Dim, ...]:
    return tuple(
        d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
        for d in vi.type.tensor_type.shape.dim
    )


def _nodes(graph: Any) -> Iterator[Any]:
    """Every node of ``graph`` and of its subgraphs (If / Loop bodies)."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _nodes(attr.g)
            for sub in attr.graphs:
                yield from _nodes(sub)


def read_detector_graph(path: Path) -> DetectorGraph:
    """The declared interface of a detector ONNX (weights not loaded).

    Raises:
        ModelError: not a readable ONNX file, not one image input
        ``[1, 3, H, W]`` of float32 / float16 (plus RT-DETR's ``orig_target_sizes``), or a declared side above
        :data:`pairedge.core.limits.MAX_DETECTOR_INPUT_SIDE`.
    """
    import onnx

    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # onnx raises DecodeError and others
        raise ModelError(
            f"{path}: ONNX Runtime could not load the detector: not a readable ONNX file "
            f"({type(exc).__name__})"
        ) from None
    g = proto.graph
    inits = {t.name for t in g.initializer}
    inputs = [vi for vi in g.input if vi.name not in inits]
    images = [vi for vi in inputs if vi.name != SIZE_INPUT]
    size_input = SIZE_INPUT if any(vi.name == SIZE_INPUT for vi in inputs) else None
    got = (
        ", ".join(f"{vi.name} {list(_dims(vi))}" for vi in inputs)
        or "no input at all (an empty or non-ONNX file?)"
    )
    shape = _dims(images[0]) if len(images) == 1 else ()
    if len(images) != 1 or len(shape) != 4 or (isinstance(shape[1], int) and shape[1] != 3):
        raise ModelError(
            f"{path.name}: expected one image input [1, 3, H, W] (plus RT-DETR's {SIZE_INPUT}), got {got}"
        )
    if isinstance(shape[0], int) and shape[0] not in (0, 1):
        raise ModelError(f"{path.name}: expected an image input of batch 1 (or dynamic), got {got}")
    elem = images[0].type.tensor_type.elem_type
    types = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.FLOAT16: "float16"}
    if elem not in types:
        name = (
            onnx.TensorProto.DataType.Name(elem) if elem in onnx.TensorProto.DataType.values() else str(elem)
        )
        raise ModelError(f"{path.name}: expected a float32 or float16 image input, got {name}")
    side = limits.MAX_DETECTOR_INPUT_SIDE
    big = [d for d in shape[2:] if isinstance(d, int) and d > side]
    if big:
        raise ModelError(
            f"{path.name}: the image input {images[0].name} {list(shape)} is larger than the detector input "
            f"ceiling of {side} px a side (pairedge.core.limits.MAX_DETECTOR_INPUT_SIDE); export it at a "
            "smaller size (e.g. 640)"
        )
    return DetectorGraph(
        name=path.name,
        image_input=images[0].name,
        image_shape=shape,
        image_type=types[elem],
        size_input=size_input,
        outputs=tuple((vi.name, _dims(vi)) for vi in g.output),
        metadata={p.key: p.value for p in proto.metadata_props},
        op_types=frozenset(n.op_type for n in _nodes(g)),
    )
