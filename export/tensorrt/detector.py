"""``pairedge build --detector MODEL.onnx``: a person detector's ONNX -> a TensorRT engine + its manifest.

The detector takes one image input ``[1, 3, H, W]`` (batch static 1 or dynamic; H and W fixed) and, for
RT-DETR, the ``orig_target_sizes`` input ``[1, 2]``; the one optimisation profile is that fixed shape (min =
opt = max, batch 1), so the same build serves the GPU and a DLA core (``--dla-core N``). The output layout
(:mod:`pairedge.runtime.detectors.layouts`) is told apart here, at build time, exactly as the runtime tells it
apart (an ONNX Runtime CPU session of the file and one run), and written into the manifest
(:mod:`pairedge.runtime.detectors.engine_manifest`), so the runtime needs only
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
from pairedge.runtime.detectors.graph import DetectorGraph, read_detector_graph
from pairedge.runtime.detectors.layouts import layout_record
from pairedge.runtime.detectors.onnx import OnnxDetector, OnnxDetectorOptions, check_model_path


@dataclass(frozen=True)
class BuildGraph:
    """What the builder reads from a detector ONNX before TensorRT sees it.

    Attributes:
        graph: the declared interface (:func:`pairedge.runtime.detectors.graph.read_detector_graph`).
        shapes: input name -> the fixed shape of the profile (batch 1).
        input_size: (H, W) of the image input.
        layout: the layout told apart exactly as the runtime does it (an ONNX Runtime CPU session and one run
            of the model: :class:`~pairedge.runtime.detectors.onnx.OnnxDetector`), as a JSON object.
        has_fp16: float16 tensors in the graph.
    """

    graph: DetectorGraph
    shapes: dict[str, list[int]]
    input_size: tuple[int, int]
    layout: dict[str, Any]
    has_fp16: bool

    @property
    def image_input(self) -> str:
        return self.graph.image_input

    @property
    def size_input(self) -> str | None:
        return self.graph.size_input

    @property
    def has_qdq(self) -> bool:
        return self.graph.has_qdq


def read_build_graph(path: Path, layout: str | None = None) -> BuildGraph:
    """Inputs, layout and precision hints of a detector ONNX.

    Args:
        path: the ``.onnx`` detector.
        layout: a layout forcing the one told apart (``--detector-layout``); None: tell it apart.

    Raises:
        FormatError: not a readable ``.onnx`` file within the size ceiling. ModelError: not a detector of an
        accepted layout, several image inputs, or a dynamic H / W.
    """
    path = check_model_path(path)
    graph = read_detector_graph(path)
    size = graph.fixed_size
    if size is None:
        raise ModelError(
            f"{path.name}: the image input {graph.image_input} {list(graph.image_shape)} has a dynamic "
            "height or width; a TensorRT engine is built for one size: export with a fixed size "
            "(Ultralytics: imgsz=640 without dynamic=True)"
        )
    shapes: dict[str, list[int]] = {graph.image_input: [1, 3, *size]}
    if graph.size_input is not None:
        shapes[graph.size_input] = [1, 2]
    with OnnxDetector(path, OnnxDetectorOptions(layout=layout)) as detector:
        found = detector.layout
    assert found is not None
    return BuildGraph(graph, shapes, size, layout_record(found), _has_fp16(path))


def _has_fp16(path: Path) -> bool:
    import onnx

    g = onnx.load(str(path), load_external_data=False).graph
    fp16 = onnx.TensorProto.FLOAT16
    return any(t.data_type == fp16 for t in g.initializer) or any(
        vi.type.tensor_type.elem_type == fp16 for vi in [*g.input, *g.output, *g.value_info]
    )


def check_detector_precision(graph: BuildGraph, precision: str, strongly_typed: bool, name: str) -> None:
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
            f"{name}: this TensorRT builds strongly typed networks, whose precision is the ONNX graph's: "
            "this graph is fp32. Export the detector in fp16 (Ultralytics: yolo export format=onnx "
            "half=True) and build that file"
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
    root: Path | None = None,
    trt: Any = None,
    memory: Any = None,
    progress: ProgressSink | None = None,
    layout: str | None = None,
) -> BuiltDetector:
    """Build the TensorRT engine of a person-detector ONNX and write its manifest.

    Args:
        onnx_path: the detector (layouts of :mod:`pairedge.runtime.detectors.layouts`).
        layout: a layout forcing the one told apart from the graph (``--detector-layout``); None: tell it
            apart.
        settings: precision, workspace, timing cache, DLA core (the pair profile is not used).
        out: the engine folder; default ``<root>/engines/<device tag>[-dla<N>]``.
        root: the folder under which ``engines/`` goes by default; None: the ONNX's folder.
        trt, memory: the ``tensorrt`` module and a CUDA memory layer (defaults: the installed ones).
        progress: receives the build phases.

    Raises:
        FormatError, ModelError: not a detector ONNX of an accepted layout, with a fixed size.
        InputError: a precision this ONNX cannot give here, a DLA core the device lacks.
        BuildError: the parser, a DLA layer check or the build failed.
    """
    graph = read_build_graph(onnx_path, layout)
    trt = trt if trt is not None else load_tensorrt()
    strongly_typed = versions.generation(versions.TrtVersion.of(trt)).strongly_typed
    check_detector_precision(graph, settings.precision, strongly_typed, onnx_path.name)
    env = build_environment(trt, memory)

    def image_profile(network: Any) -> dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        names = [str(network.get_input(i).name) for i in range(network.num_inputs)]
        if sorted(names) != sorted(graph.shapes):
            raise BuildError(
                f"{onnx_path}: TensorRT sees the inputs {names}, expected {sorted(graph.shapes)}"
            )
        return {name: (tuple(graph.shapes[name]),) * 3 for name in names}  # type: ignore[misc]

    result = build_network(trt, onnx_path, settings, image_profile, progress)
    base = root if root is not None else onnx_path.parent
    engine_dir = (
        out if out is not None else base / artefacts.ENGINES_DIR / engine_folder(env.tag, settings.dla_core)
    )
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
