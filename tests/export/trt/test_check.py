"""``pairedge check`` on ONNX files built here with each class of problem, and on the bundled model."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from pairedge.apps.cli import app
from pairedge.export.tensorrt.check import check_model
from typer.testing import CliRunner

F, C = 4, 3


def _save(
    tmp: Path,
    nodes,
    inits=(),
    *,
    opset=17,
    in_type=TensorProto.FLOAT,
    in_shape=("pairs", F),
    out_type=TensorProto.FLOAT,
    extra_inputs=(),
    domains=(),
) -> Path:
    graph = helper.make_graph(
        list(nodes),
        "g",
        [helper.make_tensor_value_info("features", in_type, list(in_shape)), *extra_inputs],
        [helper.make_tensor_value_info("logits", out_type, ["pairs", C])],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits],
    )
    imports = [helper.make_opsetid("", opset), *[helper.make_opsetid(d, 1) for d in domains]]
    model = helper.make_model(graph, opset_imports=imports)
    path = tmp / "m.onnx"
    onnx.save(model, str(path))
    return path


def _gemm(w=None, name="W") -> tuple[list, list]:
    w = np.ones((C, F), np.float32) if w is None else w
    return [helper.make_node("Gemm", ["features", name], ["logits"], transB=1)], [(name, w)]


def _rules(report) -> set[tuple[str, str]]:
    return {(f.severity, f.rule) for f in report.findings}


def test_clean_model_passes(tmp_path: Path) -> None:
    nodes, inits = _gemm()
    assert check_model(_save(tmp_path, nodes, inits)).findings == ()


def test_unsupported_op_and_foreign_domain(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("MatMulInteger", ["features", "W"], ["t"]),
        helper.make_node("FusedGemm", ["t", "W"], ["logits"], domain="com.microsoft"),
    ]
    report = check_model(_save(tmp_path, nodes, [("W", np.ones((F, C), np.int8))], domains=["com.microsoft"]))
    assert {("error", "op"), ("error", "domain")} <= _rules(report) and not report.ok
    assert any("MatMulInteger is not supported" in f.message for f in report.findings)


@pytest.mark.parametrize(
    ("opset", "target", "expected"),
    [
        (8, "tensorrt-10.3", ("error", "opset")),
        (23, "tensorrt-10.3", ("warning", "opset")),
        (23, "tensorrt-11", None),
    ],
)
def test_opset_range(tmp_path: Path, opset: int, target: str, expected) -> None:
    nodes, inits = _gemm()
    report = check_model(_save(tmp_path, nodes, inits, opset=opset), target)
    assert (expected in _rules(report)) if expected else not [f for f in report.findings if f.rule == "opset"]


def test_dtypes(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Cast", ["features"], ["d"], to=TensorProto.DOUBLE),
        helper.make_node("Cast", ["d"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Gemm", ["f", "W"], ["g"], transB=1),
        helper.make_node("Add", ["g", "B"], ["logits"]),
    ]
    inits = [("W", np.ones((C, F), np.float64)), ("B", np.ones((C,), np.int64))]
    report = check_model(_save(tmp_path, nodes, inits, out_type=TensorProto.INT64))
    where = {(f.severity, f.where) for f in report.findings if f.rule == "dtype"}
    assert ("error", "d") in where  # the Cast to double
    assert ("warning", "W") in where and ("warning", "B") in where and ("warning", "logits") in where


def test_double_input_is_an_error(tmp_path: Path) -> None:
    nodes, inits = _gemm()
    report = check_model(_save(tmp_path, nodes, inits, in_type=TensorProto.DOUBLE))
    assert ("error", "dtype") in _rules(report)


def test_dynamic_axes_beyond_the_pair_axis(tmp_path: Path) -> None:
    nodes, inits = _gemm()
    other = helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["pairs", 1])
    report = check_model(_save(tmp_path, nodes, inits, in_shape=("pairs", "width"), extra_inputs=[other]))
    messages = [f.message for f in report.findings if f.rule == "dynamic"]
    assert any("axis 1 is dynamic (width)" in m for m in messages) and any("2 inputs" in m for m in messages)


def _qdq_model(tmp: Path, *, zp=0, zp_type=np.int8, axis=0, bias_dq=False, dangling=False) -> Path:
    w = np.ones((C, F), np.int8)
    scale = np.full((C,), 0.1, np.float32)
    nodes = [
        helper.make_node("QuantizeLinear", ["features", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["Wq", "ws", "wz"], ["Wd"], axis=axis),
    ]
    inits = [
        ("xs", np.float32(0.05)),
        ("xz", np.asarray(zp, zp_type)),
        ("Wq", w),
        ("ws", scale),
        ("wz", np.zeros((C,), np.int8)),
    ]
    gemm_in = ["xd", "Wd"]
    if bias_dq:
        nodes.append(helper.make_node("DequantizeLinear", ["Bq", "bs"], ["Bd"]))
        inits += [("Bq", np.ones((C,), np.int32)), ("bs", np.full((C,), 0.01, np.float32))]
        gemm_in.append("Bd")
    nodes.append(helper.make_node("Gemm", gemm_in, ["g" if dangling else "logits"], transB=1))
    if dangling:
        nodes += [
            helper.make_node("QuantizeLinear", ["g", "xs", "xz"], ["gq"]),
            helper.make_node("Relu", ["gq"], ["logits"]),
        ]
    return _save(tmp, nodes, inits, opset=13)


@pytest.mark.parametrize(
    ("kwargs", "rule"),
    [
        ({"zp": 3}, "qdq-zero-point"),
        ({"zp_type": np.uint8}, "qdq-int8"),
        ({"axis": 1}, "qdq-per-channel-axis"),
        ({"bias_dq": True}, "qdq-bias"),
        ({"dangling": True}, "qdq-dangling"),
    ],
)
def test_qdq_rules(tmp_path: Path, kwargs: dict, rule: str) -> None:
    assert check_model(_qdq_model(tmp_path)).findings == ()
    report = check_model(_qdq_model(tmp_path, **kwargs))
    assert ("error", rule) in _rules(report), report.findings


def test_fp16_range(tmp_path: Path) -> None:
    nodes, inits = _gemm(np.full((C, F), 1e6, np.float32))
    path = _save(tmp_path, nodes, inits)
    assert ("warning", "fp16-range") in _rules(check_model(path))
    tensors = [
        {"tensor": "g", "scale": 1.0, "range": [-128.0, 127.0], "observed_max_abs": 2e5},
        {"tensor": "h", "scale": 0.1, "range": [-12.8, 12.7], "observed_max_abs": 3.0},
    ]
    report_json = {"stages": {"stage1": {"tensors": tensors}, "stage2": {"tensors": [tensors[0]]}}}
    (tmp_path / "calibration.json").write_text(json.dumps(report_json))
    nodes, inits = _gemm()
    path = _save(tmp_path, nodes, inits)
    report = check_model(path)  # not a stage file: every stage's ranges count
    assert [(f.where, f.rule) for f in report.findings] == [
        ("stage1:g", "fp16-range"),
        ("stage2:g", "fp16-range"),
    ]
    stage1 = path.rename(tmp_path / "stage1.onnx")
    assert [f.where for f in check_model(stage1).findings] == ["stage1:g"]


def test_bundled_model_and_its_fp16_int8_pass(full_model_dir: Path) -> None:
    for name in ("stage1", "stage2", "stage1.fp16", "stage2.fp16", "stage1.int8", "stage2.int8"):
        for target in ("tensorrt-10.3", "tensorrt-10.13", "tensorrt-11"):
            report = check_model(full_model_dir / f"{name}.onnx", target)
            assert report.findings == (), (name, target, report.findings)


runner = CliRunner()


def test_cli_check_table_and_exit_codes(full_model_dir: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["check", str(full_model_dir)])
    assert result.exit_code == 0 and result.output.count("no TensorRT readiness problems") == 1
    assert len(re.findall(r"│ stage[12][.a-z0-9]*\.onnx\s*│ tensorrt-10\.3\s*│ ok", result.output)) == 6
    bad = _qdq_model(tmp_path, zp=3)
    result = runner.invoke(app, ["check", str(bad), "--target", "tensorrt-11"])
    assert result.exit_code == 1 and "qdq-zero-point" in result.output
    result = runner.invoke(app, ["check", str(bad), "--target", "tensorrt-9"])
    assert result.exit_code == 1 and "tensorrt-10.3" in result.output
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["check", str(tmp_path / "empty")])
    assert result.exit_code == 1 and "no stage*.onnx files" in result.output


def test_cli_build_without_tensorrt_fails_fast_after_the_check(model_dir: Path) -> None:
    pytest.importorskip("onnx")
    # the module imports without TensorRT
    from pairedge.export.tensorrt.builder import BuildError  # noqa: F401

    result = runner.invoke(app, ["build", str(model_dir), "--precision", "fp32"])
    assert result.exit_code == 1
    out = result.output
    assert re.search(r"stage2\.onnx\s*│\s*tensorrt-10\.3", out), out
    assert out.index("stage2.onnx") < out.index("TensorRT is not installed")
    error_lines = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and "JetPack" in error_lines[0] and "pip install '.[tensorrt]'" in out


def test_cli_build_stops_at_check_errors(model_dir: Path, tmp_path: Path) -> None:
    bad = _qdq_model(tmp_path, zp=3)
    shutil.copy(bad, model_dir / "stage1.int8.onnx")
    shutil.copy(bad, model_dir / "stage2.int8.onnx")
    result = runner.invoke(app, ["build", str(model_dir), "--precision", "int8"])
    assert result.exit_code == 1 and "qdq-zero-point" in result.output
    assert "TensorRT is not installed" not in result.output
    result = runner.invoke(app, ["build", str(model_dir), "--precision", "fp16"])
    assert result.exit_code == 1 and "pairedge calibrate" in result.output
