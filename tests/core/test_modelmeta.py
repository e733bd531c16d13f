from __future__ import annotations

import pytest
from pairedge.core.errors import ModelError
from pairedge.core.labels import PAPER3, SIM7, get_label_set
from pairedge.core.modelmeta import ModelMetadata


def _meta() -> ModelMetadata:
    return ModelMetadata(
        stage=2,
        feature_spec="pairedge",
        feature_spec_version="1",
        labels=PAPER3.classes,
        num_features=2,
        norm_mean=(0.5, -1.0),
        norm_std=(1.0, 2.0),
        thresholds={"p_interact": 0.5},
        extra={"epochs": 3},
    )


def test_round_trip() -> None:
    meta = _meta()
    props = meta.to_props()
    assert props["pairedge.feature_spec"] == "pairedge"
    assert ModelMetadata.from_props(props) == meta


def test_missing_key_is_a_model_error() -> None:
    props = _meta().to_props()
    del props["pairedge.labels"]
    with pytest.raises(ModelError, match="pairedge.labels"):
        ModelMetadata.from_props(props, source="m.onnx")


def test_bad_stats_length() -> None:
    props = _meta().to_props()
    props["pairedge.norm_std"] = "[1.0]"
    with pytest.raises(ModelError, match="normalisation"):
        ModelMetadata.from_props(props)


def test_label_sets() -> None:
    assert get_label_set("sim7") is SIM7
    assert SIM7.classes[:3] == tuple(c for c in PAPER3.classes)
    with pytest.raises(ValueError, match="unknown label"):
        PAPER3.index("dancing")


@pytest.mark.parametrize(
    ("key", "raw", "field"),
    [
        ("labels", '"abc"', "labels"),  # must not become a, b, c
        ("labels", "5", "labels"),
        ("labels", '["a", "a", "b"]', "labels"),
        ("labels", '["a", "", "b"]', "labels"),
        ("labels", "[]", "labels"),
        ("norm_mean", '["x", 1.0]', "norm_mean"),
        ("norm_mean", "[NaN, 1.0]", "norm_mean"),
        ("norm_std", "[1.0, 0.0]", "norm_std"),
        ("norm_std", "[1.0, -2.0]", "norm_std"),
        ("norm_std", "[1.0, Infinity]", "norm_std"),
        ("thresholds", '{"p_interact": "abc"}', "thresholds"),
        ("thresholds", '{"p_interact": NaN}', "thresholds"),
        ("thresholds", '{"p_interact": -1}', "thresholds"),
        ("thresholds", '{"p_interact": 1.5}', "thresholds"),
        ("thresholds", "[0.5]", "thresholds"),
        ("stage", '"2"', "stage"),
        ("stage", "true", "stage"),
        ("num_features", "2.0", "num_features"),
        ("extra", "[]", "extra"),
        ("labels", "[" * 100_000, "labels"),  # deep nesting: not a RecursionError
        ("stage", "9" * 5000, "stage"),  # too long an integer for int(): not a bare ValueError
        ("labels", str([f"c{i % 50000}" for i in range(100_000)]).replace("'", '"'), "labels"),  # fast, short
    ],
)
def test_tampered_metadata_is_a_one_line_error(key: str, raw: str, field: str) -> None:
    props = _meta().to_props()
    props["pairedge." + key] = raw
    with pytest.raises(ModelError) as info:
        ModelMetadata.from_props(props, source="m.onnx")
    message = str(info.value)
    assert message.startswith("m.onnx:") and f"pairedge.{field}" in message and "\n" not in message


def test_validated_accepts_what_export_writes() -> None:
    meta = _meta()
    assert meta.validated("x") == meta
    with pytest.raises(ModelError, match="labels"):
        ModelMetadata(**{**meta.__dict__, "labels": "abc"}).validated("x")
