"""Parity check catches what it must, each at the right level, and passes an identical candidate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from pairedge.compare.parity import CheckOptions, Tolerances, check_pack, load_pack
from pairedge.core.bundled import RECIPE, default_model_dir
from pairedge.core.errors import InputError, ModelError
from pairedge.core.features import get_spec
from pairedge.core.modelmeta import ModelMetadata
from pairedge.runtime.deployment import Deployment
from parity_helpers import box_only_toy, make_candidate, set_extra, set_initializer


def _status(report) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {lv.name: lv.status for lv in report.levels}


def _first(report) -> str:  # type: ignore[no-untyped-def]
    first = report.first_failure
    assert first is not None, report.verdict()
    return first.name


@pytest.mark.parametrize("model_only", [False, True])
def test_identical_candidate_passes(pack_path: Path, model_only: bool) -> None:
    report = check_pack(pack_path, default_model_dir(), CheckOptions(model_only=model_only))
    assert report.passed, report.verdict()
    assert _status(report) == {"features": "PASS", "logits": "PASS", "labels": "PASS", "task": "PASS"}
    assert report.candidate["relation"] == "same"
    assert report.levels[1].metrics["stage2"]["max"] == 0.0
    assert report.verdict().startswith("PASS")


def test_copied_files_pass_as_same_model(pack_path: Path, tmp_path: Path) -> None:
    report = check_pack(pack_path, make_candidate(tmp_path))
    assert report.passed and report.candidate["relation"] == "same"


def test_one_perturbed_weight_fails_at_logits(pack_path: Path, tmp_path: Path) -> None:
    def bump(m: onnx.ModelProto, props: dict[str, str]) -> None:
        set_initializer(m, "pair.0.weight", lambda w: w + _one_hot(w))

    report = check_pack(pack_path, make_candidate(tmp_path, {2: bump}), CheckOptions(model_only=True))
    assert not report.passed
    assert _first(report) == "logits"
    assert _status(report)["features"] == "PASS"
    problem = report.first_failure.problems[0]
    assert "stage2 logit error" in problem and "weights differ" in problem
    assert report.candidate["relation"] == "unverified"


def _one_hot(w: np.ndarray) -> np.ndarray:
    out = np.zeros_like(w)
    out[0, 0] = 0.5  # one weight of the stage-2 pair encoder
    return out


def test_swapped_label_order_fails_at_labels(pack_path: Path, tmp_path: Path) -> None:
    def swap(m: onnx.ModelProto, props: dict[str, str]) -> None:
        labels = json.loads(props["pairedge.labels"])
        labels[0], labels[1] = labels[1], labels[0]
        props["pairedge.labels"] = json.dumps(labels)

    report = check_pack(pack_path, make_candidate(tmp_path, {2: swap}))
    assert _first(report) == "labels"
    assert _status(report)["logits"] == "PASS"
    assert "stage-2 label order differs" in report.first_failure.problems[0]


def test_other_normalisation_fails_at_logits_naming_it(pack_path: Path, tmp_path: Path) -> None:
    def renorm(m: onnx.ModelProto, props: dict[str, str]) -> None:
        set_initializer(m, "norm.std", lambda s: s * 1.5)
        std = [v * 1.5 for v in json.loads(props["pairedge.norm_std"])]
        props["pairedge.norm_std"] = json.dumps(std)

    report = check_pack(pack_path, make_candidate(tmp_path, {2: renorm}), CheckOptions(model_only=True))
    assert _first(report) == "logits"
    assert "normalisation statistics differ" in report.first_failure.problems[0]


def test_other_feature_options_fail_at_features(pack_path: Path, tmp_path: Path) -> None:
    def median(m: onnx.ModelProto, props: dict[str, str]) -> None:
        set_extra(props, feature_config={**RECIPE["feature_config"], "ego_motion": "median"})

    report = check_pack(pack_path, make_candidate(tmp_path, {1: median, 2: median}))
    assert _first(report) == "features"
    assert (
        "feature options differ (ego_motion: pack 'affine' vs model 'median')"
        in report.first_failure.problems[0]
    )


def _toy_liang(path: Path, stage: int) -> None:
    spec = get_spec("liang2026")
    f = spec.stage1_dim if stage == 1 else spec.stage2_dim
    labels = (
        ("not_interacting", "interacting")
        if stage == 1
        else ("walking_together", "standing_together", "sitting_together")
    )
    w = np.random.default_rng(stage).normal(size=(f, len(labels))).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["features", "w"], ["logits"])],
        "toy",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["pairs", f])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["pairs", len(labels)])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    meta = ModelMetadata(
        stage=stage,
        feature_spec="liang2026",
        feature_spec_version=spec.version,
        labels=labels,
        num_features=f,
        norm_mean=(0.0,) * f,
        norm_std=(1.0,) * f,
    )
    for k, v in meta.to_props().items():
        model.metadata_props.add(key=k, value=v)
    onnx.save(model, str(path))


def test_other_feature_spec_fails_at_features(pack_path: Path, tmp_path: Path) -> None:
    for stage in (1, 2):
        _toy_liang(tmp_path / f"stage{stage}.onnx", stage)
    report = check_pack(pack_path, tmp_path)
    assert _first(report) == "features"
    assert "feature spec differs: pack pairedge v2, model liang2026" in report.first_failure.problems[0]
    assert _status(report)["logits"] == "SKIP"


def test_different_flow_backend_fails_at_features(pack_path: Path) -> None:
    report = check_pack(pack_path, Deployment(default_model_dir(), flow="farneback"))
    assert _first(report) == "features"
    assert _status(report)["logits"] == "PASS"
    problem = report.first_failure.problems[0]
    assert "flow backend differs: reference DISFlow" in problem and "FarnebackFlow" in problem


def test_pack_from_another_model_is_refused(pack_path: Path, tmp_path: Path) -> None:
    def other_data(m: onnx.ModelProto, props: dict[str, str]) -> None:
        props["pairedge.data_fingerprint"] = "sha256:" + "0" * 64

    with pytest.raises(ModelError, match="pack from another model"):
        check_pack(pack_path, make_candidate(tmp_path, {2: other_data}))


def test_derived_model_naming_other_fp32_is_refused(pack_path: Path, tmp_path: Path) -> None:
    def claims(m: onnx.ModelProto, props: dict[str, str]) -> None:
        set_extra(props, precision="int8", source_sha256="f" * 64)

    with pytest.raises(ModelError, match="pack from another model: .* was made from"):
        check_pack(pack_path, make_candidate(tmp_path, {1: claims, 2: claims}))


def test_derived_model_naming_the_pack_fp32_is_derived(pack_path: Path, tmp_path: Path) -> None:
    ident = load_pack(pack_path).identity

    def claim(stage: int):  # type: ignore[no-untyped-def]
        def edit(m: onnx.ModelProto, props: dict[str, str]) -> None:  # as `pairedge calibrate` stamps it
            props["pairedge.quantization"] = json.dumps({"fp32_sha256": ident[f"stage{stage}_sha256"]})

        return edit

    report = check_pack(pack_path, make_candidate(tmp_path, {1: claim(1), 2: claim(2)}))
    assert report.passed and report.candidate["relation"] == "derived"


@pytest.mark.data
def test_box_only_pack_from_cad_round_trips(shared_data: Path, tmp_path: Path) -> None:
    """A CAD sequence (no frames) packs and checks through a box-only model."""
    from pairedge.apps.evaluation.sources import parse_sources
    from pairedge.compare.parity.build import build_pack

    mats = sorted((shared_data / "cad_choi" / "annotations").glob("anno*.mat"))
    if not mats:
        pytest.skip("../shared/data/cad_choi absent")
    model = tmp_path / "model"
    model.mkdir()
    for stage in (1, 2):
        box_only_toy(model / f"stage{stage}.onnx", stage)
    pack = build_pack(model, parse_sources(str(mats[0]))[0], tmp_path / "cad.npz", frames=20)
    assert pack.reference["box_only"] and len(pack.frame_png) == 0 and pack.has_truth
    report = check_pack(tmp_path / "cad.npz", model)
    assert report.passed, report.verdict()
    assert report.levels[0].metrics["coverage"] == 1.0


def test_fp16_variant_stamped_like_calibrate_passes_as_derived(pack_path: Path, tmp_path: Path) -> None:
    """An fp16 copy (calibration's converter, stamped with the fp32 hash as `pairedge calibrate` does)."""
    from pairedge.calibration.fp16 import to_fp16
    from pairedge.calibration.quantize import stamp

    ident = load_pack(pack_path).identity
    for stage in (1, 2):
        fp16 = to_fp16(onnx.load(str(default_model_dir() / f"stage{stage}.onnx")))
        info = {"fp32_sha256": ident[f"stage{stage}_sha256"], "io": "float32", "compute": "float16"}
        onnx.save(stamp(fp16, "fp16", info), str(tmp_path / f"stage{stage}.fp16.onnx"))
        onnx.save(
            onnx.load(str(default_model_dir() / f"stage{stage}.onnx")), str(tmp_path / f"stage{stage}.onnx")
        )
    report = check_pack(pack_path, Deployment(tmp_path, precision="fp16"))
    assert report.passed, report.verdict()
    assert report.candidate["relation"] == "derived" and report.candidate["precision"] == "fp16"
    assert 0.0 < report.levels[1].metrics["stage2"]["max"] <= 0.1
    strict = CheckOptions(tolerances=Tolerances.from_dict({"logit_max": {"fp16": 1e-6}}))
    assert (
        check_pack(pack_path, Deployment(tmp_path, precision="fp16"), strict).first_failure.name == "logits"
    )


def test_tolerance_overrides_are_checked() -> None:
    tol = Tolerances.from_dict({"logit_max": {"int8": 2.0}, "top1_agreement": 0.98})
    assert tol.logit_max == {"fp32": 1e-3, "fp16": 0.1, "int8": 2.0} and tol.top1_agreement == 0.98
    for bad in ({"nope": 1}, {"logit_max": 3}, {"top1_agreement": "high"}, {"task_drop": {"mpca": True}}):
        with pytest.raises(InputError, match="tolerances"):
            Tolerances.from_dict(bad)
