"""The QDQ graph calibrate writes: int8 arithmetic as ONNX Runtime runs it, exact rewrites (offset, shifted
copies, folded bias), finer weights from the copies, headroom, shared weights, and TensorRT's Q/DQ rules."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from cal_data import model_dir, scene_samples
from onnx import TensorProto, helper, numpy_helper
from pairedge.calibration.infer import logits, session
from pairedge.calibration.qdq_graph import LayerPlan, qdq_graph, quantize_weight, quantize_weight_copies
from pairedge.calibration.qdq_rules import check_qdq_rules
from pairedge.calibration.quantize import QuantConfig, preprocess, quantize
from pairedge.calibration.ranges import layer_plans, reads_features
from pairedge.core.errors import InputError, ModelError

RNG = np.random.default_rng(0)
W1, B1 = RNG.normal(size=(16, 6)).astype(np.float32), RNG.normal(size=16).astype(np.float32)
W2, B2 = RNG.normal(size=(3, 16)).astype(np.float32) / 4, RNG.normal(size=3).astype(np.float32)


def _mlp(matmul: bool = False) -> onnx.ModelProto:
    """features (N, 6) -> Gemm -> Relu -> Gemm (or MatMul with a (K, C) weight) -> logits (N, 3)."""
    inits = [numpy_helper.from_array(W1, "w1"), numpy_helper.from_array(B1, "b1")]
    nodes = [helper.make_node("Gemm", ["features", "w1", "b1"], ["h"], name="g1", transB=1),
             helper.make_node("Relu", ["h"], ["r"], name="relu")]  # fmt: skip
    if matmul:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(W2.T), "w2"))
        nodes.append(helper.make_node("MatMul", ["r", "w2"], ["logits"], name="m2"))
    else:
        inits += [numpy_helper.from_array(W2, "w2"), numpy_helper.from_array(B2, "b2")]
        nodes.append(helper.make_node("Gemm", ["r", "w2", "b2"], ["logits"], name="g2", transB=1))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["n", 6])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 3])], inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _emulate(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, plan: LayerPlan) -> np.ndarray:
    """What the Q/DQ layer computes, in numpy: shifted copies rounded half to even and saturated, times the
    dequantized int8 weight, plus the bias with the rewrite folded in."""
    q, scales = quantize_weight_copies(w.astype(np.float64), plan.copies)
    wq = q.astype(np.float64) * scales[:, None]
    shifts = np.repeat(np.asarray(plan.shifts), x.shape[1])
    copies = np.concatenate([x + np.float32(s) for s in plan.shifts], axis=1).astype(np.float32)
    xq = np.clip(np.rint(copies / np.float32(plan.scale)), -128, 127) * np.float32(plan.scale)
    return xq @ wq.T + (0 if b is None else b) - wq @ shifts


@pytest.mark.parametrize("matmul", [False, True])
@pytest.mark.parametrize("copies, offset", [(1, False), (4, True), (7, False)])
def test_the_graph_computes_the_int8_arithmetic(matmul: bool, copies: int, offset: bool) -> None:
    x = RNG.normal(size=(200, 6)).astype(np.float32)
    p1, p2 = LayerPlan(3.0, False, copies), LayerPlan(4.0, offset, copies)
    q = qdq_graph(_mlp(matmul), {"w1": p1, "w2": p2})
    assert check_qdq_rules(q) == []
    h = np.maximum(_emulate(x, W1, B1, p1), 0).astype(np.float32)
    want = _emulate(h, W2, None if matmul else B2, p2)
    diff = np.abs(logits(session(q), x) - want).max(axis=1)
    # float32 vs float64 hidden values: a value on a rounding tie may land one int8 step apart in a few rows
    assert (diff < 2e-4).mean() > 0.95
    assert diff.max() < 3 * np.abs(W2).max() * p2.scale / copies + 2e-4


def test_rewrites_are_exact_before_rounding() -> None:
    plan = LayerPlan(2.0, offset=True, copies=5)
    shifts = np.asarray(plan.shifts)
    assert shifts[0] < -0.9 and np.allclose(shifts - shifts.mean(), (np.arange(5) - 2) * plan.scale / 5, atol=1e-7)
    assert plan.scale == pytest.approx(2.0 / 254)  # [0, amax] on 254 steps
    assert np.rint((0.0 + shifts.mean()) / plan.scale) == -127  # zero stays exact
    q, scales = quantize_weight_copies(W1.astype(np.float64), 5)
    wq = q.astype(np.float64) * scales[:, None]
    x = RNG.uniform(0, 2, size=(50, 6))
    plain = (x @ wq.reshape(16, 5, 6).sum(axis=1).T)
    rewritten = np.concatenate([x + s for s in shifts], axis=1) @ wq.T - wq @ np.repeat(shifts, 6)
    np.testing.assert_allclose(rewritten, plain, atol=1e-9)  # the folded bias undoes the shifts exactly


def test_copies_give_finer_weights_within_int8() -> None:
    w = RNG.normal(size=(32, 40))
    one, s1 = quantize_weight(w)
    err1 = np.abs(one * s1[:, None] - w).max()
    for n in (2, 8, 32):
        q, s = quantize_weight_copies(w, n)
        assert q.dtype == np.int8 and q.shape == (32, 40 * n) and np.abs(q.astype(int)).max() <= 127
        total = (q.astype(np.float64) * s[:, None]).reshape(32, n, 40).sum(axis=1)
        assert np.abs(total - w).max() <= err1 / n * 1.0001  # the blocks add up to a grid n times finer
    np.testing.assert_array_equal(quantize_weight_copies(w, 1)[0], one)


def test_copies_shrink_the_error_and_headroom_covers_rows_beyond_the_calibration_set() -> None:
    model = _mlp()
    cal = RNG.normal(size=(500, 6)).astype(np.float32)
    test = RNG.normal(size=(500, 6)).astype(np.float32)
    ref = logits(session(model), test)

    def error(X: np.ndarray, stat: Any, **kw: Any) -> float:
        q = quantize(model, cal, QuantConfig(**kw))
        return float(stat(np.abs(logits(session(q), X) - logits(session(model), X))))

    plain = dict(input_copies=1, hidden_copies=1, input_headroom=1.0, hidden_headroom=1.0)
    finer = error(test, np.mean, **{**plain, "input_copies": 16, "hidden_copies": 16})
    assert finer < error(test, np.mean, **plain) / 4
    far = test * 3.0  # rows up to three times beyond anything calibrated
    wide = {**plain, "input_headroom": 4.0, "hidden_headroom": 4.0, "input_copies": 8, "hidden_copies": 8}
    assert error(far, np.max, **wide) < error(far, np.max, **plain) / 4
    assert np.isfinite(ref).all()


def test_plans_offset_first_layers_and_headroom() -> None:
    model = _mlp()
    cal = RNG.normal(size=(300, 6)).astype(np.float32)
    config = QuantConfig(input_copies=8, hidden_copies=2, input_headroom=3.0, hidden_headroom=2.0)
    plans = layer_plans(model, cal, config)
    assert plans["w1"].copies == 8 and not plans["w1"].offset  # reads the features, which go negative
    assert plans["w1"].amax == pytest.approx(3.0 * np.abs(cal).max(), rel=1e-5)
    assert plans["w2"].copies == 2 and plans["w2"].offset  # a ReLU's output
    assert reads_features(model, "features") and not reads_features(model, "r")


def test_shared_weights_get_one_plan_and_exclusions_stay_float() -> None:
    pre = preprocess(onnx.load(str(model_dir() / "stage2.onnx")))
    X = scene_samples().stage2.X
    gemms = [n for n in pre.graph.node if n.op_type == "Gemm" and n.input[1] == "person.0.weight"]
    assert len(gemms) == 2  # the person encoder sees A and B
    plans = layer_plans(pre, X, QuantConfig())
    q = qdq_graph(pre, plans)
    assert sum(t.name == "person.0.weight_quantized" for t in q.graph.initializer) == 1
    assert check_qdq_rules(q) == []
    partly = qdq_graph(pre, plans, exclude=(gemms[1].name,))
    by_name = {n.name: n for n in partly.graph.node}
    assert by_name[gemms[1].name].input[1] == "person.0.weight"  # the excluded one reads the float weight
    assert by_name[gemms[0].name].input[1] == "person.0.weight_dequantized"
    a, b = logits(session(pre), X), logits(session(partly), X)
    assert float(np.abs(a - b).max()) < 1.0


def test_bundled_model_every_gemm_int8_close_to_fp32() -> None:
    for stage, st in ((1, scene_samples().stage1), (2, scene_samples().stage2)):
        pre = preprocess(onnx.load(str(model_dir() / f"stage{stage}.onnx")))
        q = quantize(pre, st.X[::2], QuantConfig())
        dq = {n.output[0] for n in q.graph.node if n.op_type == "DequantizeLinear"}
        gemms = [n for n in q.graph.node if n.op_type == "Gemm"]
        assert gemms and all(g.input[0] in dq and g.input[1] in dq for g in gemms)
        err = np.abs(logits(session(q), st.X[1::2]) - logits(session(pre), st.X[1::2]))
        assert float(np.percentile(err, 99)) < 0.1, stage


def test_bad_plans_and_configs_are_refused() -> None:
    with pytest.raises(ModelError, match="range"):
        LayerPlan(0.0)
    with pytest.raises(ModelError, match="no Gemm"):
        qdq_graph(_mlp(), {"b1": LayerPlan(1.0)})
    with pytest.raises(InputError, match="copies"):
        QuantConfig(input_copies=0)
    with pytest.raises(InputError, match="headroom"):
        QuantConfig(hidden_headroom=0.5)
