"""bench_qat_sweep's two graph/model surgeries: Gemms kept in float in a Q/DQ graph, ReLUs clipped at a
percentile (hand-checked on small cases and on the bundled int8 stage 2), and its bad input."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_qat_sweep import clipped_relus, float_gemms, main  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from pairedge.calibration.infer import logits, session  # noqa: E402
from pairedge.core.bundled import default_model_dir  # noqa: E402
from torch import nn  # noqa: E402

INT8 = default_model_dir() / "stage2.int8.onnx"


def _rows(n: int = 256) -> np.ndarray:
    width = onnx.load(str(INT8)).graph.input[0].type.tensor_type.shape.dim[1].dim_value
    return np.random.default_rng(0).normal(size=(n, width)).astype(np.float32)


def test_no_gemm_in_float_is_the_same_graph() -> None:
    model = onnx.load(str(INT8))
    X = _rows()
    np.testing.assert_array_equal(logits(session(float_gemms(model, set())), X), logits(session(model), X))


def test_a_gemm_in_float_reads_the_float_input_and_the_dequantized_weight() -> None:
    model = onnx.load(str(INT8))
    name = "/head/head.3/Gemm"
    out = float_gemms(model, {name})
    init = {i.name: i for i in out.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    before = next(n for n in model.graph.node if n.name == name)
    after = next(n for n in out.graph.node if n.name == name)
    # the input is the tensor the activation QuantizeLinear read: no Q/DQ in front of the Gemm any more
    assert after.input[0] == producer[producer[before.input[0]].input[0]].input[0]
    # the weight equals what the weight's DequantizeLinear computes (ONNX's reference evaluator)
    wdq = producer[before.input[1]]
    ref = ReferenceEvaluator(
        onnx.helper.make_model(
            onnx.helper.make_graph(
                [wdq],
                "dq",
                [],
                [onnx.helper.make_tensor_value_info(wdq.output[0], onnx.TensorProto.FLOAT, None)],
                [init[i] for i in wdq.input if i in init],
            )
        )
    )
    np.testing.assert_allclose(
        numpy_helper.to_array(init[after.input[1]]), ref.run(None, {})[0], rtol=0, atol=0
    )
    # the other Gemms are untouched, and the graph still runs and differs from the all-int8 one
    assert [n.input[:] for n in out.graph.node if n.name != name] == [
        n.input[:] for n in model.graph.node if n.name != name
    ]
    X = _rows()
    a, b = logits(session(out), X), logits(session(model), X)
    assert np.isfinite(a).all() and not np.array_equal(a, b)


def test_relus_clipped_at_a_percentile_of_their_outputs() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
    X = np.random.default_rng(1).normal(size=(500, 3)).astype(np.float32)
    clipped = clipped_relus(net, X, 90.0)
    assert isinstance(net[1], nn.ReLU)  # the model given is not modified
    hard = clipped[1]
    assert isinstance(hard, nn.Hardtanh) and hard.min_val == 0.0
    with torch.no_grad():
        hidden = torch.relu(net[0](torch.from_numpy(X[::5]))).numpy()
        assert hard.max_val == pytest.approx(float(np.percentile(hidden.ravel(), 90.0)))
        x = torch.from_numpy(X)
        want = net[2](torch.clamp(torch.relu(net[0](x)), max=hard.max_val))
        np.testing.assert_allclose(clipped(x).numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
        seen = torch.from_numpy(X[::5])  # the rows the bounds come from: their maximum clips none of them
        np.testing.assert_allclose(clipped_relus(net, X, 100.0)(seen).numpy(), net(seen).numpy(), atol=1e-6)


def test_bad_variant_count_is_one_line() -> None:
    with pytest.raises(SystemExit, match="--variants: expected 1 to"):
        main(["--variants", "0"])
