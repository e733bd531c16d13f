"""DLA builds (``pairedge build --dla-core N [--gpu-fallback]``): exact call sequences over the recording
fake, the refusals (fp32, a dynamic profile, a core the device lacks, layers the DLA cannot run), the engine
folder and manifest, and the runtime refusing an engine built for another device."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from fake_tensorrt import FakeCudaMemory, make_fake_tensorrt, readback_calls
from pairedge.core.errors import DeviceUnavailableError, InputError
from pairedge.core.features import get_spec
from pairedge.export.tensorrt.builder import BuildError, BuildSettings, Profile, build_serialized
from pairedge.export.tensorrt.folder import build_model_folder
from pairedge.runtime.backends import load_model
from pairedge.runtime.backends.tensorrt import TensorRTBackend, TensorRTOptions
from pairedge.runtime.backends.tensorrt_loader import EngineManifest, EngineMismatchError, manifest_path

F1 = get_spec("pairedge").stage1_dim
GENERATIONS = {"10.3": "10.3.0.30", "10.13": "10.13.0.35", "11.x": "11.1.0.8"}
STRONG = 1 << 1
FIXED = Profile(32, 32, 32)


def _layers(onnx: Path) -> list[str]:
    import onnx as onnx_lib

    return [n.name or f"{n.op_type}_{i}" for i, n in enumerate(onnx_lib.load(str(onnx)).graph.node)]


def dla_calls(
    gen: str, precision: str, onnx: str, width: int, fallback: bool, layers: list[str]
) -> list[tuple]:
    """The builder's calls for a DLA core 0 build (no timing cache file, no progress sink)."""
    flags = STRONG if gen == "10.13" else 0
    weak = {"fp16": ["FP16"], "int8": ["INT8", "FP16"]}[precision] if gen == "10.3" else []
    dla = [("IBuilderConfig.default_device_type=", "DLA"), ("IBuilderConfig.DLA_core=", 0)]
    dla += (
        [("IBuilderConfig.set_flag", "GPU_FALLBACK")]
        if fallback
        else [("IBuilderConfig.can_run_on_DLA", name) for name in layers]
    )
    return [
        ("ILogger.__init__",),
        ("Builder.__init__", True),
        ("Builder.num_DLA_cores",),
        ("Builder.create_network", flags),
        ("OnnxParser.__init__", "INetworkDefinition", True),
        ("OnnxParser.parse_from_file", onnx),
        ("INetworkDefinition.get_input", 0),
        ("INetworkDefinition.get_output", 0),
        ("Builder.create_builder_config",),
        ("IBuilderConfig.set_memory_pool_limit", "WORKSPACE", 256 << 20),
        *[("IBuilderConfig.set_flag", f) for f in weak],
        *dla,
        ("Builder.create_optimization_profile",),
        ("IOptimizationProfile.set_shape", "features", (32, width), (32, width), (32, width)),
        ("IBuilderConfig.add_optimization_profile",),
        ("IBuilderConfig.create_timing_cache", 0),
        ("IBuilderConfig.set_timing_cache", False),
        ("IBuilderConfig.profiling_verbosity=", "DETAILED"),
        ("Builder.build_serialized_network",),
        *readback_calls({"features": (32, width)}, dla_core=0),
    ]


@pytest.mark.parametrize("gen", GENERATIONS)
@pytest.mark.parametrize("precision", ["int8", "fp16"])
def test_dla_core_0_gpu_fallback_call_sequence(gen: str, precision: str, full_model_dir: Path) -> None:
    trt = make_fake_tensorrt(GENERATIONS[gen], dla_cores=2)
    onnx = full_model_dir / f"stage1.{precision}.onnx"
    out = build_serialized(trt, onnx, BuildSettings(precision, FIXED, dla_core=0, gpu_fallback=True))
    assert trt.calls == dla_calls(gen, precision, str(onnx), F1, True, [])
    weak = {"fp16": ("FP16",), "int8": ("INT8", "FP16")}[precision] if gen == "10.3" else ()
    assert out.builder_flags == (*weak, "GPU_FALLBACK") and (out.dla_core, out.gpu_fallback) == (0, True)


