"""Quantization-aware training (pairedge.export.qat*): import, equalisation, fake quantization = the Q/DQ
file (written by calibration's one Q/DQ writer), every Gemm in int8 reading its input once with weights of the
fp32 shape, squashed inputs, deterministic fine-tuning, the folder step. Tiny models: seconds."""

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
from pairedge.core.labels import PAPER3, STAGE1  # noqa: E402
from pairedge.export.checkpoint import Checkpoint  # noqa: E402
from pairedge.export.models import KNEE_QUANTILE, ModelConfig, build_model, set_normalization  # noqa: E402
from pairedge.export.onnx_export import export_checkpoint  # noqa: E402
from pairedge.export.qat import EXPORT_TOLERANCE, export_int8, import_fp32, stage_info  # noqa: E402
from pairedge.export.qat import fake as qat_fake  # noqa: E402
from pairedge.export.qat.equalize import equalize  # noqa: E402
from pairedge.export.qat.export import gemm_inputs_quantized, qdq_graph  # noqa: E402
from pairedge.export.qat.train import QatConfig, finetune  # noqa: E402
from pairedge.export.train import predict_logits  # noqa: E402

MLP = (ModelConfig("stage1_mlp", 9, 2, hidden=(16, 8)), STAGE1.classes)
RELATION = (
    ModelConfig("relation_net", 14, 3, hidden=(8, 16), person_features=4, pair_features=6),
    PAPER3.classes,
)
SQUASHED = (
    ModelConfig("relation_net", 14, 3, hidden=(8, 16), person_features=4, pair_features=6, input_squash=1.0),
    PAPER3.classes,
)
#: Hidden activations bounded at 1 (``Clip(0, 1)`` in the graph instead of ``Relu``).
BOUNDED_MLP = (ModelConfig("stage1_mlp", 9, 2, hidden=(16, 8), activation_bound=1.0), STAGE1.classes)
BOUNDED = (
    ModelConfig(
        "relation_net", 14, 3, hidden=(8, 16), person_features=4, pair_features=6, activation_bound=1.0
    ),
    PAPER3.classes,
)
RELU_CASES = [MLP, RELATION, SQUASHED]
RELU_IDS = ["stage1_mlp", "relation_net", "relation_net_squashed"]
CASES = [*RELU_CASES, BOUNDED_MLP, BOUNDED]
IDS = [*RELU_IDS, "stage1_mlp_bounded", "relation_net_bounded"]


