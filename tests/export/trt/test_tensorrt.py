"""Every TensorRT name pairedge uses exists in the TensorRT 10.13 API (tensorrt-stubs), the fake offers
nothing the stubs lack, and the 11.x path touches nothing NVIDIA removed in 11.x."""

from __future__ import annotations

import ast
import enum
import io
import re
import tokenize
from pathlib import Path

import numpy as np
import pytest
import stub_surface
from fake_tensorrt import FakeCudaMemory, make_fake_tensorrt
from pairedge.core.artefacts import PRECISIONS
from pairedge.export.tensorrt.builder import BuildSettings, Profile
from pairedge.export.tensorrt.folder import build_model_folder
from pairedge.gpu.tensorrt import versions
from pairedge.runtime.backends import load_model
from pairedge.runtime.backends.tensorrt import TensorRTBackend, TensorRTOptions

ROOT = Path(__file__).resolve().parents[3]
SOURCES = (
    sorted((ROOT / "export" / "tensorrt").glob("*.py"))
    + sorted((ROOT / "sdk" / "gpu" / "tensorrt").glob("*.py"))
    + [ROOT / "runtime" / "backends" / "tensorrt.py", ROOT / "runtime" / "detectors" / "tensorrt.py"]
)  # tensorrt_loader.py only reads manifests: its `engine` is a Path
SURFACE = stub_surface.load()["surface"]


def _has(name: str) -> bool:
    """``"Builder"``, ``"Builder.create_network"`` or ``"ILogger.Severity.ERROR"`` exists in the stubs."""
    parts = name.split(".")
    if len(parts) == 1:
        return name in SURFACE[""]
    owner, member = ".".join(parts[:-1]), parts[-1]
    return owner in SURFACE and member in SURFACE[owner]


def test_surface_file_is_the_10_13_stubs() -> None:
    assert "tensorrt_stubs-10.13.0.35" in stub_surface.load()["source"]
    assert _has("IExecutionContext.execute_async_v3") and _has("NetworkDefinitionCreationFlag.STRONGLY_TYPED")
    assert not _has("IExecutionContext.enqueue_v2")  # removed in 10.0: the surface is not a catch-all


def test_surface_matches_the_stub_wheel_when_present() -> None:
    wheels = sorted(Path("/tmp/trtstubs").glob("tensorrt_stubs-10.13*.whl"))
    if not wheels:
        pytest.skip(
            "no tensorrt-stubs wheel in /tmp/trtstubs (pip download --no-deps tensorrt-stubs==10.13.0.35.1)"
        )
    version, surface = stub_surface.from_wheel(wheels[0])
    assert version == "10.13.0.35" and surface == SURFACE


def test_fake_offers_nothing_the_stubs_lack() -> None:
    for version in ("10.3.0.30", "10.13.0.35", "11.1.0.8"):
        trt = make_fake_tensorrt(version)
        public = {n for n in vars(trt) if not n.startswith("_") and n != "calls"}
        missing = sorted(n for n in public if not _has(n))
        assert not missing, f"fake module names absent from the stubs: {missing}"
        for cls_name, cls in trt._fake_classes.items():
            members = {n for n in vars(cls) if not n.startswith("_")}
            missing = sorted(f"{cls_name}.{m}" for m in members if not _has(f"{cls_name}.{m}"))
            assert not missing, f"fake members absent from the stubs: {missing}"
        for name in (
            "BuilderFlag",
            "NetworkDefinitionCreationFlag",
            "MemoryPoolType",
            "TensorIOMode",
            "DataType",
            "DeviceType",
        ):
            enum_cls = getattr(trt, name)
            assert all(_has(f"{name}.{m.name}") for m in enum_cls), name
        assert all(_has(f"ILogger.Severity.{m.name}") for m in trt.ILogger.Severity)


def _source_trt_chains() -> set[str]:
    """Every ``trt.A.B.C`` attribute chain in pairedge's TensorRT sources."""
    chains: set[str] = set()
    for path in SOURCES:
        for match in re.finditer(r"\btrt\.([A-Za-z_][\w.]*)", path.read_text()):
            chains.add(match.group(1).rstrip("."))
    return chains