@pytest.mark.parametrize("gen", GENERATIONS)
def test_dla_without_fallback_asks_every_layer(gen: str, full_model_dir: Path) -> None:
    trt = make_fake_tensorrt(GENERATIONS[gen], dla_cores=2)
    onnx = full_model_dir / "stage1.fp16.onnx"
    build_serialized(trt, onnx, BuildSettings("fp16", FIXED, dla_core=0))
    layers = _layers(onnx)
    assert len(layers) > 3
    assert trt.calls == dla_calls(gen, "fp16", str(onnx), F1, False, layers)


def test_layer_the_dla_cannot_run_is_named_without_fallback(full_model_dir: Path) -> None:
    onnx = full_model_dir / "stage1.fp16.onnx"
    import onnx as onnx_lib

    ops = {n.op_type for n in onnx_lib.load(str(onnx)).graph.node}
    op = "Gemm" if "Gemm" in ops else "MatMul"
    refused = [
        n.name or f"{n.op_type}_{i}"
        for i, n in enumerate(onnx_lib.load(str(onnx)).graph.node)
        if n.op_type == op
    ]
    trt = make_fake_tensorrt("10.3.0.30", dla_cores=2, dla_unsupported_ops=frozenset({op}))
    with pytest.raises(
        BuildError, match=rf"{len(refused)} of \d+ layers cannot run on DLA core 1 at fp16: "
    ) as info:
        build_serialized(trt, onnx, BuildSettings("fp16", FIXED, dla_core=1))
    message = str(info.value)
    assert refused[0] in message and "--gpu-fallback" in message and "\n" not in message
    assert not [c for c in trt.calls if c[0] == "Builder.build_serialized_network"]  # refused before building
    trt = make_fake_tensorrt("10.3.0.30", dla_cores=2, dla_unsupported_ops=frozenset({op}))
    assert build_serialized(trt, onnx, BuildSettings("fp16", FIXED, dla_core=1, gpu_fallback=True)).plan


def test_fp32_and_fallback_alone_are_refused() -> None:
    with pytest.raises(InputError, match="the DLA runs fp16 or int8 only, not fp32"):
        BuildSettings("fp32", FIXED, dla_core=0)
    with pytest.raises(InputError, match="--gpu-fallback: only with --dla-core"):
        BuildSettings("fp16", FIXED, gpu_fallback=True)
    with pytest.raises(InputError, match="DLA core index >= 0"):
        BuildSettings("fp16", FIXED, dla_core=-1)


def test_dynamic_or_oversized_profile_is_refused(full_model_dir: Path) -> None:
    trt = make_fake_tensorrt("10.3.0.30", dla_cores=2)
    with pytest.raises(InputError, match=r"profile must be fixed .* got 1,64,512; pass --profile 64,64,64"):
        build_serialized(trt, full_model_dir / "stage1.fp16.onnx", BuildSettings("fp16", dla_core=0))
    with pytest.raises(InputError, match="pass --profile 4096,4096,4096"):
        BuildSettings("fp16", Profile(8192, 8192, 8192), dla_core=0).check_dla_profile()
    assert trt.calls == []  # nothing touched TensorRT


@pytest.mark.parametrize(
    ("cores", "error", "needle"),
    [
        (2, InputError, r"--dla-core 2: this device has 2 DLA cores \(0..1\)"),
        (0, DeviceUnavailableError, "this device has no DLA"),
    ],
)
def test_core_out_of_range_is_refused_before_parsing(cores, error, needle, full_model_dir: Path) -> None:
    trt = make_fake_tensorrt("10.3.0.30", dla_cores=cores)
    with pytest.raises(error, match=needle):
        build_serialized(trt, full_model_dir / "stage1.fp16.onnx", BuildSettings("fp16", FIXED, dla_core=2))
    assert trt.calls == [("ILogger.__init__",), ("Builder.__init__", True), ("Builder.num_DLA_cores",)]


def _dla_folder(model_dir: Path, precision: str = "int8", core: int = 0, fallback: bool = True) -> list:
    trt = make_fake_tensorrt("10.3.0.30", dla_cores=2)
    settings = BuildSettings(precision, FIXED, dla_core=core, gpu_fallback=fallback)
    return build_model_folder(model_dir, settings, trt=trt, memory=FakeCudaMemory())


