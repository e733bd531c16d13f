"""The PTQ that holds: per-column scales before every quantized Gemm, Q/DQ on Gemm inputs only, honest
held-out rows, the default calibration set of the model's recipe, and the plain float-node report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from cal_data import model_dir, scene_samples
from onnx import numpy_helper
from pairedge.calibration import api
from pairedge.calibration.default_set import RESERVED_SEEDS, default_scenes, default_source
from pairedge.calibration.equalize import column_ranges, equalize, quantized_gemms
from pairedge.calibration.infer import logits, session
from pairedge.calibration.qdq_rules import check_qdq_rules
from pairedge.calibration.quantize import QuantConfig, SearchResult, preprocess, quantize
from pairedge.calibration.report import float_nodes
from pairedge.core.errors import InputError


def _stage(stage: int) -> tuple[onnx.ModelProto, np.ndarray]:
    samples = scene_samples()
    st = samples.stage1 if stage == 1 else samples.stage2
    return preprocess(onnx.load(str(model_dir() / f"stage{stage}.onnx"))), st.X


@pytest.mark.parametrize("stage", [1, 2])
def test_column_scales_are_absorbed_before_every_gemm(stage: int) -> None:
    pre, X = _stage(stage)
    eq, info = equalize(pre, X, strength=1.0)
    np.testing.assert_allclose(logits(session(eq), X), logits(session(pre), X), atol=2e-3, rtol=1e-4)
    assert info.folded, "nothing absorbed"
    first = next(iter(quantized_gemms(eq).values()))[0]
    squashed = any(t.name == "norm.knee" for t in pre.graph.initializer)
    if squashed:  # the squash sits between the z-scoring and the Gemm: the scales go in one Mul after it
        assert info.folded[first.input[1]].startswith("Mul node")
    else:  # the z-scoring divisor took the scales
        assert info.folded[first.input[1]] == "standardization Div"
    source = next(iter(quantized_gemms(pre).values()))[0].input[0]  # the same Gemm's input before equalizing
    before = column_ranges(pre, X, [source])[source]
    after = column_ranges(eq, X, [first.input[0]])[first.input[0]]
    live = after > 0
    spread = lambda r: r[live].max() / r[live].min()  # noqa: E731
    assert spread(after) < 1.01 < spread(before)  # every column of the first Gemm's input spans one range
    if stage == 2:  # the Concat of [a, b, |a-b|, a*b, pair] cannot be folded: one Mul before the head
        assert any(v.startswith("Mul node") for v in info.folded.values())
        assert any(n.op_type == "Mul" and n.name.endswith("/column_scale") for n in eq.graph.node)


@pytest.mark.parametrize("stage", [1, 2])
def test_gemm_placement_quantizes_only_gemm_inputs(stage: int) -> None:
    pre, X = _stage(stage)
    q = quantize(equalize(pre, X)[0], X, QuantConfig(method="percentile", percentile=99.99))
    assert check_qdq_rules(q) == []
    users: dict[str, list[Any]] = {}
    for n in q.graph.node:
        for k, i in enumerate(n.input):
            users.setdefault(i, []).append((n, k))
    inits = {t.name for t in q.graph.initializer}
    act_q = [n for n in q.graph.node if n.op_type == "QuantizeLinear" and n.input[0] not in inits]
    gemms = [n for n in q.graph.node if n.op_type == "Gemm"]
    assert len(act_q) == len(
        {g.input[0] for g in gemms}
    )  # one activation Q/DQ per Gemm input, none elsewhere
    for qn in act_q:
        for dq, _ in users[qn.output[0]]:
            assert all(u.op_type == "Gemm" and k == 0 for u, k in users[dq.output[0]])
    all_placement = quantize(pre, X, QuantConfig(method="minmax", placement="all"))  # the naive baseline
    assert len([n for n in all_placement.graph.node if n.op_type == "QuantizeLinear"]) > len(act_q)


def test_split_search_report_is_disjoint_and_complete() -> None:
    held = scene_samples().stage1
    search, report = api.split_search_report(held)
    assert len(search) and len(report) and not set(search) & set(report)
    assert sorted([*search, *report]) == list(range(len(held)))
    assert not set(held.group[search]) & set(held.group[report])  # whole sequences, never split


def test_float_node_report_names_the_gemm_and_its_cost() -> None:
    pre, X = _stage(2)
    gemm = next(n.name for n in pre.graph.node if n.op_type == "Gemm")
    config = QuantConfig(exclude=(gemm,))
    q = quantize(pre, X, config)
    info = float_nodes(pre, q, config, SearchResult(sensitivity={gemm: 0.97}))
    assert info["gemms_in_float"] == [gemm] and 0.0 < info["int8_macs_share"] < 1.0
    entry = next(d for d in info["nodes"] if d["node"] == gemm)
    assert "97.00 %" in entry["why"] and "fp16" in entry["jetson_cost"] and entry["macs_per_pair"] > 0


def test_default_set_comes_from_the_recipe_and_avoids_held_out_seeds() -> None:
    from pairedge.runtime.loading import find_models

    scenes = dict(default_scenes(find_models(model_dir()).stage1.metadata.extra["recipe"]))
    assert {"static", "moving", "noisy", "surveillance"} <= set(scenes)
    for seeds in scenes.values():
        assert len(seeds) == 4 and all(0 <= s <= 23 for s in seeds)
    recipe = {
        "presets": ["static"],
        "train_seeds": "0-3,1000,2001,4000",
        "test_seeds": "1000-1007",
        "confirm": {"seeds": "0-1"},
    }
    assert default_scenes(recipe) == [("static", (2, 3))]  # test, confirm and reserved seeds are dropped
    assert all(not lo <= s <= hi for s in (2, 3) for lo, hi in RESERVED_SEEDS)
    with pytest.raises(InputError, match="--scenes"):
        default_scenes({"presets": ["static"], "train_seeds": "1000", "test_seeds": "1000"})


def test_a_model_without_recipe_asks_for_a_source() -> None:
    class Meta:
        extra: dict[str, Any] = {}

    class Stage:
        metadata = Meta()

    class Models:
        stage1 = stage2 = Stage()

    with pytest.raises(InputError, match="names no training recipe"):
        default_source(Models())


def test_no_source_calibrates_on_the_default_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    def fake_collect(folder: Any, scenes: Any, **kw: Any) -> Any:
        seen.append(scenes)
        return scene_samples()

    monkeypatch.setattr(api, "collect_scenes", fake_collect)
    result = api.calibrate("default", tmp_path / "out", api.CalibrateOptions(target_agreement=None))
    presets = {p for p, _ in seen[0]}
    assert {"static", "moving", "noisy", "surveillance"} <= presets
    assert result.report["options"]["scenes"].startswith("static:0+1+2+3")
    w = numpy_helper.to_array(
        next(
            t
            for t in onnx.load(str(tmp_path / "out" / "stage1.int8.onnx")).graph.initializer
            if t.data_type == onnx.TensorProto.INT8
        )
    )
    assert w.dtype == np.int8


def test_ort_placement_with_a_histogram_method_on_a_constant_tensor_is_one_line() -> None:
    """ONNX Runtime's percentile calibrator cannot histogram a tensor that never varies (the squash's Relu
    is 0 on every row inside the knees): an InputError that names the way out, not numpy's ValueError."""
    pre, X = _stage(2)
    with pytest.raises(InputError, match="--method minmax"):
        quantize(pre, X, QuantConfig(method="percentile", placement="all"))
