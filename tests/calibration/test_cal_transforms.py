"""FP16 conversion, range equalization, equal calibration batches, the mixed-precision search."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from cal_data import model_dir, scene_samples
from onnx import TensorProto, numpy_helper
from pairedge.calibration.equalize import equalize
from pairedge.calibration.fp16 import to_fp16
from pairedge.calibration.infer import agreement, logits, session
from pairedge.calibration.ort_calibrators import ArrayReader
from pairedge.calibration.quantize import (
    QuantConfig,
    compute_nodes,
    preprocess,
    quantize,
    search_exclusions,
    weight_groups,
)
from pairedge.core.errors import InputError


def _stage(stage: int) -> tuple[onnx.ModelProto, np.ndarray]:
    samples = scene_samples()
    st = samples.stage1 if stage == 1 else samples.stage2
    return onnx.load(str(model_dir() / f"stage{stage}.onnx")), st.X


@pytest.mark.parametrize("stage", [1, 2])
def test_fp16_keeps_io_contract_and_agrees(stage: int) -> None:
    fp32, X = _stage(stage)
    fp16 = to_fp16(fp32)
    assert fp16.graph.input[0].name == "features" and fp16.graph.output[0].name == "logits"
    assert fp16.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT
    assert fp16.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT
    weights = [t for t in fp16.graph.initializer if t.name.endswith("weight")]
    assert weights and all(t.data_type == TensorProto.FLOAT16 for t in weights)
    assert {p.key for p in fp32.metadata_props} <= {p.key for p in fp16.metadata_props}
    ref, got = logits(session(fp32), X), logits(session(fp16), X)
    a = agreement(stage, ref, got)
    assert a.agreement >= 0.995 and a.max_abs < 0.1, a
    assert not np.array_equal(ref, got)  # it really computes in half precision


@pytest.mark.parametrize("stage", [1, 2])
def test_equalize_keeps_the_function_and_balances_ranges(stage: int) -> None:
    fp32, X = _stage(stage)
    pre = preprocess(fp32)
    eq, info = equalize(pre, X)
    assert info.producers, "nothing equalized"
    np.testing.assert_allclose(logits(session(eq), X), logits(session(pre), X), atol=2e-3, rtol=1e-4)
    changed = {t.name for t in eq.graph.initializer} & set(info.producers)
    before = {t.name: numpy_helper.to_array(t) for t in pre.graph.initializer}
    after = {t.name: numpy_helper.to_array(t) for t in eq.graph.initializer}
    assert any(not np.allclose(before[n], after[n]) for n in changed)


def test_reader_feeds_equal_batches() -> None:
    X = np.arange(10 * 3, dtype=np.float32).reshape(10, 3)
    reader = ArrayReader(X, batch_rows=4)
    shapes = []
    while (batch := reader.get_next()) is not None:
        shapes.append(batch["features"].shape)
    assert len(set(shapes)) == 1 and sum(s[0] for s in shapes) >= 10
    with pytest.raises(InputError):
        ArrayReader(np.zeros((0, 3), np.float32))


@pytest.mark.parametrize("method", ["minmax", "entropy", "percentile"])
def test_histogram_methods_survive_a_short_last_batch(method: str) -> None:
    fp32, X = _stage(1)
    q = quantize(preprocess(fp32), X[:301], QuantConfig(method=method, batch_rows=100))
    assert agreement(1, logits(session(fp32), X), logits(session(q), X)).agreement > 0.9


def test_search_reaches_the_target_by_keeping_nodes_in_float() -> None:
    fp32, X = _stage(2)
    pre = preprocess(fp32)
    cal, val = X[::2], X[1::2]
    # int8 clipped at the 95th percentile: coarse enough that single nodes change decisions, so the search
    # has nodes to keep in float (the default configuration already agrees on every row here)
    coarse = QuantConfig(method="percentile", percentile=95.0, input_headroom=1.0, hidden_headroom=1.0)
    result = search_exclusions(pre, 2, cal, val, coarse, target=1.0)
    assert result.sensitivity and min(result.sensitivity.values()) < 1.0
    agreements = [s.agreement for s in result.steps]
    assert agreements[-1] >= agreements[0] and len(result.steps) > 1
    # each step keeps one more layer in float: all the Gemms of one weight (a shared encoder) at once
    groups = {g[0]: g for g in weight_groups(pre, compute_nodes(pre, coarse.placement))}
    for before, after in zip(result.steps, result.steps[1:], strict=False):
        added = after.excluded[len(before.excluded) :]
        assert after.excluded[: len(before.excluded)] == before.excluded and added == groups[added[0]]


def test_a_shared_encoder_is_one_layer() -> None:
    from pairedge.core.bundled import default_model_dir

    pre = preprocess(onnx.load(str(default_model_dir() / "stage2.onnx")))
    groups = weight_groups(pre, compute_nodes(pre, "gemm"))
    by_weight = {}
    for n in pre.graph.node:
        if n.op_type == "Gemm":
            by_weight.setdefault(n.input[1], []).append(n.name)
    # the relation network's person encoder runs once per person: its two Gemm calls are one layer
    assert sorted(map(sorted, groups)) == sorted(map(sorted, by_weight.values()))
    assert any(len(g) == 2 for g in groups) and sum(map(len, groups)) == len(compute_nodes(pre, "gemm"))
