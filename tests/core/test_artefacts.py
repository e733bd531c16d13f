"""The table of deployment artefacts: round trips, strict inverse, and the names the folders on disk use."""

from __future__ import annotations

import doctest

import pytest
from pairedge.core import artefacts
from pairedge.core.artefacts import (
    ARTEFACTS,
    PRECISIONS,
    STAGES,
    UnknownArtefactError,
    artefact,
    by_role,
    find,
    precision_of,
    stage_files,
)
from pairedge.core.bundled import default_model_dir
from pairedge.core.errors import InputError
from pairedge.core.modelfolder import STAGE_FILES, read_manifest


def test_one_record_per_stage_and_precision() -> None:
    assert PRECISIONS == ("fp32", "fp16", "int8")
    assert set(ARTEFACTS) == {(s, p) for s in STAGES for p in PRECISIONS}
    names = [n for a in ARTEFACTS.values() for n in (a.onnx, a.engine, a.engine_manifest, a.role)]
    assert len(names) == len(set(names)), "two records share a file name or role"


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("stage", STAGES)
def test_round_trips(stage: int, precision: str) -> None:
    a = artefact(stage, precision)
    assert (a.stage, a.precision) == (stage, precision)
    for name in (a.onnx, a.engine, f"/some/folder/{a.onnx}", a.engine_path("orin-sm87-trt10.3.0")):
        assert find(name) is a
        assert precision_of(name) == precision
    assert by_role(a.role) is a
    assert stage_files(precision)[stage - 1] == a.onnx
    assert a.engine_manifest == a.engine + ".json"
    assert a.engine_path("t") == f"engines/t/{a.engine}"


def test_the_names_of_every_precision() -> None:
    assert stage_files() == stage_files("fp32") == ("stage1.onnx", "stage2.onnx")
    assert stage_files("fp16") == ("stage1.fp16.onnx", "stage2.fp16.onnx")
    assert stage_files("int8") == ("stage1.int8.onnx", "stage2.int8.onnx")
    assert [artefact(1, p).engine for p in PRECISIONS] == [
        "stage1.fp32.engine",
        "stage1.fp16.engine",
        "stage1.int8.engine",
    ]
    assert [artefact(2, p).role for p in PRECISIONS] == ["stage2", "stage2.fp16", "stage2.int8"]
    assert {a.made_by for a in ARTEFACTS.values() if a.precision == "fp32"} == {"pairedge export"}


@pytest.mark.parametrize(
    "name",
    [
        "stage3.onnx",
        "stage1.bf16.onnx",
        "model.onnx",
        "stage1.fp32.onnx",
        "stage1.engine",
        "calibration.json",
        "",
    ],
)
def test_precision_of_is_strict(name: str) -> None:
    assert find(name) is None
    with pytest.raises(UnknownArtefactError, match="not a model folder artefact; expected one of: "):
        precision_of(name)
    assert issubclass(UnknownArtefactError, InputError)


def test_unknown_stage_or_precision_is_an_input_error() -> None:
    with pytest.raises(InputError, match="precision: expected one of fp32, fp16, int8, got 'fp8'"):
        stage_files("fp8")
    with pytest.raises(InputError, match="stage: expected 1 or 2, got 3"):
        artefact(3, "fp32")
    assert by_role("engine") is None and by_role("stage1.qat") is None


def test_the_bundled_folder_uses_the_table_names() -> None:
    """Every stage file of sdk/models/default, and its manifest role, is the table's."""
    folder = default_model_dir()
    onnx = sorted(p.name for p in folder.glob("*.onnx"))
    assert onnx == sorted(a.onnx for p in ("fp32", "int8") for a in artefacts.stage_artefacts(p))
    manifest = read_manifest(folder)
    assert manifest is not None
    stage_entries = {n: e.role for n, e in manifest.files.items() if n.endswith(".onnx")}
    assert stage_entries == {n: find(n).role for n in onnx}  # type: ignore[union-attr]
    recipe = manifest.files[artefacts.RECIPE_FILE]
    assert recipe.role == artefacts.RECIPE_ROLE
    assert STAGE_FILES == {a.role: a.onnx for a in artefacts.stage_artefacts("fp32")}


def test_backends_are_registered_names() -> None:
    from pairedge.runtime.backends.registry import BACKENDS

    assert set(artefacts.ONNX_BACKENDS) | set(artefacts.ENGINE_BACKENDS) == set(BACKENDS)
    assert not set(artefacts.ONNX_BACKENDS) & set(artefacts.ENGINE_BACKENDS)
    a = artefact(1, "int8")
    assert a.accepts("onnxruntime") and a.accepts("tensorrt") and not a.accepts("ort-cpu")


def test_docstring_examples() -> None:
    assert doctest.testmod(artefacts).failed == 0