def test_every_module_level_name_in_the_source_exists() -> None:
    chains = _source_trt_chains()
    assert {"Builder", "OnnxParser", "Runtime", "MemoryPoolType.WORKSPACE", "TensorIOMode.INPUT"} <= chains
    missing = sorted(c for c in chains if not _has(c) and not _has(c.rsplit(".", 1)[0] if "." in c else c))
    assert not missing, f"TensorRT names used by pairedge but absent from the 10.13 stubs: {missing}"
    for chain in chains:
        parts = chain.split(".")
        for i in range(1, len(parts) + 1):
            assert _has(".".join(parts[:i])), f"{'.'.join(parts[:i])} (from trt.{chain}) is not in the stubs"


def _full_run(version: str, model_dir: Path) -> list[tuple]:
    """Build all three precisions and run every engine: every TensorRT call pairedge makes, recorded."""
    calls: list[tuple] = []
    for precision in ("fp32", "fp16", "int8"):
        trt = make_fake_tensorrt(version)
        build_model_folder(model_dir, BuildSettings(precision), trt=trt, memory=FakeCudaMemory())
        calls += trt.calls
        for stage in (1, 2):
            memory = FakeCudaMemory()
            trt = make_fake_tensorrt(version, memory=memory)
            name = f"stage{stage}.onnx" if precision == "fp32" else f"stage{stage}.{precision}.onnx"
            backend = TensorRTBackend(load_model(model_dir / name), trt=trt, memory=memory)
            with backend:
                backend.infer(np.zeros((3, backend.num_features), np.float32))
            calls += trt.calls
    for fallback in (False, True):  # DLA core 1, with and without GPU fallback, built and run
        trt = make_fake_tensorrt(version, dla_cores=2)
        settings = BuildSettings("fp16", Profile(8, 8, 8), dla_core=1, gpu_fallback=fallback)
        build_model_folder(model_dir, settings, trt=trt, memory=FakeCudaMemory())
        calls += trt.calls
        memory = FakeCudaMemory()
        trt = make_fake_tensorrt(version, memory=memory, dla_cores=2)
        backend = TensorRTBackend(
            load_model(model_dir / "stage1.fp16.onnx"), TensorRTOptions(dla_core=1), trt=trt, memory=memory
        )
        with backend:
            backend.infer(np.zeros((3, backend.num_features), np.float32))
        calls += trt.calls
    calls += _detector_run(version, model_dir)
    return calls


def _detector_run(version: str, folder: Path) -> list[tuple]:
    """An RT-DETR-style detector (two inputs, int64 labels) built and run on one frame."""
    from detector_models import detr_model
    from pairedge.export.tensorrt.detector import build_detector
    from pairedge.runtime.detectors.tensorrt import TensorRTDetector

    boxes = np.array([[10, 10, 50, 90]], np.float32)
    onnx = detr_model(folder / "rtdetr.onnx", boxes, np.array([0.9]), np.array([0]))
    trt = make_fake_tensorrt(version)
    built = build_detector(onnx, BuildSettings(), trt=trt, memory=FakeCudaMemory())
    calls = list(trt.calls)
    memory = FakeCudaMemory()
    trt = make_fake_tensorrt(version, memory=memory)
    with TensorRTDetector(built.engine, trt=trt, memory=memory) as det:
        assert len(det.detect(np.zeros((320, 320, 3), np.uint8))) == 1
    return calls + trt.calls


@pytest.mark.parametrize("version", ["10.3.0.30", "10.13.0.35", "11.1.0.8"])
def test_every_recorded_call_exists_in_the_stubs(version: str, full_model_dir: Path) -> None:
    names = {c[0].rstrip("=") for c in _full_run(version, full_model_dir)}
    assert "IExecutionContext.execute_async_v3" in names and "Builder.build_serialized_network" in names
    assert {"IBuilderConfig.can_run_on_DLA", "IBuilderConfig.DLA_core", "Runtime.DLA_core"} <= names
    missing = sorted(n for n in names if not _has(n))
    assert not missing, f"calls absent from the 10.13 stubs: {missing}"
    removed = sorted(n for n in names if n in versions.REMOVED_IN_11)
    assert not removed


def test_removed_in_11_list_names_real_10x_apis() -> None:
    assert not [n for n in versions.REMOVED_IN_11 if not _has(n)]


