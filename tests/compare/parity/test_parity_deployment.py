"""check_pack takes the candidate as one Deployment: the same report as a folder with CheckOptions' names,
flow "auto" still meaning the pack's reference flow, and the settings refused when given twice."""

from __future__ import annotations

from pathlib import Path

import pytest
from pairedge.compare.parity import CheckOptions, check_pack, load_pack
from pairedge.compare.parity.build import build_pack
from pairedge.compare.parity.check import reference_flow
from pairedge.core.bundled import default_model_dir
from pairedge.core.errors import InputError
from pairedge.runtime import Deployment, PipelineConfig


def test_a_deployment_checks_as_the_folder_with_options_does(pack_path: Path) -> None:
    pk = load_pack(pack_path)
    by_options = check_pack(
        pk, default_model_dir(), CheckOptions(model_only=True)
    )  # a folder: Deployment(folder)
    by_value = check_pack(pk, Deployment(backend="ort-cpu"), CheckOptions(model_only=True))
    assert by_value.passed and by_options.passed
    assert [lv.status for lv in by_value.levels] == [lv.status for lv in by_options.levels]
    assert by_value.candidate["model"] == by_options.candidate["model"] == str(default_model_dir())
    assert by_value.candidate["pipeline"]["stage1"] == by_options.candidate["pipeline"]["stage1"]


def test_auto_flow_is_the_references_and_a_named_one_wins(pack_path: Path) -> None:
    reference = load_pack(pack_path).reference
    assert reference["flow"]["name"] not in (None, "none")
    auto, config = reference_flow(Deployment(), reference, PipelineConfig())
    assert auto.flow == reference["flow"]["name"]
    assert (config.flow.preset, config.flow.scale) == (
        reference["flow"]["preset"],
        reference["flow"]["scale"],
    )
    named = Deployment(flow="farneback")
    assert reference_flow(named, reference, PipelineConfig()) == (named, PipelineConfig())
    assert reference_flow(Deployment(), {"flow": {"name": "none"}}, PipelineConfig())[0].flow == "auto"


def test_settings_are_typed_once(pack_path: Path) -> None:
    """The candidate's precision and backends live in the Deployment only; options cannot name them again."""
    assert set(CheckOptions.__dataclass_fields__) == {"model_only", "tolerances"}
    with pytest.raises(TypeError):
        CheckOptions(precision="fp16")  # type: ignore[call-arg]
    with pytest.raises(InputError, match="precision"):
        build_pack(Deployment(precision="fp16"), None, pack_path.with_name("never.npz"))
