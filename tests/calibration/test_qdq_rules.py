"""check_qdq_rules: passes the calibrated models, names every TensorRT rule a broken model violates."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from cal_data import model_dir, scene_samples
from onnx import TensorProto, helper, numpy_helper
from pairedge.calibration.qdq_rules import check_qdq_rules
from pairedge.calibration.quantize import QuantConfig, preprocess, quantize


@pytest.fixture(scope="module")
def qdq_models() -> dict[int, onnx.ModelProto]:
    samples = scene_samples()
    out = {}
    for stage, st in ((1, samples.stage1), (2, samples.stage2)):
        pre = preprocess(onnx.load(str(model_dir() / f"stage{stage}.onnx")))
        out[stage] = quantize(pre, st.X, QuantConfig(method="percentile"))
    return out


@pytest.mark.parametrize("stage", [1, 2])
def test_calibrated_models_pass(qdq_models: dict[int, onnx.ModelProto], stage: int) -> None:
    model = qdq_models[stage]
    assert check_qdq_rules(model) == []
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("QuantizeLinear") > 0 and ops.count("DequantizeLinear") > 0
    producer = {o: n for n in model.graph.node for o in n.output}
    assert producer["logits"].op_type == "Gemm"  # the logits stay float: no Q/DQ round trip on the output


def _gemm_model(
    *,
    zp_type: int = TensorProto.INT8,
    zp_value: int = 0,
    axis: int = 0,
    quantize_bias: bool = False,
    dangling: bool = False,
) -> onnx.ModelProto:
    """x (N,4) -> Q/DQ -> Gemm(W int8 per-channel, transB=1) -> y (N,3): a minimal QDQ model to break."""
    rng = np.random.default_rng(0)
    w = rng.integers(-100, 100, size=(3, 4)).astype(np.int8)
    zp_dtype = np.int8 if zp_type == TensorProto.INT8 else np.uint8
    inits = [
        numpy_helper.from_array(w, "w_q"),
        numpy_helper.from_array(np.full(3 if axis == 0 else 4, 0.01, np.float32), "w_scale"),
        numpy_helper.from_array(np.zeros(3 if axis == 0 else 4, np.int8), "w_zp"),
        numpy_helper.from_array(np.array(0.05, np.float32), "x_scale"),
        numpy_helper.from_array(np.array(zp_value, zp_dtype), "x_zp"),
        numpy_helper.from_array(np.zeros(3, np.float32), "b"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"], name="q_x"),
        helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zp"], ["xdq"], name="dq_x"),
        helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["w"], name="dq_w", axis=axis),
    ]
    bias = "b"
    if quantize_bias:
        inits += [
            numpy_helper.from_array(np.zeros(3, np.int32), "b_q"),
            numpy_helper.from_array(np.full(3, 0.001, np.float32), "b_scale"),
            numpy_helper.from_array(np.zeros(3, np.int32), "b_zp"),
        ]
        nodes.append(
            helper.make_node("DequantizeLinear", ["b_q", "b_scale", "b_zp"], ["b_dq"], name="dq_b", axis=0)
        )
        bias = "b_dq"
    if dangling:
        nodes.append(
            helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["unused"], name="q_dangling")
        )
    nodes.append(helper.make_node("Gemm", ["xdq", "w", bias], ["y"], name="gemm", transB=1))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _rules(model: onnx.ModelProto) -> set[str]:
    return {issue.rule for issue in check_qdq_rules(model)}


def test_minimal_model_passes() -> None:
    assert check_qdq_rules(_gemm_model()) == []


@pytest.mark.parametrize(
    ("kwargs", "rule"),
    [
        ({"zp_type": TensorProto.UINT8}, "int8"),
        ({"zp_value": 3}, "zero-point"),
        ({"axis": 1}, "per-channel-axis"),
        ({"quantize_bias": True}, "bias"),
        ({"dangling": True}, "dangling"),
    ],
)
def test_each_violation_is_named(kwargs: dict[str, object], rule: str) -> None:
    issues = check_qdq_rules(_gemm_model(**kwargs))  # type: ignore[arg-type]
    assert rule in {i.rule for i in issues}, issues
    assert all(i.node and i.message for i in issues)
