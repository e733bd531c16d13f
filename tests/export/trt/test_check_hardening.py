"""`pairedge check`, engines and timing caches on hostile inputs: graphs onnx.checker rejects, FIFOs and
/dev/zero (refused by name, never opened), external data that leaves the folder, and the 80-column table."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from pairedge.apps.cli import app
from pairedge.core.errors import FormatError, ModelError
from pairedge.export.tensorrt.check import check_model
from typer.testing import CliRunner

runner = CliRunner()
F, C = 4, 3


def _model(
    tmp: Path, nodes: list, inits: list | None = None, name: str = "m.onnx", ir: int | None = None
) -> Path:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["pairs", F])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["pairs", C])],
        inits or [],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    if ir is not None:
        model.ir_version = ir
    path = tmp / name
    path.write_bytes(model.SerializeToString())  # onnx.save would refuse nothing either: no checker here
    return path


def _gemm(tmp: Path, **kw: object) -> Path:
    w = numpy_helper.from_array(np.ones((C, F), np.float32), "W")
    gemm = helper.make_node("Gemm", ["features", "W"], ["logits"], transB=1)
    return _model(tmp, [gemm], [w], **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (
            lambda t: _model(t, [helper.make_node("Gemm", ["features"], ["logits"])]),
            "input size 1 not in range",
        ),
        (lambda t: _gemm(t, ir=10**6), "ir_version 1000000 is higher"),
    ],
)
def test_graphs_onnx_checker_rejects_are_an_error_row(tmp_path: Path, make: Any, match: str) -> None:
    path = make(tmp_path)
    report = check_model(path)
    assert not report.ok and report.findings[0].rule == "onnx-checker"
    assert re.search(match, report.findings[0].message)
    res = runner.invoke(app, ["check", str(path)])
    assert res.exit_code == 1 and "onnx-checker" in res.output and "1 error" in res.output
    assert "no TensorRT readiness problems" not in res.output


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder-named-onnx"])
def test_non_regular_inputs_are_one_line(tmp_path: Path, kind: str, bounded: None, non_regular) -> None:
    path = non_regular(tmp_path / "stage1.onnx", "folder" if kind == "folder-named-onnx" else kind)
    if kind == "folder-named-onnx":
        (path / "x").write_text("")
    with pytest.raises(FormatError, match="not a regular file"):
        check_model(path)
    res = runner.invoke(app, ["check", str(path)])
    expected = "no stage*.onnx files in this folder" if kind.startswith("folder") else "not a regular file"
    assert res.exit_code == 1 and expected in res.output
    assert [ln for ln in res.output.splitlines() if ln.startswith("error:")] == res.output.splitlines()


def test_a_fifo_in_a_model_folder_is_one_line(tmp_path: Path, bounded: None) -> None:
    _gemm(tmp_path, name="stage1.onnx")
    os.mkfifo(tmp_path / "stage2.onnx")
    res = runner.invoke(app, ["check", str(tmp_path)])
    assert res.exit_code == 1 and "FIFO" in res.output and "stage2.onnx" in res.output


def test_external_data_leaving_the_folder_or_a_device_is_refused(tmp_path: Path, bounded: None) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    path = _gemm(folder)
    model = onnx.load(str(path))
    onnx.save_model(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="w.data",
        size_threshold=0,
    )
    assert check_model(path).ok  # inside the folder: read and checked
    (folder / "w.data").rename(tmp_path / "w.data")
    (folder / "w.data").symlink_to(tmp_path / "w.data")
    with pytest.raises(ModelError, match="outside the model folder"):
        check_model(path)
    (folder / "w.data").unlink()
    os.mkfifo(folder / "w.data")
    with pytest.raises(ModelError, match="FIFO"):
        check_model(path)


def test_a_calibration_report_that_is_a_fifo_is_a_warning_not_a_hang(tmp_path: Path, bounded: None) -> None:
    path = _gemm(tmp_path)
    os.mkfifo(tmp_path / "calibration.json")
    report = check_model(path)
    assert report.ok and [f.rule for f in report.findings] == ["fp16-range"]
    assert "FIFO" in report.findings[0].message


def test_malformed_calibration_report_does_not_crash(tmp_path: Path) -> None:
    path = _gemm(tmp_path)
    (tmp_path / "calibration.json").write_text(
        '{"stages": {"stage1": {"tensors": ["x", {"range": 3}, {"tensor": "t", "observed_max_abs": 1e400}]}}}'
    )
    report = check_model(path)
    assert [(f.rule, f.where) for f in report.findings] == [("fp16-range", "stage1:t")]


def test_table_fits_80_columns_with_details_below(tmp_path: Path) -> None:
    bad = _model(
        tmp_path, [helper.make_node("Gemm", ["features"], ["logits"])], name="stage1.a-rather-long-name.onnx"
    )
    good = _gemm(tmp_path, name="stage2.onnx")
    res = runner.invoke(app, ["check", str(bad), str(good), "--target", "tensorrt-10.13"])
    assert res.exit_code == 1
    lines = res.output.splitlines()
    assert all(len(ln) <= 80 for ln in lines), [ln for ln in lines if len(ln) > 80]
    rows = [ln for ln in lines if ln.startswith("│")]
    assert len(rows) == 2 and all(ln.count("│") == 5 for ln in rows)  # one line per file
    assert re.search(r"stage2\.onnx\s*│\s*tensorrt-10\.13\s*│\s*ok", res.output)
    details = [ln for ln in lines if ln.startswith("stage1.a-rather-long-name.onnx: error onnx-checker")]
    assert len(details) == 1


# -- engines and timing caches -----------------------------------------------------------------------------
def test_engine_readers_refuse_devices_and_fifos(tmp_path: Path, bounded: None) -> None:
    from pairedge.runtime.backends.tensorrt_loader import (
        EngineFileError,
        EngineManifest,
        read_verified_engine,
    )

    engine = tmp_path / "stage1.fp16.engine"
    os.mkfifo(tmp_path / "stage1.fp16.engine.json")
    with pytest.raises(EngineFileError, match="FIFO"):
        EngineManifest.read(engine)
    (tmp_path / "stage1.fp16.engine.json").unlink()
    engine.symlink_to("/dev/zero")

    class Manifest:  # only what read_verified_engine reads
        engine = {"size": 1 << 20, "sha256": "0" * 64}

    with pytest.raises(EngineFileError, match="character device"):
        read_verified_engine(engine, Manifest())  # type: ignore[arg-type]


def test_timing_cache_that_is_a_fifo_is_refused(tmp_path: Path, bounded: None) -> None:
    from pairedge.export.tensorrt.timing_cache import attach_timing_cache

    cache = tmp_path / "trt.cache"
    os.mkfifo(cache)

    class Config:
        def create_timing_cache(self, data: bytes) -> object:
            raise AssertionError("never reached")

    with pytest.raises(FormatError, match="FIFO"):
        attach_timing_cache(Config(), cache)


def test_default_names_the_bundled_model() -> None:
    from pairedge.apps.cli import app
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["check", "default"])
    assert result.exit_code == 0, result.output
    assert "stage1.onnx" in result.output and "stage2.onnx" in result.output


def test_build_never_writes_into_the_installed_package(tmp_path) -> None:
    """The bundled model (or any folder inside the package) is refused before any check or build."""
    from pairedge.apps.cli import app
    from pairedge.core.bundled import default_model_dir
    from typer.testing import CliRunner

    for args in (
        ["build", "default"],
        ["build", str(default_model_dir())],
        ["build", str(tmp_path), "--out", str(default_model_dir() / "engines")],
    ):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 1 and "inside the installed pairedge package" in result.output, args
    assert not (default_model_dir() / "engines").exists()
