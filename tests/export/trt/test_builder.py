"""The builder's exact TensorRT call sequence per generation and precision, over the recording fake."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from fake_tensorrt import FakeCudaMemory, make_fake_tensorrt, plan_of, readback_calls
from pairedge.core.errors import InputError
from pairedge.core.features import get_spec
from pairedge.export.tensorrt.builder import BuildError, BuildSettings, Profile, build_serialized
from pairedge.export.tensorrt.folder import build_model_folder
from pairedge.export.tensorrt.progress import RecordingSink
from pairedge.gpu.tensorrt import versions
from pairedge.runtime.backends.tensorrt_loader import EngineManifest

F1, F2 = get_spec("pairedge").stage1_dim, get_spec("pairedge").stage2_dim  # the bundled model's widths

GENERATIONS = {"10.3": "10.3.0.30", "10.13": "10.13.0.35", "11.x": "11.1.0.8"}
STRONG = 1 << 1  # 1 << NetworkDefinitionCreationFlag.STRONGLY_TYPED


def expected_calls(
    gen: str, precision: str, onnx: str, width: int, workspace: int, cache: int
) -> list[tuple]:
    flags = STRONG if gen == "10.13" else 0
    precision_flag = {"10.3": {"fp16": ["FP16"], "int8": ["INT8", "FP16"]}}.get(gen, {}).get(precision, [])
    return [
        ("ILogger.__init__",),
        ("Builder.__init__", True),
        ("Builder.create_network", flags),
        ("OnnxParser.__init__", "INetworkDefinition", True),
        ("OnnxParser.parse_from_file", onnx),
        ("INetworkDefinition.get_input", 0),
        ("INetworkDefinition.get_output", 0),
        ("Builder.create_builder_config",),
        ("IBuilderConfig.set_memory_pool_limit", "WORKSPACE", workspace << 20),
        *[("IBuilderConfig.set_flag", f) for f in precision_flag],
        ("Builder.create_optimization_profile",),
        ("IOptimizationProfile.set_shape", "features", (1, width), (8, width), (256, width)),
        ("IBuilderConfig.add_optimization_profile",),
        ("IBuilderConfig.create_timing_cache", cache),
        ("IBuilderConfig.set_timing_cache", False),
        ("IProgressMonitor.__init__",),
        ("IBuilderConfig.progress_monitor=", True),
        ("IBuilderConfig.profiling_verbosity=", "DETAILED"),
        ("Builder.build_serialized_network",),
        ("IBuilderConfig.get_timing_cache",),
        ("ITimingCache.serialize",),
        *readback_calls({"features": (8, width)}),  # which precision every Gemm runs in, at the opt shape
    ]


@pytest.mark.parametrize("gen", GENERATIONS)
@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8"])
def test_call_sequence(gen: str, precision: str, full_model_dir: Path, tmp_path: Path) -> None:
    trt = make_fake_tensorrt(GENERATIONS[gen])
    onnx = full_model_dir / ("stage1.onnx" if precision == "fp32" else f"stage1.{precision}.onnx")
    cache = tmp_path / "timing.cache"
    settings = BuildSettings(precision, Profile(1, 8, 256), workspace_mib=64, timing_cache=cache)
    sink = RecordingSink()
    out = build_serialized(trt, onnx, settings, progress=sink)
    assert trt.calls == expected_calls(gen, precision, str(onnx), F1, 64, 0)
    assert out.num_features == F1 and out.input_name == "features" and out.output_names == ("logits",)
    assert out.network_flags == (STRONG if gen == "10.13" else 0)
    weak = {"fp16": ("FP16",), "int8": ("INT8", "FP16")}  # int8 allows fp16 outside the Q/DQ pairs
    assert out.builder_flags == (weak.get(precision, ()) if gen == "10.3" else ())
    assert sink.events[0] == ("start", "Building engine", None, 2) and sink.events[-1] == (
        "finish",
        "Building engine",
    )
    # every Gemm of the int8 graph runs int8; fp16 / fp32 graphs in their own precision
    assert out.gemm_precisions and set(out.gemm_precisions.values()) == {precision}
    # no weak-typing API on strongly typed generations
    if gen != "10.3":
        assert not [c for c in trt.calls if c[0] == "IBuilderConfig.set_flag"]


@pytest.mark.parametrize("gen", GENERATIONS)
def test_timing_cache_round_trip(gen: str, model_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "caches" / "timing.cache"
    settings = BuildSettings("fp32", timing_cache=cache)
    trt = make_fake_tensorrt(GENERATIONS[gen])
    first = build_serialized(trt, model_dir / "stage1.onnx", settings)
    assert first.timing_cache_loaded == 0 and cache.is_file()
    saved = cache.read_bytes()
    assert first.timing_cache_saved == len(saved) and json.loads(saved) == {"builds": 1}
    trt2 = make_fake_tensorrt(GENERATIONS[gen])
    second = build_serialized(trt2, model_dir / "stage1.onnx", settings)
    assert ("IBuilderConfig.create_timing_cache", len(saved)) in trt2.calls
    assert second.timing_cache_loaded == len(saved) and json.loads(cache.read_bytes()) == {"builds": 2}


def test_unreadable_timing_cache_starts_fresh(model_dir: Path, tmp_path: Path, caplog) -> None:
    cache = tmp_path / "timing.cache"
    cache.write_bytes(b"\xff\xfe not a cache")
    trt = make_fake_tensorrt("10.3.0.30")
    with caplog.at_level(logging.WARNING, "pairedge.tensorrt"):
        out = build_serialized(trt, model_dir / "stage1.onnx", BuildSettings(timing_cache=cache))
    assert "not readable" in caplog.text and out.timing_cache_loaded == 0
    assert json.loads(cache.read_bytes()) == {"builds": 1}


def test_parser_failure_names_node_op_and_reason(model_dir: Path) -> None:
    trt = make_fake_tensorrt("10.3.0.30", unsupported_ops=frozenset({"Gemm"}))
    with pytest.raises(
        BuildError, match=r"node \d+ .*\(op Gemm\): No importer registered for op: Gemm"
    ) as info:
        build_serialized(trt, model_dir / "stage1.onnx", BuildSettings())
    assert "pairedge check" in str(info.value)


def test_build_failure_carries_the_log(model_dir: Path) -> None:
    trt = make_fake_tensorrt("10.13.0.35", fail_build=True)
    with pytest.raises(BuildError, match="out of workspace memory"):
        build_serialized(trt, model_dir / "stage1.onnx", BuildSettings("fp32"))


def test_versions_module() -> None:
    assert versions.TrtVersion.parse("10.3.0.30") == versions.TrtVersion(10, 3, 0, 30)
    assert versions.TrtVersion.parse("tensorrt-11").major == 11
    assert str(versions.TrtVersion.parse("10.13.0.35")) == "10.13.0.35"
    assert versions.generation(versions.TrtVersion(10, 11)).precision_flags
    assert versions.generation(versions.TrtVersion(10, 12)).creation_flag
    assert not versions.generation(versions.TrtVersion(11, 0)).creation_flag
    with pytest.raises(InputError, match="TensorRT 10 or later"):
        versions.generation(versions.TrtVersion(8, 6))
    with pytest.raises(InputError, match="MIN,OPT,MAX"):
        Profile.parse("1,64")
    with pytest.raises(InputError, match="min <= opt <= max"):
        Profile.parse("64,1,512")


@pytest.mark.parametrize("gen", GENERATIONS)
def test_build_model_folder_writes_engines_and_manifests(gen: str, full_model_dir: Path) -> None:
    trt = make_fake_tensorrt(GENERATIONS[gen])
    built = build_model_folder(
        full_model_dir, BuildSettings("int8", Profile(2, 16, 128), 32), trt=trt, memory=FakeCudaMemory()
    )
    tag = f"orin-sm87-trt{'.'.join(GENERATIONS[gen].split('.')[:3])}"
    assert [b.engine for b in built] == [
        full_model_dir / "engines" / tag / f"stage{s}.int8.engine" for s in (1, 2)
    ]
    for b in built:
        m = EngineManifest.read(b.engine)
        assert m == b.manifest
        assert (
            m.stage,
            m.precision,
            m.tensorrt_version,
            m.device_name,
            m.compute_capability,
            m.cuda_version,
        ) == (b.stage, "int8", GENERATIONS[gen], "Orin", "8.7", "12.6")
        assert dict(m.profile) == {"min": 2, "opt": 16, "max": 128}
        assert m.onnx["file"] == f"stage{b.stage}.int8.onnx" and len(m.onnx["sha256"]) == 64
        assert m.engine["size"] == b.engine.stat().st_size
        assert m.num_features == (F1 if b.stage == 1 else F2) and m.feature_spec == "pairedge"
        assert m.build["builder_flags"] == (["INT8", "FP16"] if gen == "10.3" else [])
        assert plan_of(b.engine)["network_flags"] == (STRONG if gen == "10.13" else 0)
    folder_manifest = json.loads((full_model_dir / "manifest.json").read_text())
    roles = {f["name"]: f["role"] for f in folder_manifest["files"]}
    assert roles[f"engines/{tag}/stage1.int8.engine"] == "engine"
    assert roles[f"engines/{tag}/stage2.int8.engine.json"] == "engine-manifest"