def _rows(f: int, n: int = 3000, seed: int = 0) -> np.ndarray:
    """Raw rows with per-column spreads from 0.05 to 20 and a heavy tail in the last column."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, f)) * np.linspace(0.05, 20, f) + np.linspace(-3, 3, f)
    X[:, -1] = rng.standard_t(2, n)
    return X.astype(np.float32)


def _fp32(
    tmp_path: Path,
    config: ModelConfig,
    labels: tuple[str, ...],
    seed: int = 0,
    spec: tuple[str, str] = ("liang2026", "1"),
) -> Path:
    """A small model exported as a pairedge fp32 file (stage from the labels; ``spec``: name and version)."""
    torch.manual_seed(seed)
    model = build_model(config)
    X = _rows(config.num_features, seed=seed)
    set_normalization(model, X.mean(0), X.std(0), X)
    stage = 1 if labels == STAGE1.classes else 2
    ckpt = Checkpoint(
        model=model,
        config=config,
        stage=stage,
        labels=labels,
        feature_spec=spec[0],
        feature_spec_version=spec[1],
        thresholds={"p_interact": 0.5},
        data_fingerprint="sha256:t",
        extra={
            "train": {
                "hidden": list(config.hidden),
                "input_squash": config.input_squash,
                "activation_bound": config.activation_bound,
            }
        },
    )
    path = tmp_path / f"stage{stage}.onnx"
    export_checkpoint(ckpt, path, check_batches=(3,))
    return path


@pytest.mark.parametrize(("config", "labels"), CASES, ids=IDS)
def test_import_reproduces_the_fp32_file(config: ModelConfig, labels: tuple, tmp_path: Path) -> None:
    path = _fp32(tmp_path, config, labels)
    model, meta = import_fp32(path)
    X = _rows(config.num_features, 500, seed=1)
    assert np.abs(predict_logits(model, X) - logits(session(path), X)).max() < 1e-5
    assert meta.architecture == config.architecture and meta.labels == labels


def test_import_refuses_a_graph_it_cannot_rebuild(tmp_path: Path) -> None:
    path = _fp32(tmp_path, *MLP)
    proto = onnx.load(str(path))
    next(t for t in proto.graph.initializer if t.name == "net.0.weight").name = "renamed"
    for node in proto.graph.node:
        node.input[:] = ["renamed" if i == "net.0.weight" else i for i in node.input]
    onnx.save(proto, str(path))
    with pytest.raises(ModelError, match="net.0.weight"):
        import_fp32(path)


@pytest.mark.parametrize(("config", "labels"), RELU_CASES, ids=RELU_IDS)
def test_equalisation_keeps_the_fp32_function_and_halves_the_input_spread(
    config: ModelConfig, labels: tuple, tmp_path: Path
) -> None:
    model, _ = import_fp32(_fp32(tmp_path, config, labels))
    X = _rows(config.num_features, seed=2)
    before = predict_logits(model, X)
    z = model.norm(torch.from_numpy(X)).abs().numpy()
    gains = equalize(model, X, 99.9, 0.5)
    assert np.abs(predict_logits(model, X) - before).max() < 1e-4 * max(1.0, np.abs(before).max())
    u = z * gains

    def spread(a: np.ndarray) -> float:
        return np.percentile(a, 99.9, axis=0).max() / np.percentile(a, 99.9, axis=0).min()

    assert spread(z) > 1.5
    if config.architecture == "relation_net":  # one shared person encoder: tied gains for a and b
        assert np.array_equal(gains[:4], gains[4:8]) and spread(u) < spread(z) ** 0.75
    else:  # strength 0.5: the ratio of the largest to the smallest range becomes its square root
        assert spread(u) == pytest.approx(spread(z) ** 0.5, rel=1e-3)


@pytest.mark.parametrize(("config", "labels"), [BOUNDED_MLP, BOUNDED], ids=IDS[3:])
def test_bounded_activations_are_clips_in_the_graph_and_bound_every_hidden_value(
    config: ModelConfig, labels: tuple, tmp_path: Path
) -> None:
    """``activation_bound`` replaces every ReLU by Clip(0, b): torch and ONNX Runtime agree, the import
    rebuilds it, and no row, however far out, drives a hidden value beyond b."""
    from onnx import numpy_helper

    path = _fp32(tmp_path, config, labels)
    proto = onnx.load(str(path))
    ops = [n.op_type for n in proto.graph.node]
    assert "Relu" not in ops and ops.count("Clip") == (2 if config.architecture == "stage1_mlp" else 6)
    consts = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    consts |= {
        n.output[0]: numpy_helper.to_array(n.attribute[0].t)
        for n in proto.graph.node
        if n.op_type == "Constant"
    }
    for clip in (n for n in proto.graph.node if n.op_type == "Clip"):
        assert (float(consts[clip.input[1]]), float(consts[clip.input[2]])) == (0.0, 1.0)
    model, _ = import_fp32(path)
    assert all(
        isinstance(m, torch.nn.Hardtanh)
        for m in model.modules()
        if isinstance(m, torch.nn.Hardtanh | torch.nn.ReLU)
    )
    X = _rows(config.num_features, 400, seed=4)
    X[:50] *= 1e4  # far beyond anything the model was set up on
    assert np.abs(predict_logits(model, X) - logits(session(path), X)).max() < 1e-4
    seen: list[torch.Tensor] = []
    for m in model.modules():
        if isinstance(m, torch.nn.Hardtanh):
            m.register_forward_hook(lambda _m, _i, out: seen.append(out.detach()))
    predict_logits(model, X)
    assert seen and all(float(t.min()) >= 0.0 and float(t.max()) <= 1.0 for t in seen)


def test_hidden_equalisation_refuses_bounded_units_and_input_equalisation_keeps_the_function(
    tmp_path: Path,
) -> None:
    """Scaling a unit behind Clip(0, b) moves its bound, so cross-layer equalisation would change the fp32
    function: refused with the fix named; the input gains (inside the normalisation) stay exact."""
    X = _rows(14, seed=2)
    model, _ = import_fp32(_fp32(tmp_path, *BOUNDED))
    before = predict_logits(model, X)
    with pytest.raises(ModelError, match="hidden_strength 0"):
        equalize(model, X, 99.9, 0.5)
    assert np.array_equal(predict_logits(model, X), before)  # refused before anything moved
    equalize(model, X, 99.9, 0.5, hidden_strength=0.0)
    assert np.abs(predict_logits(model, X) - before).max() < 1e-4 * max(1.0, np.abs(before).max())


def _quantized(tmp_path: Path, case: tuple) -> tuple:
    """A fake-quantized model (no fine-tuning), its fp32 file and rows."""
    config, labels = case
    path = _fp32(tmp_path, config, labels)
    X = _rows(config.num_features, seed=3)
    cfg = QatConfig(epochs=0, calibration="max", hidden_strength=0.0 if config.activation_bound else 0.5)
    result = finetune(import_fp32(path)[0], 1 if labels == STAGE1.classes else 2, X, X[:500], cfg)
    return path, result, X


def test_the_squash_bounds_the_first_layers_input(tmp_path: Path) -> None:
    """Within each column's knee (KNEE_QUANTILE of |z| on the training rows: their maximum, so no training row
    changes) a z-score is unchanged; beyond it, knee + log1p(|z| - knee): monotone, a 40-std row a few units
    past the knee; the knees are in the ONNX file and survive the import."""
    path = _fp32(tmp_path, *SQUASHED)
    model, _ = import_fp32(path)
    norm = model.norm
    knee = norm.knee.numpy()
    X = _rows(14, seed=0)
    z_train = np.abs((X - X.mean(0)) / X.std(0))
    np.testing.assert_allclose(knee, np.maximum(np.quantile(z_train, KNEE_QUANTILE, axis=0), 1.0), rtol=1e-5)
    with torch.no_grad():  # every training row keeps its plain z-scores
        np.testing.assert_allclose(
            norm(torch.from_numpy(X)).numpy(),
            (X - norm.mean.numpy()) / norm.std.numpy(),
            rtol=1e-6,
            atol=1e-6,
        )
    assert (knee >= 1.0).all() and knee[-1] > 4  # the heavy-tailed last column has the farthest knee
    x = _rows(14, 200, seed=5)
    assert np.abs(predict_logits(model, x) - logits(session(path), x)).max() < 1e-5
    norm.mean.zero_(), norm.std.fill_(1.0)
    k = float(knee[0])
    z = torch.tensor([[-40.0, -k, -0.5, 0.0, 0.5 * k, k, k + 1, 40.0]])
    out = norm(torch.cat([z.T, torch.zeros(8, 13)], dim=1))[:, 0].detach().numpy()
    plain = np.abs(z[0].numpy()) <= k
    np.testing.assert_allclose(out[plain], z[0].numpy()[plain], rtol=1e-6)
    far = np.sign(z[0].numpy()) * (k + np.log1p(np.maximum(np.abs(z[0].numpy()) - k, 0)))
    np.testing.assert_allclose(out[~plain], far[~plain], rtol=1e-6)
    assert np.all(np.diff(out) > 0) and abs(out[-1]) < k + 4


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_qdq_file_computes_what_was_trained(case: tuple, tmp_path: Path) -> None:
    """The exported Q/DQ graph computes the fake-quantized torch model: node by node (ONNX Runtime without
    graph optimisations) equal up to float rounding; with its fused int8 kernels a sum landing on the other
    side of a rounding tie moves a few rows by one int8 step, within the export check's tolerance."""
    import onnxruntime as ort

    path, result, X = _quantized(tmp_path, case)
    qdq = qdq_graph(onnx.load(str(path)), result.model, result.gains)
    want = predict_logits(result.model, X)
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    exact = ort.InferenceSession(qdq.SerializeToString(), plain, providers=["CPUExecutionProvider"])
    assert np.abs(exact.run(None, {"features": X})[0] - want).max() < 1e-5 * max(1.0, np.abs(want).max())
    got = logits(session(qdq), X)
    assert np.abs(got - want).max() < EXPORT_TOLERANCE
    fp32 = logits(session(path), X)
    assert np.abs(got - fp32).max() > 0  # it is quantized: not the fp32 graph


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_gemm_runs_in_int8_and_the_rules_pass(case: tuple, tmp_path: Path) -> None:
    path, result, _ = _quantized(tmp_path, case)
    fp32 = onnx.load(str(path))
    qdq = qdq_graph(fp32, result.model, result.gains)
    assert gemm_inputs_quantized(qdq) == [] and check_qdq_rules(qdq) == []
    count = lambda m, op: sum(n.op_type == op for n in m.graph.node)  # noqa: E731
    assert count(qdq, "Gemm") == count(fp32, "Gemm") > 0
    assert count(qdq, "Concat") == count(fp32, "Concat")  # no input copies
    inits = {t.name: t for t in qdq.graph.initializer}
    fp32_inits = {t.name: t for t in fp32.graph.initializer}
    for g in (n for n in qdq.graph.node if n.op_type == "Gemm"):  # int8 weights of the fp32 Gemm's own shape
        weight = g.input[1].removesuffix("_dequantized")
        assert list(inits[f"{weight}_quantized"].dims) == list(fp32_inits[weight].dims)
        assert inits[f"{weight}_quantized"].data_type == onnx.TensorProto.INT8
    gemms = [n for n in qdq.graph.node if n.op_type == "Gemm"]
    assert all(inits[g.input[2]].data_type == onnx.TensorProto.FLOAT for g in gemms)  # bias stays float
    assert {t.name for t in qdq.graph.initializer if t.name.endswith(".weight")} == set()  # no float weights
    producer = {o: n for n in qdq.graph.node for o in n.output}
    assert producer["logits"].op_type == "Gemm"  # the logits stay float
    assert count(fp32, "QuantizeLinear") == 0 and fp32.graph.node[0].op_type == "Sub"  # fp32 unchanged


