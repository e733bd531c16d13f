"""The engine read back after a build: which precision every ONNX Gemm runs in (``layer_info``), recorded in
the engine manifest and printed by ``pairedge build``; a Q/DQ Gemm TensorRT did not fuse is named."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fake_tensorrt import FakeCudaMemory, make_fake_tensorrt
from pairedge.apps.cli import app
from pairedge.export.tensorrt.builder import BuildSettings
from pairedge.export.tensorrt.folder import build_model_folder
from pairedge.export.tensorrt.layer_info import (
    gemm_precisions,
    int8_requested,
    int8_summary,
    weighted_node_names,
)
from pairedge.runtime.backends import cudamem
from pairedge.runtime.backends.tensorrt_loader import EngineManifest
from typer.testing import CliRunner

GENERATIONS = ("10.3.0.30", "10.13.0.35", "11.1.0.8")


@pytest.mark.parametrize("version", GENERATIONS)
@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8"])
def test_manifest_records_every_gemm_in_the_built_precision(
    version: str, precision: str, full_model_dir: Path
) -> None:
    built = build_model_folder(
        full_model_dir, BuildSettings(precision), trt=make_fake_tensorrt(version), memory=FakeCudaMemory()
    )
    for b in built:
        onnx = full_model_dir / (
            f"stage{b.stage}.onnx" if precision == "fp32" else f"stage{b.stage}.{precision}.onnx"
        )
        recorded = EngineManifest.read(b.engine).build["gemm_precisions"]
        assert sorted(recorded) == sorted(weighted_node_names(onnx)) and len(recorded) >= 3
        assert set(recorded.values()) == {precision}
        if precision == "int8":  # every Gemm of the Q/DQ graph asks for int8, and gets it
            assert sorted(int8_requested(onnx)) == sorted(recorded)


def test_parser_of_tensorrt_layer_json() -> None:
    """Layer objects as TensorRT 10's inspector writes them (fused names, reformat layers, datatypes)."""
    layers = [
        {
            "Name": "Reformatting CopyNode for Input Tensor 0 to /net/0/Gemm",
            "LayerType": "Reformat",
            "Inputs": [{"Format/Datatype": "Row major linear FP32"}],
        },
        {
            "Name": "/net/0/Gemm + /net/1/Relu",
            "LayerType": "CaskGemmMatrixMultiply",
            "Inputs": [{"Name": "x", "Format/Datatype": "Row major linear Int8 format"}],
        },
        {
            "Name": "/net/2/Gemm",
            "LayerType": "CaskGemmMatrixMultiply",
            "Inputs": [{"Format/Datatype": "Row major linear Half format"}],
        },
        {
            "Name": "/net/4/Gemm",
            "LayerType": "MatrixMultiply",
            "Inputs": [{"Format/Datatype": "N/A due to dynamic shapes"}],
        },
    ]
    got = gemm_precisions(layers, ["/net/0/Gemm", "/net/2/Gemm", "/net/4/Gemm", "/net/6/Gemm"])
    assert got == {
        "/net/0/Gemm": "int8",
        "/net/2/Gemm": "fp16",
        "/net/4/Gemm": "unknown",
        "/net/6/Gemm": "unknown",
    }
    text, missed = int8_summary(got, ["/net/0/Gemm", "/net/2/Gemm"])
    assert text == "1 of 4 Gemms int8" and missed == ["/net/2/Gemm"]
    assert int8_summary({"/a": "unknown"}, ["/a"]) == (
        "Gemm precisions unknown (this TensorRT gave no detailed layer information)",
        [],
    )


def test_without_detailed_verbosity_the_precisions_are_unknown(full_model_dir: Path) -> None:
    trt = make_fake_tensorrt("10.13.0.35")
    del trt.ProfilingVerbosity  # a TensorRT without the setting: the build goes on, nothing is guessed
    built = build_model_folder(full_model_dir, BuildSettings("int8"), trt=trt, memory=FakeCudaMemory())
    assert all(
        b.output.gemm_precisions and set(b.output.gemm_precisions.values()) == {"unknown"} for b in built
    )
    assert not [c for c in trt.calls if c[0] == "ICudaEngine.create_engine_inspector"]


def _cli(monkeypatch: pytest.MonkeyPatch, trt, model_dir: Path) -> object:
    memory = FakeCudaMemory()
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    monkeypatch.setattr(cudamem, "open_cuda_memory", lambda kind="auto", device=0: memory)
    return CliRunner().invoke(app, ["build", str(model_dir), "--precision", "int8"])


def test_cli_build_says_every_gemm_runs_int8(monkeypatch: pytest.MonkeyPatch, full_model_dir: Path) -> None:
    result = _cli(monkeypatch, make_fake_tensorrt("10.13.0.35"), full_model_dir)
    assert result.exit_code == 0, result.output
    counts = [len(weighted_node_names(full_model_dir / f"stage{s}.int8.onnx")) for s in (1, 2)]
    for n in counts:
        assert f"{n} of {n} Gemms int8" in result.output
    assert "warning" not in result.output


def test_cli_build_names_a_quantized_gemm_that_runs_fp16(
    monkeypatch: pytest.MonkeyPatch, full_model_dir: Path
) -> None:
    first = weighted_node_names(full_model_dir / "stage1.int8.onnx")[0]
    trt = make_fake_tensorrt("10.13.0.35", int8_refused=frozenset({first}))
    result = _cli(monkeypatch, trt, full_model_dir)
    assert result.exit_code == 0, result.output
    assert "warning:" in result.output and first in result.output and "did not fuse" in result.output