def _code_names(text: str) -> set[str]:
    """Identifiers of the code (strings, docstrings and comments left out)."""
    return {t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.NAME}


def test_no_removed_api_outside_the_gated_flags() -> None:
    """Outside versions.precision_flags (used only on weakly typed 10.x), the code names no removed API."""
    removed_members = {n.split(".")[-1] for n in versions.REMOVED_IN_11}
    for path in SOURCES:
        text = path.read_text()
        if path.name == "versions.py":
            gated = text[text.index("def precision_flags") : text.index("def has_progress_monitor")]
            assert _code_names(gated) & removed_members == {"FP16", "INT8"}
            text = text.replace(gated, "")
        used = _code_names(text) & removed_members
        assert not used, f"{path.name} uses {sorted(used)}, removed in TensorRT 11"


def test_11x_never_asks_for_precision_flags() -> None:
    trt = make_fake_tensorrt("11.1.0.8")
    version = versions.TrtVersion.of(trt)
    assert not hasattr(trt.BuilderFlag, "FP16") and not hasattr(trt.BuilderFlag, "INT8")
    for precision in PRECISIONS:
        assert versions.precision_flags(trt, version, precision) == []
    assert versions.network_flags(trt, version) == 0
    assert isinstance(trt.BuilderFlag, enum.EnumMeta)


#: Variables of pairedge's TensorRT code -> the TensorRT class they hold (names are kept stable on purpose).
VARIABLE_CLASS = {
    "builder": "Builder",
    "network": "INetworkDefinition",
    "parser": "OnnxParser",
    "config": "IBuilderConfig",
    "profile": "IOptimizationProfile",
    "tensor": "ITensor",
    "engine": "ICudaEngine",
    "context": "IExecutionContext",
    "runtime": "Runtime",
    "err": "ParserError",
    "_engine": "ICudaEngine",
    "_context": "IExecutionContext",
    "layer": "ILayer",
}
#: (class, method) -> class of what it returns, for chained calls.
RETURNS = {
    ("IBuilderConfig", "get_timing_cache"): "ITimingCache",
    ("INetworkDefinition", "get_input"): "ITensor",
    ("INetworkDefinition", "get_output"): "ITensor",
    ("OnnxParser", "get_error"): "ParserError",
    ("Runtime", "deserialize_cuda_engine"): "ICudaEngine",
    ("ICudaEngine", "create_execution_context"): "IExecutionContext",
    ("Builder", "create_network"): "INetworkDefinition",
    ("INetworkDefinition", "get_layer"): "ILayer",
}


def _class_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return VARIABLE_CLASS.get(node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return VARIABLE_CLASS.get(node.attr)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner = _class_of(node.func.value)
        return RETURNS.get((owner, node.func.attr)) if owner else None
    return None


def test_every_member_used_on_a_tensorrt_object_exists() -> None:
    """Static: each ``builder.x`` / ``config.x`` / ``self._context.x`` ... in the source is in the 10.13
    stubs."""
    used: set[str] = set()
    # modules that hold no TensorRT object (there `engine` is a Path, for instance)
    plain = {"manifest.py", "folder.py", "check.py", "onnx_ops.py", "__init__.py"}
    for path in (p for p in SOURCES if p.name not in plain):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and (owner := _class_of(node.value)):
                used.add(f"{owner}.{node.attr}")
    expected = {
        "IBuilderConfig.set_memory_pool_limit",
        "ITimingCache.serialize",
        "IExecutionContext.execute_async_v3",
        "ParserError.node_operator",
        "ICudaEngine.get_tensor_profile_shape",
        "ITensor.shape",
        "Builder.num_DLA_cores",
        "IBuilderConfig.can_run_on_DLA",
        "IBuilderConfig.default_device_type",
        "IBuilderConfig.DLA_core",
        "INetworkDefinition.num_layers",
        "ILayer.name",
        "Runtime.DLA_core",
        "Runtime.num_DLA_cores",
    }
    assert expected <= used, expected - used
    missing = sorted(u for u in used if not _has(u))
    assert not missing, f"members used on TensorRT objects but absent from the 10.13 stubs: {missing}"