def test_the_gemm_check_finds_a_float_input(tmp_path: Path) -> None:
    path, result, _ = _quantized(tmp_path, MLP)
    qdq = qdq_graph(onnx.load(str(path)), result.model, result.gains)
    gemm = next(n for n in qdq.graph.node if n.op_type == "Gemm")
    dq = next(n for n in qdq.graph.node if gemm.input[0] in n.output)
    q = next(n for n in qdq.graph.node if dq.input[0] in n.output)
    gemm.input[0] = q.input[0]  # bypass the activation Q/DQ
    assert len(gemm_inputs_quantized(qdq)) == 1


def test_a_gemm_without_a_quantized_layer_is_refused(tmp_path: Path) -> None:
    path, result, _ = _quantized(tmp_path, MLP)
    proto = onnx.load(str(path))
    for t in proto.graph.initializer:  # the trained layer net.3 has no initializer of that name here
        if t.name == "net.3.weight":
            t.name = "other.weight"
    for node in proto.graph.node:
        node.input[:] = ["other.weight" if i == "net.3.weight" else i for i in node.input]
    with pytest.raises(ModelError, match=r"net\.3\.weight"):
        qdq_graph(proto, result.model, result.gains)


def test_int8_weights_and_the_plain_grid() -> None:
    from pairedge.calibration.qdq_graph import LayerPlan, quantize_weight

    torch.manual_seed(0)
    layer = qat_fake.QuantLinear(torch.nn.Linear(5, 3))
    with torch.no_grad():
        layer.weight[1] = 0.0  # a channel of zeros still gets a positive scale
    layer.amax.fill_(4.0)
    q, scales = quantize_weight(layer.weight.detach().numpy().astype(np.float64))
    assert q.dtype == np.int8 and (scales > 0).all()
    rows = np.abs(q).max(axis=1)
    assert rows[0] == 127 and rows[2] == 127 and rows[1] == 0
    assert np.allclose(q * scales[:, None], qat_fake.fake_weight(layer.weight).detach().numpy(), atol=1e-7)
    assert layer.act_scale() == pytest.approx(4.0 / 127) == LayerPlan(4.0).scale  # the writer's step
    zero = torch.zeros(1, 5)
    with torch.no_grad():  # zero is on the grid: the output is the float bias
        assert torch.allclose(layer(zero)[0], layer.bias, atol=1e-5)


