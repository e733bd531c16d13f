"""Hidden units bounded at the source (pairedge.export.qat.equalize.unit_bounds / bound_units, the recipe's
bound step) and mixed precision by measurement (float layers in QAT, the sensitivity sweep, their Q/DQ
file). Tiny models: seconds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from pairedge.calibration.infer import logits, session  # noqa: E402
from pairedge.calibration.qdq_rules import check_qdq_rules  # noqa: E402
from pairedge.core.errors import InputError, ModelError  # noqa: E402
from pairedge.export.models import build_model  # noqa: E402
from pairedge.export.qat import export_int8, import_fp32, model_config, stage_info  # noqa: E402
from pairedge.export.qat import fake as qat_fake  # noqa: E402
from pairedge.export.qat.equalize import bound_units, clip_units, unit_bounds  # noqa: E402
from pairedge.export.qat.export import float_nodes, gemm_inputs_quantized, qdq_graph  # noqa: E402
from pairedge.export.qat.sensitivity import float_sweep, layer_macs  # noqa: E402
from pairedge.export.qat.train import QatConfig, finetune, quantized_student  # noqa: E402
from pairedge.export.train import predict_logits  # noqa: E402
from test_qat import BOUNDED, MLP, RELATION, _fp32, _rows  # noqa: E402


def _bounded_copy(model: torch.nn.Module, path: Path) -> torch.nn.Module:
    _, meta = import_fp32(path)
    from dataclasses import replace

    return build_model(replace(model_config(meta, model.state_dict()), activation_bound=1.0))


@pytest.mark.parametrize("case", [MLP, RELATION], ids=["stage1_mlp", "relation_net"])
def test_bound_units_is_the_clipped_model_exactly_with_every_hidden_value_in_unit_range(
    case: tuple, tmp_path: Path
) -> None:
    config, labels = case
    path = _fp32(tmp_path, config, labels)
    model, _ = import_fp32(path)
    X = _rows(config.num_features, 2000, seed=4)
    bounds = unit_bounds(model, X, 90.0)
    assert len(bounds) == (2 if config.architecture == "stage1_mlp" else 4)
    bounded = bound_units(model, _bounded_copy(model, path), bounds)
    want = predict_logits(clip_units(model, bounds), X)
    np.testing.assert_allclose(predict_logits(bounded, X), want, atol=2e-5 * max(1.0, np.abs(want).max()))
    # the bound is real: a 90th-percentile clip moves rows; every hidden value of the rewrite is in [0, 1]
    assert np.abs(want - predict_logits(model, X)).max() > 1e-3
    seen: list[torch.Tensor] = []
    for m in bounded.modules():
        if isinstance(m, torch.nn.Hardtanh):
            m.register_forward_hook(lambda _m, _i, out: seen.append(out.detach()))
    predict_logits(bounded, X)
    values = torch.cat([s.flatten() for s in seen])
    assert values.min() >= 0 and values.max() <= 1 and (values == 1).float().mean() > 0.01
    # at the 100th percentile of the same rows nothing is clipped on them
    full = bound_units(model, _bounded_copy(model, path), unit_bounds(model, X, 100.0))
    np.testing.assert_allclose(predict_logits(full, X), predict_logits(model, X), atol=1e-4)


def test_unit_bounds_refuse_bounded_models_bad_percentiles_and_bad_targets(tmp_path: Path) -> None:
    path = _fp32(tmp_path, *BOUNDED)
    bounded, _ = import_fp32(path)
    X = _rows(14, 200)
    with pytest.raises(ModelError, match="bounded already"):
        unit_bounds(bounded, X, 99.0)
    relu_path = _fp32(tmp_path / "r", *RELATION)
    model, _ = import_fp32(relu_path)
    with pytest.raises(ModelError, match="percentile"):
        unit_bounds(model, X, 0.0)
    bounds = unit_bounds(model, X, 99.0)
    with pytest.raises(ModelError, match="one per hidden layer"):
        bound_units(model, _bounded_copy(model, relu_path), bounds[:-1])
    with pytest.raises(ModelError, match="finite positive"):
        bound_units(model, _bounded_copy(model, relu_path), [*bounds[:-1], -bounds[-1]])
    with pytest.raises(ModelError, match="activation_bound=1"):
        bound_units(model, build_model(model_config(import_fp32(relu_path)[1], model.state_dict())), bounds)


def test_a_unit_that_rarely_fires_keeps_a_small_positive_bound(tmp_path: Path) -> None:
    path = _fp32(tmp_path, *MLP)
    model, _ = import_fp32(path)
    with torch.no_grad():  # unit 0 of the first layer fires on no row
        model.net[0].bias[0] = -1e6
    bounds = unit_bounds(model, _rows(9, 500), 99.0)
    firing = bounds[0][1:]
    assert 0 < bounds[0][0] <= 0.011 * np.median(firing) + 1e-3 and (firing > bounds[0][0]).all()


def test_the_bound_step_writes_a_clip_graph_that_imports_back(tmp_path: Path) -> None:
    from pairedge.core.bundled import RECIPE
    from pairedge.export.onnx_export import export_model
    from pairedge.export.qat.unit_bound import bound_model, without_unit_bound

    assert "unit_bound" in RECIPE["stage2"] and "unit_bound" not in without_unit_bound(RECIPE)["stage2"]
    assert without_unit_bound(without_unit_bound(RECIPE)) == without_unit_bound(RECIPE)
    path = _fp32(tmp_path, *RELATION)
    X = _rows(14, 1500, seed=2)
    model, meta, record = bound_model(path, 95.0, X)
    assert meta.extra["train"]["activation_bound"] == 1.0 and record["percentile"] == 95.0
    assert record["rewrite_max_abs_diff"] < 1e-4 and 0 < record["rows_moved"] <= 1
    out = tmp_path / "bounded" / "stage2.onnx"
    export_model(model, meta, out, check_batches=(3,))
    ops = [n.op_type for n in onnx.load(str(out)).graph.node]
    assert "Clip" in ops and "Relu" not in ops
    back, back_meta = import_fp32(out)
    np.testing.assert_allclose(predict_logits(back, X), predict_logits(model, X), atol=1e-5)
    assert back_meta.extra["unit_bound"]["rows"] == len(X)
    with pytest.raises(ModelError, match="bounded already"):
        bound_model(out, 95.0, X)


def _relation(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """A small relation network's fp32 file and rows with widely spread columns."""
    path = _fp32(tmp_path, *RELATION)
    X = _rows(14, 3000, seed=7)
    return path, X


