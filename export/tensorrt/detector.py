"""``pairedge build --detector MODEL.onnx``: a person detector's ONNX -> a TensorRT engine + its manifest.

The detector takes one image input ``[1, 3, H, W]`` (batch static 1 or dynamic; H and W fixed) and, for
RT-DETR, the ``orig_target_sizes`` input ``[1, 2]``; the one optimisation profile is that fixed shape (min =
opt = max, batch 1), so the same build serves the GPU and a DLA core (``--dla-core N``). The output layout
(:mod:`pairedge.runtime.detectors.layouts`) is found from the ONNX outputs and metadata here, at build time,
and written into the manifest (:mod:`pairedge.runtime.detectors.engine_manifest`), so the runtime needs only
the engine and its manifest. Layout::

    MODEL_DIR/MODEL.onnx
    MODEL_DIR/engines/<device>-sm<cc>-trt<version>[-dla<N>]/MODEL.<precision>.engine (+ .engine.json)

Precision: ``fp32``; ``fp16`` with ``BuilderFlag.FP16`` on weakly typed TensorRT (10.0 - 10.11, JetPack 6),
while strongly typed TensorRT (10.12+, 11.x) takes the types from the graph and so needs an fp16 export
(e.g. Ultralytics ``half=True``); ``int8`` only from an ONNX that already carries Q/DQ nodes (for example
NVIDIA ModelOpt's): ``pairedge calibrate`` quantizes the classifier stages from feature rows and has no image
calibration set for detectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pairedge.core import artefacts
from pairedge.core.errors import InputError, ModelError
from pairedge.core.version import __version__
from pairedge.export.tensorrt.builder import (
    BuildError,
    BuildSettings,
    NetworkBuild,
    build_network,
    build_record,
)
from pairedge.export.tensorrt.engine_files import build_environment, file_record, write_engine
from pairedge.export.tensorrt.progress import ProgressSink
from pairedge.gpu.tensorrt import load_tensorrt, versions
from pairedge.runtime.backends.tensorrt_loader import engine_folder
from pairedge.runtime.detectors.engine_manifest import DetectorEngineManifest
from pairedge.runtime.detectors.layouts import find_layout
from pairedge.runtime.detectors.onnx import check_model_path

SIZE_INPUT = "orig_target_sizes"
_QDQ = {"QuantizeLinear", "DequantizeLinear"}


@dataclass(frozen=True)
class DetectorGraph:
    """What the builder reads from a detector ONNX before TensorRT sees it.

    Attributes:
        image_input: the image input's name. size_input: RT-DETR's ``orig_target_sizes`` input, or None.
        shapes: input name -> the fixed shape of the profile (batch 1).
        input_size: (H, W) of the image input.
        layout: the :class:`~pairedge.runtime.detectors.layouts.Layout` as a JSON object.
        has_fp16, has_qdq: float16 tensors / Q/DQ nodes in the graph.
    """

    image_input: str
    size_input: str | None
    shapes: dict[str, list[int]]
    input_size: tuple[int, int]
    layout: dict[str, Any]
    has_fp16: bool
    has_qdq: bool


def read_detector_graph(path: Path) -> DetectorGraph:
    """Inputs, layout and precision hints of a detector ONNX (weights are not loaded).

    Raises:
        FormatError: not a readable ``.onnx`` file within the size ceiling. ModelError: not a detector of an
        accepted layout, several image inputs, or a dynamic H / W.
    """
    import onnx

    path = check_model_path(path)
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # onnx raises DecodeError and others
        raise ModelError(f"{path}: not a readable ONNX file ({type(exc).__name__})") from None
    g = proto.graph
    inits = {t.name for t in g.initializer}

    def dims(vi: Any) -> list[int | str]:
        return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in vi.type.tensor_type.shape.dim]

    inputs = [vi for vi in g.input if vi.name not in inits]
    images = [vi for vi in inputs if vi.name != SIZE_INPUT]
    size_input = SIZE_INPUT if any(vi.name == SIZE_INPUT for vi in inputs) else None
    got = ", ".join(f"{vi.name} {dims(vi)}" for vi in inputs) or "no input at all (an empty or non-ONNX file?)"
    if len(images) != 1 or len(dims(images[0])) != 4:
        raise ModelError(f"{path.name}: expected one image input [1, 3, H, W] (plus RT-DETR's {SIZE_INPUT}), got {got}")
    n, c, h, w = dims(images[0])
    if (isinstance(n, int) and n != 1) or c != 3:
        raise ModelError(f"{path.name}: expected an image input [1, 3, H, W] (batch 1 or dynamic), got {got}")
    if not (isinstance(h, int) and isinstance(w, int) and h > 0 and w > 0):
        raise ModelError(
            f"{path.name}: the image input {images[0].name} {dims(images[0])} has a dynamic height or width; a "
            "TensorRT engine is built for one size: export with a fixed size (Ultralytics: imgsz=640 without "
            "dynamic=True)"
        )
    shapes: dict[str, list[int]] = {images[0].name: [1, 3, h, w]}
    if size_input is not None:
        shapes[size_input] = [1, 2]
    metadata = {p.key: p.value for p in proto.metadata_props}
    outputs = [(vi.name, tuple(dims(vi))) for vi in g.output]
    layout = find_layout(outputs, metadata, size_input is not None, path.name)
    fp16 = onnx.TensorProto.FLOAT16
    has_fp16 = any(t.data_type == fp16 for t in g.initializer) or any(
        vi.type.tensor_type.elem_type == fp16 for vi in [*g.input, *g.output, *g.value_info]
    )
    return DetectorGraph(
        image_input=images[0].name,
        size_input=size_input,
        shapes=shapes,
        input_size=(h, w),
        layout={"kind": layout.kind, "outputs": list(layout.outputs), "center": layout.center, "rgb": layout.rgb,
                "unit_scale": layout.unit_scale, "box_format": layout.box_format},  # fmt: skip
        has_fp16=has_fp16,
        has_qdq=any(node.op_type in _QDQ for node in g.node),
    )


def check_detector_precision(graph: DetectorGraph, precision: str, strongly_typed: bool, name: str) -> None:
    """Refuse a precision the ONNX cannot give on this TensorRT (see the module docstring).

    Raises:
        InputError: int8 without Q/DQ nodes; fp16 of an fp32 graph on strongly typed TensorRT.
    """
    if precision == "int8" and not graph.has_qdq:
        raise InputError(
            f"{name}: --precision int8 needs a detector ONNX with Q/DQ nodes (e.g. from NVIDIA ModelOpt); "
            "pairedge calibrate makes int8 classifier stages only. Build fp16 instead"
        )
    if precision == "fp16" and strongly_typed and not graph.has_fp16:
        raise InputError(
            f"{name}: this TensorRT builds strongly typed networks, whose precision is the ONNX graph's: this "
            "graph is fp32. Export the detector in fp16 (Ultralytics: yolo export format=onnx half=True) and "
            "build that file"
        )


@dataclass(frozen=True)
class BuiltDetector:
    """The engine :func:`build_detector` wrote, its manifest and the build."""

    engine: Path
    manifest: DetectorEngineManifest
    output: NetworkBuild


def engine_name(onnx_path: Path, precision: str) -> str:
    """``yolo.onnx`` -> ``yolo.fp16.engine`` (a ``yolo.fp16.onnx`` gives ``yolo.fp16.engine`` too)."""
    stem = onnx_path.stem.removesuffix(f".{precision}")
    return f"{stem}.{precision}.engine"


def build_detector(
    onnx_path: Path,
    settings: BuildSettings,
    *,
    out: Path | None = None,
    trt: Any = None,
    memory: Any = None,
    progress: ProgressSink | None = None,
) -> BuiltDetector:
    """Build the TensorRT engine of a person-detector ONNX and write its manifest.

    Args:
        onnx_path: the detector (layouts of :mod:`pairedge.runtime.detectors.layouts`).
        settings: precision, workspace, timing cache, DLA core (the pair profile is not used).
        out: the engine folder; default ``<onnx folder>/engines/<device tag>[-dla<N>]``.
        trt, memory: the ``tensorrt`` module and a CUDA memory layer (defaults: the installed ones).
        progress: receives the build phases.

    Raises:
        FormatError, ModelError: not a detector ONNX of an accepted layout, with a fixed size.
        InputError: a precision this ONNX cannot give here, a DLA core the device lacks.
        BuildError: the parser, a DLA layer check or the build failed.
    """
    graph = read_detector_graph(onnx_path)
    trt = trt if trt is not None else load_tensorrt()
    strongly_typed = versions.generation(versions.TrtVersion.of(trt)).strongly_typed
    check_detector_precision(graph, settings.precision, strongly_typed, onnx_path.name)
    env = build_environment(trt, memory)

    def image_profile(network: Any) -> dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        names = [str(network.get_input(i).name) for i in range(network.num_inputs)]
        if sorted(names) != sorted(graph.shapes):
            raise BuildError(f"{onnx_path}: TensorRT sees the inputs {names}, expected {sorted(graph.shapes)}")
        return {name: (tuple(graph.shapes[name]),) * 3 for name in names}  # type: ignore[misc]

    result = build_network(trt, onnx_path, settings, image_profile, progress)
    engine_dir = out if out is not None else onnx_path.parent / artefacts.ENGINES_DIR / engine_folder(env.tag, settings.dla_core)
    engine_dir.mkdir(parents=True, exist_ok=True)
    engine_path = engine_dir / engine_name(onnx_path, settings.precision)
    engine_record = write_engine(engine_path, result.plan)
    manifest = DetectorEngineManifest(
        precision=settings.precision,
        tensorrt_version=env.tensorrt_version,
        cuda_version=env.cuda_version,
        device_name=env.device_name,
        compute_capability=env.compute_capability,
        onnx=file_record(onnx_path),
        engine=engine_record,
        image_input=graph.image_input,
        inputs=graph.shapes,
        input_size=graph.input_size,
        layout=graph.layout,
        size_input=graph.size_input,
        dla_core=settings.dla_core,
        gpu_fallback=settings.gpu_fallback,
        build=build_record(settings, result),
        pairedge_version=__version__,
    )
    manifest.write(engine_path)
    return BuiltDetector(engine_path, manifest, result)