def test_uncalibrated_layers_and_bad_configs_are_refused() -> None:
    layer = qat_fake.QuantLinear(torch.nn.Linear(2, 2))
    with pytest.raises(InputError, match="calibrate"):
        layer(torch.zeros(1, 2))
    with pytest.raises(InputError, match="unknown key"):
        QatConfig.from_dict({"epoch": 3})
    with pytest.raises(InputError, match="unknown key"):
        QatConfig.from_dict({"input_copies": 2})  # the shifted copies are gone
    with pytest.raises(InputError):
        QatConfig(calibration="kl")


def test_finetuning_is_deterministic_and_keeps_the_best_validation_epoch(tmp_path: Path) -> None:
    path = _fp32(tmp_path, *RELATION)
    X = _rows(14, 2000, seed=4)
    cfg = QatConfig(epochs=3, samples_per_epoch=1000, lr=1e-3)
    runs = [finetune(import_fp32(path)[0], 2, X[:1500], X[1500:], cfg) for _ in range(2)]
    a, b = (r.model.state_dict() for r in runs)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    history = runs[0].history
    assert [h["epoch"] for h in history] == [0, 1, 2, 3]
    best = max(h["agreement"] for h in history)
    assert runs[0].validation["agreement"] == best
    assert json.loads(json.dumps(history))  # JSON-clean (no NaN)