def test_engine_folder_and_manifest_record_the_dla_core(full_model_dir: Path) -> None:
    built = _dla_folder(full_model_dir)
    folder = full_model_dir / "engines" / "orin-sm87-trt10.3.0-dla0"
    assert [b.engine for b in built] == [folder / "stage1.int8.engine", folder / "stage2.int8.engine"]
    for b in built:
        m = EngineManifest.read(b.engine)
        assert (m.dla_core, m.gpu_fallback) == (0, True)
        assert m.build["builder_flags"] == ["INT8", "FP16", "GPU_FALLBACK"]
        assert m.rebuild_command(full_model_dir).endswith(
            "--precision int8 --profile 32,32,32 --workspace 256 --dla-core 0 --gpu-fallback"
        )
    roles = {
        f["name"]: f["role"] for f in json.loads((full_model_dir / "manifest.json").read_text())["files"]
    }
    assert roles["engines/orin-sm87-trt10.3.0-dla0/stage1.int8.engine"] == "engine"
    gpu = build_model_folder(
        full_model_dir,
        BuildSettings("int8", FIXED),
        trt=make_fake_tensorrt("10.3.0.30"),
        memory=FakeCudaMemory(),
    )
    assert gpu[0].engine.parent.name == "orin-sm87-trt10.3.0" and gpu[0].manifest.dla_core is None


def _backend(onnx: Path, memory: FakeCudaMemory, **opts) -> TensorRTBackend:
    trt = make_fake_tensorrt("10.3.0.30", memory=memory, dla_cores=2)
    backend = TensorRTBackend(load_model(onnx), TensorRTOptions(**opts), trt=trt, memory=memory)
    backend.trt_calls = trt.calls  # type: ignore[attr-defined]
    return backend


def test_runtime_sets_the_dla_core_before_deserialising(full_model_dir: Path) -> None:
    _dla_folder(full_model_dir, "fp16")
    memory = FakeCudaMemory()
    onnx = full_model_dir / "stage1.fp16.onnx"
    x = np.random.default_rng(1).normal(size=(5, F1)).astype(np.float32)
    with _backend(onnx, memory, dla_core=0) as backend:
        assert backend.engine_path.parent.name == "orin-sm87-trt10.3.0-dla0"
        got = backend.infer(x)
        names = [c[0] for c in backend.trt_calls]
    assert names.index("Runtime.DLA_core=") < names.index("Runtime.deserialize_cuda_engine")
    assert ("Runtime.DLA_core=", 0) in backend.trt_calls
    shapes = [c[2] for c in backend.trt_calls if c[0] == "IExecutionContext.set_input_shape"]
    assert shapes == [(32, F1)]  # 5 pairs zero-padded to the fixed DLA profile
    ref = onnxruntime.InferenceSession(str(onnx), providers=["CPUExecutionProvider"]).run(
        ["logits"], {"features": x}
    )[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("built_core", "asked", "needle", "rebuild"),
    [
        (0, 1, "built for DLA core 0, requested for DLA core 1", "--dla-core 1 --gpu-fallback"),
        (0, None, "built for DLA core 0, requested for the GPU", "--workspace 256"),
        (None, 0, "built for the GPU, requested for DLA core 0", "--dla-core 0"),
    ],
)
def test_manifest_dla_core_mismatch_is_refused(
    built_core, asked, needle, rebuild, full_model_dir: Path
) -> None:
    if built_core is None:
        trt = make_fake_tensorrt("10.3.0.30", dla_cores=2)
        built = build_model_folder(
            full_model_dir, BuildSettings("fp16", FIXED), trt=trt, memory=FakeCudaMemory()
        )
    else:
        built = _dla_folder(full_model_dir, "fp16", built_core)
    memory = FakeCudaMemory()
    backend = _backend(
        full_model_dir / "stage1.fp16.onnx", memory, engine=str(built[0].engine), dla_core=asked
    )
    with pytest.raises(EngineMismatchError, match=needle) as info:
        backend.activate()
    message = str(info.value)
    assert message.rstrip().endswith(rebuild) and "\n" not in message
    assert not [c for c in backend.trt_calls if c[0] == "Runtime.deserialize_cuda_engine"]