def test_float_layers_stay_float_and_unknown_ones_are_refused(tmp_path: Path) -> None:
    path, X = _relation(tmp_path)
    model, _ = import_fp32(path)
    cfg = QatConfig(epochs=0, calibration="max", float_layers=("person.0",))
    student, ranges, _ = quantized_student(model, X, cfg)
    assert set(qat_fake.float_layers(student)) == {"person.0"} and "person.0" not in ranges
    assert set(qat_fake.quant_layers(student)) == {"person.2", "pair.0", "head.0", "head.3"}
    with pytest.raises(InputError, match="float_layers"):
        quantized_student(model, X, QatConfig(float_layers=("person.9",)))
    with pytest.raises(InputError, match="a list of module paths"):
        QatConfig(float_layers="person.0")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="float_budget"):
        QatConfig(float_budget=1.5)


def test_the_qdq_file_keeps_the_float_layers_gemms_float_and_says_so(tmp_path: Path) -> None:
    import onnxruntime as ort

    path, X = _relation(tmp_path)
    model, _ = import_fp32(path)
    cfg = QatConfig(epochs=1, samples_per_epoch=512, calibration="max", float_layers=("person.0",))
    result = finetune(model, 2, X, X[:500], cfg)
    qdq = qdq_graph(onnx.load(str(path)), result.model, result.gains)
    assert check_qdq_rules(qdq) == []
    kept = {"person.0.weight"}
    assert gemm_inputs_quantized(qdq, kept) == []
    assert len(gemm_inputs_quantized(qdq)) == 4  # both calls of the encoder's first layer: input and weight
    assert float_nodes(qdq, kept) == [n.name for n in qdq.graph.node if "person.0.weight" in n.input]
    assert len(float_nodes(qdq, kept)) == 2
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    exact = ort.InferenceSession(qdq.SerializeToString(), plain, providers=["CPUExecutionProvider"])
    want = predict_logits(result.model, X)
    assert np.abs(exact.run(None, {"features": X})[0] - want).max() < 1e-4 * max(1.0, np.abs(want).max())
    out = tmp_path / "stage2.int8.onnx"
    export_int8(
        path, result, out, stage_info({"name": "t"}, "stage2", result, {"float_layers": ["person.0"]}), X
    )
    info = json.loads({p.key: p.value for p in onnx.load(str(out)).metadata_props}["pairedge.quantization"])
    assert info["excluded_nodes"] == float_nodes(qdq, kept) and info["sensitivity"]["float_layers"] == [
        "person.0"
    ]
    assert np.abs(logits(session(out), X) - want).max() < 0.25


def test_layer_macs_count_every_call_of_a_shared_encoder(tmp_path: Path) -> None:
    model, _ = import_fp32(_fp32(tmp_path, *RELATION))
    macs = layer_macs(model, 14)
    assert macs == {
        "person.0": 2 * 4 * 8,
        "person.2": 2 * 8 * 8,
        "pair.0": 6 * 8,
        "head.0": 40 * 16,
        "head.3": 16 * 3,
    }


def test_the_sweep_keeps_the_most_sensitive_layer_float_within_its_budget(tmp_path: Path) -> None:
    path, X = _relation(tmp_path)
    model, _ = import_fp32(path)
    macs = layer_macs(model, 14)
    total = sum(macs.values())
    base = QatConfig(epochs=0, calibration="max", equalize=None, hidden_strength=0.0)
    from dataclasses import replace

    sweep = float_sweep(model, 2, X, X[:1000], replace(base, float_budget=1.0, float_target=1.0))
    assert sweep.steps and sweep.agreement >= sweep.agreement_all_int8
    first = sweep.steps[0]
    assert set(first) == set(macs) and sweep.float_layers[0] == max(first, key=lambda p: (first[p], -macs[p]))
    assert sweep.float_mac_share == pytest.approx(sum(macs[p] for p in sweep.float_layers) / total)
    # a budget below every layer's share keeps everything int8; a reached target stops at once
    none = float_sweep(model, 2, X, X[:1000], replace(base, float_budget=min(macs.values()) / total / 2))
    assert none.float_layers == () and none.float_mac_share == 0
    done = float_sweep(model, 2, X, X[:1000], replace(base, float_budget=1.0, float_target=1e-6))
    assert done.float_layers == () and done.steps == ()
    # within a budget: the chosen layers' share never exceeds it
    capped = float_sweep(model, 2, X, X[:1000], replace(base, float_budget=0.2, float_target=1.0))
    assert capped.float_mac_share <= 0.2
    assert json.loads(json.dumps(capped.to_dict()))["float_layers"] == list(capped.float_layers)