def test_export_int8_keeps_the_fp32_metadata_and_names_its_source(tmp_path: Path) -> None:
    from pairedge.core.modelfolder import sha256_file

    path, result, X = _quantized(tmp_path, MLP)
    out = tmp_path / "stage1.int8.onnx"
    written = export_int8(path, result, out, stage_info({"name": "t"}, "stage1", result), X[:200])
    props = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    fp32 = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert {
        k: v for k, v in props.items() if k not in ("pairedge.precision", "pairedge.quantization")
    } == fp32
    info = json.loads(props["pairedge.quantization"])
    assert props["pairedge.precision"] == "int8" and info["method"] == "qat"
    assert info["fp32_sha256"] == sha256_file(path) and info["qat_recipe"] == {"name": "t"}
    assert (
        written.quantized_ops == 3 and written.export_max_abs_diff < 1e-2
    )  # fused int8 kernels: float order


def test_export_check_accepts_isolated_rounding_ties_and_refuses_a_file_that_computes_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pairedge.export.qat as qat  # the export check's own reference to ONNX Runtime's logits

    path, result, X = _quantized(tmp_path, MLP)
    real = logits

    def shifted(rows: int, by: float):
        def fake(sess, x):  # ONNX Runtime's logits, with the first `rows` rows moved by `by`
            out = np.array(real(sess, x), copy=True)
            out[:rows] += by
            return out

        return fake

    monkeypatch.setattr(qat, "logits", shifted(1, 0.1))  # one row of 1,000 a few ties apart: accepted
    written = export_int8(path, result, tmp_path / "a.int8.onnx", stage_info({}, "stage1", result), X[:1000])
    # ONNX Runtime's fused int8 kernels requantize between layers: a few rows move by one int8 step (~0.005
    # here), far inside the tolerance; unfused (node by node) the file equals the fake model to 1e-7
    assert 0.09 < written.export_max_abs_diff < 0.11 and written.export_p999_abs_diff < 0.2 * EXPORT_TOLERANCE
    for rows, by, what in ((1000, 0.06, "percentile"), (1, 0.3, "at worst")):
        monkeypatch.setattr(qat, "logits", shifted(rows, by))
        out = tmp_path / f"b{rows}.int8.onnx"
        with pytest.raises(ModelError, match=what):
            export_int8(path, result, out, stage_info({}, "stage1", result), X[:1000])
        assert not out.exists()