def test_missing_dla_engine_names_the_dla_build(full_model_dir: Path) -> None:
    with pytest.raises(
        Exception, match=r"DLA core 1\); build it here with: pairedge build .* --precision fp16 --dla-core 1"
    ):
        _backend(full_model_dir / "stage1.fp16.onnx", FakeCudaMemory(), dla_core=1).activate()


def test_manifest_without_dla_fields_reads_as_gpu(full_model_dir: Path) -> None:
    built = build_model_folder(
        full_model_dir,
        BuildSettings("fp16", FIXED),
        trt=make_fake_tensorrt("10.3.0.30"),
        memory=FakeCudaMemory(),
    )
    path = manifest_path(built[0].engine)
    data = json.loads(path.read_text())
    del data["dla_core"], data["gpu_fallback"]
    path.write_text(json.dumps(data))
    assert EngineManifest.read(built[0].engine).dla_core is None
    data["dla_core"] = "0"
    path.write_text(json.dumps(data))
    with pytest.raises(Exception, match="'dla_core': expected a DLA core index or null"):
        EngineManifest.read(built[0].engine)


def test_cli_build_dla(full_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pairedge.apps.cli import app
    from pairedge.runtime.backends import cudamem
    from typer.testing import CliRunner

    monkeypatch.setitem(sys.modules, "tensorrt", make_fake_tensorrt("10.3.0.30", dla_cores=2))
    monkeypatch.setattr(cudamem, "open_cuda_memory", lambda kind="auto", device=0: FakeCudaMemory())
    args = ["build", str(full_model_dir), "--precision", "fp16", "--dla-core", "0", "--gpu-fallback"]
    result = CliRunner().invoke(app, [*args, "--profile", "16,16,16"])
    assert result.exit_code == 0, result.output
    assert "DLA core 0 + GPU fallback" in result.output
    assert (full_model_dir / "engines" / "orin-sm87-trt10.3.0-dla0" / "stage2.fp16.engine").is_file()
    refused = CliRunner().invoke(app, args)  # the default dynamic profile 1,64,512
    assert refused.exit_code != 0 and "--profile 64,64,64" in refused.output
    fp32 = CliRunner().invoke(app, ["build", str(full_model_dir), "--dla-core", "0", "--profile", "8,8,8"])
    assert fp32.exit_code != 0 and "not fp32" in fp32.output


def test_pipeline_runs_both_stages_on_the_dla(full_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``PipelineConfig(backend_options=TensorRTOptions(dla_core=0))`` with backend "tensorrt": both stages'
    DLA engines from ``engines/<tag>-dla0/``, the core set on each runtime before deserialising."""
    from pairedge.runtime import Pipeline, PipelineConfig
    from pairedge.runtime.backends import cudamem

    _dla_folder(full_model_dir, "fp16")
    memory = FakeCudaMemory()
    fake = make_fake_tensorrt("10.3.0.30", memory=memory, dla_cores=2)
    monkeypatch.setitem(sys.modules, "tensorrt", fake)
    monkeypatch.setattr(cudamem, "open_cuda_memory", lambda kind="auto", device=0: memory)
    monkeypatch.setattr(
        "pairedge.runtime.backends.tensorrt.open_cuda_memory", lambda kind="auto", device=0: memory
    )
    monkeypatch.setattr(TensorRTBackend, "unavailable_reason", classmethod(lambda cls: None))
    config = PipelineConfig(backend_options=TensorRTOptions(dla_core=0))
    pipeline = Pipeline.load(full_model_dir, "tensorrt", "none", config, precision="fp16")
    try:
        names = [c[0] for c in fake.calls if c[0] in ("Runtime.DLA_core=", "Runtime.deserialize_cuda_engine")]
        assert names == ["Runtime.DLA_core=", "Runtime.deserialize_cuda_engine"] * 2
        assert ("Runtime.DLA_core=", 0) in fake.calls
        described = pipeline.describe()
        assert (described["stage1"], described["stage2"]) == (
            "TensorRTBackend(stage1.fp16.engine)",
            "TensorRTBackend(stage2.fp16.engine)",
        )
    finally:
        pipeline.close()


def test_deployment_dla_core_needs_the_tensorrt_backend() -> None:
    """The deployment owns the DLA core and hands it to the tensorrt backend's options; the pipeline hands
    the precision of the files it opened (the engines are found by both); another backend refuses a DLA
    core."""
    from pairedge.runtime.config import PipelineConfig
    from pairedge.runtime.deployment import Deployment

    config = Deployment(backend="tensorrt", dla_core=1, precision="fp16").config()
    assert config.backend_options == TensorRTOptions(dla_core=1)
    assert Deployment(backend="tensorrt").config().backend_options is None
    given = PipelineConfig(backend_options=TensorRTOptions(device_id=1))
    assert Deployment(backend="tensorrt", dla_core=0).config(given).backend_options == TensorRTOptions(
        device_id=1, dla_core=0
    )
    assert TensorRTOptions.with_precision(None, "int8") == TensorRTOptions(precision="int8")
    with pytest.raises(InputError, match="contradicts the model files' precision 'fp16'"):
        TensorRTOptions.with_precision(TensorRTOptions(precision="int8"), "fp16")
    with pytest.raises(InputError, match="contradicts the deployment's dla_core"):
        Deployment(backend="tensorrt", dla_core=0).config(
            PipelineConfig(backend_options=TensorRTOptions(dla_core=1))
        )
    with pytest.raises(InputError, match="dla_core: needs backend tensorrt"):
        Deployment(backend="onnxruntime", dla_core=0)
    assert Deployment().config().backend_options is None


def test_cli_run_on_dla_engines(
    full_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pairedge build --dla-core 0`` then ``pairedge run --backend tensorrt --dla-core 0``: the run loads
    the dla0 engines (Runtime.DLA_core set); without --backend tensorrt --dla-core is refused in one line."""
    import cv2
    from pairedge.apps.cli import app
    from pairedge.runtime.backends import cudamem
    from typer.testing import CliRunner

    memory = FakeCudaMemory()
    trt = make_fake_tensorrt("10.3.0.30", memory=memory, dla_cores=2)
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    monkeypatch.setattr(cudamem, "open_cuda_memory", lambda kind="auto", device=0: memory)
    monkeypatch.setattr(
        "pairedge.runtime.backends.tensorrt.open_cuda_memory", lambda kind="auto", device=0: memory
    )
    monkeypatch.setattr(TensorRTBackend, "unavailable_reason", classmethod(lambda cls: None))
    runner = CliRunner()
    built = runner.invoke(
        app,
        [
            "build",
            str(full_model_dir),
            "--precision",
            "fp16",
            "--dla-core",
            "0",
            "--gpu-fallback",
            "--profile",
            "16,16,16",
        ],
    )
    assert built.exit_code == 0, built.output
    frames = tmp_path / "frames"
    frames.mkdir()
    pixels = np.random.default_rng(0).integers(0, 255, (4, 120, 160, 3), dtype=np.uint8)
    for k, image in enumerate(pixels):
        cv2.imwrite(str(frames / f"{k:06d}.png"), image)
    det = tmp_path / "det.txt"
    det.write_text(
        "".join(f"{f},{i},{10 + 40 * i},30,20,50,1,-1,-1,-1\n" for f in range(1, 5) for i in (1, 2, 3))
    )
    args = [
        "run",
        str(frames),
        "--detections",
        str(det),
        "--model",
        str(full_model_dir),
        "--precision",
        "fp16",
        "--no-video",
        "--out",
        str(tmp_path / "out"),
    ]
    ran = runner.invoke(app, [*args, "--backend", "tensorrt", "--dla-core", "0"])
    assert ran.exit_code == 0, ran.output
    assert len((tmp_path / "out" / "results.jsonl").read_text().splitlines()) == 5  # header + 4 frames
    loaded = [c for c in trt.calls if c[0] in ("Runtime.DLA_core=", "Runtime.deserialize_cuda_engine")]
    # twice at build (the engine read back, :mod:`layer_info`), twice at run
    assert [c[0] for c in loaded] == ["Runtime.DLA_core=", "Runtime.deserialize_cuda_engine"] * 4
    assert ("Runtime.DLA_core=", 0) in trt.calls
    refused = runner.invoke(app, [*args, "--backend", "onnxruntime", "--dla-core", "0"])
    lines = refused.stderr.splitlines()
    assert refused.exit_code == 1 and len(lines) == 1 and "dla_core: needs backend tensorrt" in lines[0]