def test_the_folder_step_writes_registers_and_records_both_stages(tmp_path: Path) -> None:
    """build_int8 on a small folder: both int8 files written beside the fp32 ones, registered in the manifest
    (verified), loadable as the folder's int8 precision, and the record names rows, epochs and checks."""
    from pairedge.core.modelfolder import read_manifest, verify_files
    from pairedge.export.datasets import FeatureData
    from pairedge.export.qat.build import build_int8
    from pairedge.export.qat.data import RecipeRows

    spec = ("pairedge", "2")  # the runtime checks the widths: 31 and 61 = 2 x 15 + 31
    _fp32(tmp_path, ModelConfig("stage1_mlp", 31, 2, hidden=(16, 8)), STAGE1.classes, spec=spec)
    _fp32(
        tmp_path,
        ModelConfig("relation_net", 61, 3, hidden=(8, 16), person_features=15, pair_features=31),
        PAPER3.classes,
        seed=1,
        spec=spec,
    )
    rng = np.random.default_rng(5)
    n = 1200
    groups = np.repeat([f"static-{k}" for k in range(6)], n // 6)
    y7 = rng.integers(0, 5, n)  # SIM7-like: 0-2 together (the PAPER3 classes), 3-4 strangers
    X1, X2 = _rows(31, n, seed=6), _rows(61, n, seed=7)
    together = y7 < 3
    rows = RecipeRows(
        FeatureData.from_arrays(X1, together.astype(int), groups, STAGE1.classes),
        FeatureData.from_arrays(X2[together], y7[together], groups[together], PAPER3.classes),
        X2,
    )
    small = {"epochs": 1, "samples_per_epoch": 500, "calibration": "max"}
    record = build_int8(tmp_path, {}, {"stage1": small, "stage2": {**small, "gate_floor": 0.3}}, rows)
    assert set(record["stages"]) == {"stage1", "stage2"}
    for st in record["stages"].values():
        assert (tmp_path / st["file"]).is_file() and st["train_rows"] > 0 and st["validation_rows"] > 0
        assert len(st["history"]) == 2 and st["best_epoch"] in (0, 1)
    assert record["training_data_matches_fp32"] == {
        "stage1": False,
        "stage2": False,
    }  # other data than "sha256:t"
    roles = {name: e.role for name, e in read_manifest(tmp_path).files.items()}
    assert roles == {"stage1.int8.onnx": "stage1.int8", "stage2.int8.onnx": "stage2.int8"}
    verify_files(tmp_path)
    from pairedge.runtime.loading import find_models

    pair = find_models(tmp_path, precision="int8")
    assert pair.precision == "int8" and pair.stage2.path.name == "stage2.int8.onnx"


def test_headroom_widens_every_range_and_keeps_rows_beyond_the_extremes_in_range(tmp_path: Path) -> None:
    from pairedge.export.qat.train import first_layer_paths

    path = _fp32(tmp_path, *RELATION)
    X = _rows(14, 1200, seed=5)
    plain, wide = (
        finetune(
            import_fp32(path)[0],
            2,
            X,
            X[:300],
            QatConfig(epochs=0, calibration="max", input_headroom=i, hidden_headroom=h),
        )
        for i, h in ((1.0, 1.0), (4.0, 2.0))
    )
    first = first_layer_paths(plain.model)
    assert plain.ranges.keys() == wide.ranges.keys() and first
    for name, r in plain.ranges.items():
        assert wide.ranges[name] == pytest.approx(r * (4.0 if name in first else 2.0), rel=1e-6)
        assert float(qat_fake.quant_layers(wide.model)[name].amax) == pytest.approx(
            wide.ranges[name], rel=1e-6
        )
    # a row 3x beyond the training extremes: clipped without headroom, inside the range with it
    glitch = X[:50] * 3.0
    teacher = predict_logits(import_fp32(path)[0], glitch)
    err = [np.abs(predict_logits(r.model, glitch) - teacher).max() for r in (plain, wide)]
    assert err[1] < err[0]
    with pytest.raises(InputError, match="headroom"):
        QatConfig(input_headroom=0.5)
    with pytest.raises(InputError, match="headroom"):
        QatConfig(hidden_headroom=float("nan"))


def test_post_training_quantization_takes_a_bounded_model(tmp_path: Path) -> None:
    """``pairedge calibrate``'s PTQ on a Clip(0, 1) graph: the column scales fold where they are exact (the
    inputs; never through a Clip, where scaling moves the bound), every Gemm reads an int8 input once, the
    Q/DQ rules hold, and the int8 logits follow fp32."""
    from pairedge.calibration.equalize import equalize as ptq_equalize
    from pairedge.calibration.quantize import QuantConfig, preprocess, quantize

    path = _fp32(tmp_path, *BOUNDED)
    X = _rows(14, seed=6)
    pre = preprocess(onnx.load(str(path)))
    eq, _ = ptq_equalize(pre, X, strength=1.0)
    np.testing.assert_allclose(logits(session(eq), X), logits(session(pre), X), atol=2e-4, rtol=1e-4)
    q = quantize(eq, X, QuantConfig(method="percentile", percentile=99.99))
    assert check_qdq_rules(q) == [] and gemm_inputs_quantized(q) == []
    assert sum(n.op_type == "Clip" for n in q.graph.node) == 6
    fp32 = logits(session(path), X)
    assert np.abs(logits(session(q), X) - fp32).max() < 0.1 * max(1.0, float(np.abs(fp32).max()))
