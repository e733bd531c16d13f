"""The model folder's manifest (SPEC section 5): hashes written at export, verified on load."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from pairedge.core.bundled import default_model_dir
from pairedge.core.errors import ModelError, ModelIntegrityError, PairedgeError
from pairedge.core.modelfolder import (
    MANIFEST_NAME,
    FileEntry,
    Manifest,
    read_manifest,
    register_files,
    sha256_file,
    verify_files,
    write_manifest,
)
from rt_onnx_models import write_toy_model

ROLES = {"stage1.onnx": "stage1", "stage2.onnx": "stage2"}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    out = tmp_path / "model"
    write_toy_model(out / "stage1.onnx", 1)
    write_toy_model(out / "stage2.onnx", 2, seed=1, thresholds={"tau_group": 0.7})
    return out


def _flip_bit(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_sha256_file_matches_hashlib(tmp_path: Path) -> None:
    f = tmp_path / "x.bin"
    f.write_bytes(b"pairedge" * 300_000)  # > 1 chunk
    assert sha256_file(f) == hashlib.sha256(f.read_bytes()).hexdigest()


def test_write_manifest_records_hashes_and_summary(folder: Path) -> None:
    manifest = write_manifest(folder, ROLES)
    assert issubclass(ModelIntegrityError, ModelError) and issubclass(ModelIntegrityError, PairedgeError)
    assert manifest.feature_spec == "liang2026" and manifest.feature_spec_version
    assert manifest.labels == ("walking_together", "standing_together", "sitting_together")
    assert manifest.thresholds == {"p_interact": 0.5, "tau_group": 0.5}  # stage 1 wins over stage 2
    entry = manifest.files["stage1.onnx"]
    assert entry == FileEntry(
        "stage1.onnx",
        "stage1",
        hashlib.sha256((folder / "stage1.onnx").read_bytes()).hexdigest(),
        (folder / "stage1.onnx").stat().st_size,
    )
    assert read_manifest(folder) == manifest
    data = json.loads((folder / MANIFEST_NAME).read_text())
    assert {f["name"]: f["role"] for f in data["files"]} == ROLES
    assert verify_files(folder) == manifest


def test_register_keeps_other_entries_and_creates(folder: Path) -> None:
    assert read_manifest(folder) is None
    register_files(folder, {"stage1.onnx": "stage1"})
    (folder / "calibration.json").write_text("{}")
    manifest = register_files(folder, {"stage2.onnx": "stage2", "calibration.json": "calibration"})
    assert set(manifest.files) == {"stage1.onnx", "stage2.onnx", "calibration.json"}
    assert manifest.by_role("calibration") == manifest.files["calibration.json"]
    (folder / "calibration.json").write_text('{"changed": 1}')
    with pytest.raises(ModelIntegrityError, match="calibration.json"):
        verify_files(folder)
    register_files(folder, {"calibration.json": "calibration"})
    verify_files(folder)


def test_bit_flip_is_refused_with_both_hashes(folder: Path) -> None:
    manifest = write_manifest(folder, ROLES)
    _flip_bit(folder / "stage1.onnx", (folder / "stage1.onnx").stat().st_size // 2)
    with pytest.raises(ModelIntegrityError) as info:
        verify_files(folder, ["stage1.onnx"])
    message = str(info.value)
    assert "stage1.onnx" in message and manifest.files["stage1.onnx"].sha256 in message
    assert sha256_file(folder / "stage1.onnx") in message
    assert "copy the model folder again" in message and "\n" not in message
    verify_files(folder, ["stage2.onnx"])  # the other file is fine


def test_missing_unlisted_and_no_manifest(folder: Path) -> None:
    with pytest.raises(ModelIntegrityError, match="no manifest.json"):
        verify_files(folder)
    write_manifest(folder, {"stage1.onnx": "stage1"})
    with pytest.raises(ModelIntegrityError, match="not listed"):
        verify_files(folder, ["stage2.onnx"])
    (folder / "stage1.onnx").unlink()
    with pytest.raises(ModelIntegrityError, match="missing"):
        verify_files(folder)
    with pytest.raises(ModelError, match="does not exist"):
        write_manifest(folder, {"stage1.onnx": "stage1"})


@pytest.mark.parametrize("name", ["../stage1.onnx", "/etc/passwd", "a/../../b"])
def test_names_outside_the_folder_are_refused(folder: Path, name: str) -> None:
    with pytest.raises(PairedgeError, match="inside the model folder"):
        register_files(folder, {name: "stage1"})
    good = write_manifest(folder, ROLES).to_dict()
    good["files"][0]["name"] = name
    (folder / MANIFEST_NAME).write_text(json.dumps(good))
    with pytest.raises(ModelError, match="inside the model folder"):
        read_manifest(folder)


@pytest.mark.parametrize(
    "patch",
    [
        [],
        {"labels": "abc"},
        {"labels": ["a", ""]},
        {"thresholds": {"p_interact": "abc"}},
        {"thresholds": {"p_interact": float("nan")}},
        {"files": {"stage1.onnx": "x"}},
        {"files": [{"name": "stage1.onnx", "role": "stage1", "sha256": "zz", "size": 1}]},
        {"files": [{"name": "stage1.onnx", "role": "stage1", "sha256": "0" * 64, "size": -1}]},
        {"format": 99},
        {"feature_spec": 5},
    ],
)
def test_malformed_manifest_is_a_one_line_model_error(folder: Path, patch: object) -> None:
    data = write_manifest(folder, ROLES).to_dict()
    if isinstance(patch, dict):
        data.update(patch)
    else:
        data = patch
    (folder / MANIFEST_NAME).write_text(json.dumps(data))
    with pytest.raises(ModelError) as info:
        read_manifest(folder)
    assert str(folder / MANIFEST_NAME) in str(info.value) and "\n" not in str(info.value)


def test_manifest_with_too_long_an_integer_is_a_model_error(folder: Path) -> None:
    (folder / MANIFEST_NAME).write_text('{"format": ' + "9" * 5000 + "}")  # beyond int()'s digit limit
    with pytest.raises(ModelError, match="not valid JSON"):
        read_manifest(folder)


def test_manifest_round_trips(folder: Path) -> None:
    manifest = write_manifest(folder, ROLES)
    assert Manifest.from_dict(json.loads(json.dumps(manifest.to_dict()))) == manifest
    assert Manifest.load(folder) == Manifest.load(folder / MANIFEST_NAME) == manifest


def test_shipped_default_model_has_a_valid_manifest(tmp_path: Path) -> None:
    manifest = verify_files(default_model_dir())
    assert {manifest.files[n].role for n in ("stage1.onnx", "stage2.onnx")} == {"stage1", "stage2"}
    assert manifest.feature_spec == "pairedge"
    copy = tmp_path / "default"
    shutil.copytree(default_model_dir(), copy)
    _flip_bit(copy / "stage2.onnx", 100)
    with pytest.raises(ModelIntegrityError, match="stage2.onnx"):
        verify_files(copy)


# -- loading through the runtime -----------------------------------------------------------------------------
def test_find_models_verifies_the_manifest(folder: Path) -> None:
    from pairedge.runtime.loading import find_models

    unverified = find_models(folder)
    assert not unverified.verified and unverified.integrity.startswith("unverified")
    write_manifest(folder, ROLES)
    pair = find_models(folder)
    assert pair.verified and pair.integrity.startswith("verified") and pair.precision == "fp32"
    loose = find_models([folder / "stage1.onnx", folder / "stage2.onnx"])
    assert loose.verified
    _flip_bit(folder / "stage1.onnx", 40)
    with pytest.raises(ModelIntegrityError, match="stage1.onnx"):
        find_models(folder)
    with pytest.raises(ModelIntegrityError, match="stage1.onnx"):
        find_models([folder / "stage1.onnx", folder / "stage2.onnx"])


def test_a_model_file_symlinked_out_of_its_folder_is_refused(folder: Path) -> None:
    """A stage file that links outside the folder is refused like external data that leaves it (issue 22);
    a link that stays inside the folder is checked against the manifest like the file itself."""
    from pairedge.runtime.loading import find_models

    write_manifest(folder, ROLES)
    elsewhere = folder.parent / "elsewhere"  # a folder without a manifest
    elsewhere.mkdir()
    (folder / "stage1.onnx").rename(elsewhere / "stage1.onnx")
    (folder / "stage1.onnx").symlink_to(elsewhere / "stage1.onnx")
    with pytest.raises(ModelIntegrityError, match="outside the model folder"):
        find_models(folder)
    (folder / "stage1.onnx").unlink()
    (folder / "store").mkdir()
    (elsewhere / "stage1.onnx").rename(folder / "store" / "stage1.onnx")
    (folder / "stage1.onnx").symlink_to(folder / "store" / "stage1.onnx")
    assert find_models(folder).verified  # same bytes, inside the folder: verified by its manifest
    _flip_bit(folder / "store" / "stage1.onnx", 40)
    with pytest.raises(ModelIntegrityError, match="stage1.onnx"):
        find_models(folder)


def test_pipeline_load_picks_the_precision_files(folder: Path) -> None:
    from pairedge.runtime import Pipeline

    write_manifest(folder, ROLES)
    with pytest.raises(ModelError, match="pairedge calibrate"):
        Pipeline.load(folder, precision="int8")
    with pytest.raises(PairedgeError, match="precision: expected one of fp32, fp16, int8"):
        Pipeline.load(folder, precision="int4")
    for stage in (1, 2):  # stand-ins for calibrated files: real ONNX models with their own weights
        write_toy_model(folder / f"stage{stage}.fp16.onnx", stage, seed=10 + stage)
    with pytest.raises(ModelIntegrityError, match="not listed"):
        Pipeline.load(folder, precision="fp16")
    register_files(folder, {"stage1.fp16.onnx": "stage1.fp16", "stage2.fp16.onnx": "stage2.fp16"})
    with Pipeline.load(folder, "onnxruntime", precision="fp16") as pipe:
        assert pipe.models.stage1.path.name == "stage1.fp16.onnx"
        assert pipe.models.precision == "fp16" and pipe.models.verified
    with Pipeline.load(folder, "onnxruntime") as pipe:
        assert pipe.models.stage2.path.name == "stage2.onnx"


def test_roles_must_match_the_stage(folder: Path) -> None:
    from pairedge.runtime.loading import find_models

    write_manifest(folder, {"stage1.onnx": "stage2", "stage2.onnx": "stage1"})
    with pytest.raises(ModelIntegrityError, match="records it as 'stage2'"):
        find_models(folder)
    # a role outside the table of artefacts (pairedge.core.artefacts) is no stage file's either
    write_manifest(folder, {"stage1.onnx": "calibration", "stage2.onnx": "stage2"})
    with pytest.raises(ModelIntegrityError, match="records it as 'calibration'"):
        find_models(folder)


def test_manifest_is_readable_by_others(folder: Path) -> None:
    write_manifest(folder, ROLES)
    assert (folder / MANIFEST_NAME).stat().st_mode & 0o777 == 0o644
    assert not list(folder.glob(".manifest-*"))  # no temporary file left behind


def test_run_reports_an_unverified_folder(tmp_path: Path) -> None:
    """`pairedge run` (run_files) says when a model folder has no manifest, and records the check."""
    from pairedge.measure.sim.output import write_scene
    from pairedge.runtime.deployment import Deployment
    from pairedge.runtime.runner.run import RunOptions, run_files

    files = write_scene("static", 3, 4, tmp_path / "sim")
    model = tmp_path / "model"
    write_toy_model(model / "stage1.onnx", 1, spec_name="pairedge", seed=1)
    write_toy_model(model / "stage2.onnx", 2, spec_name="pairedge", seed=2)
    options = RunOptions(Deployment(model), video=False)
    run = run_files(
        tmp_path / "sim" / files.video, tmp_path / "sim" / "gt" / "gt.txt", tmp_path / "a", options
    )
    assert any(n.startswith("unverified:") and "manifest.json" in n for n in run.notes)
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["pipeline"]["model_integrity"].startswith("unverified")
    write_manifest(model, ROLES)
    run = run_files(
        tmp_path / "sim" / files.video, tmp_path / "sim" / "gt" / "gt.txt", tmp_path / "b", options
    )
    assert not any(n.startswith("unverified") for n in run.notes)  # (the tmp path has the word)
    assert run.pipeline["model_integrity"].startswith("verified")


def test_calibrated_files_from_another_fp32_model_are_refused(folder: Path) -> None:
    import onnx
    from pairedge.runtime.loading import find_models
    from rt_onnx_models import toy_metadata, toy_proto, toy_weights

    for stage in (1, 2):
        meta = toy_metadata(stage)
        info = json.dumps({"fp32_sha256": sha256_file(folder / f"stage{stage}.onnx")})
        proto = toy_proto(
            toy_weights(meta.num_features, len(meta.labels), 7),
            meta,
            extra_props={"pairedge.quantization": info},
        )
        onnx.save_model(proto, str(folder / f"stage{stage}.int8.onnx"))
    assert find_models(folder, precision="int8").precision == "int8"
    write_toy_model(folder / "stage1.onnx", 1, seed=99)  # re-exported fp32 model, calibration not redone
    with pytest.raises(ModelIntegrityError, match=r"stage1.int8.onnx: made from another stage1.onnx.*stale"):
        find_models(folder, precision="int8")
    find_models(folder)  # the fp32 pair itself still loads


def test_an_int8_file_beside_an_fp32_file_linked_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    """The staleness check of a calibrated file reads the fp32 file beside it: a symlink out of the folder
    is refused there too (what is checked must travel with the folder)."""
    import shutil

    from pairedge.core.bundled import default_model_dir
    from pairedge.runtime.loading import check_derived_from

    folder = tmp_path / "model"
    folder.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("stage1.int8.onnx", "stage2.int8.onnx"):
        shutil.copy(default_model_dir() / name, folder / name)
    shutil.copy(default_model_dir() / "stage1.onnx", elsewhere / "stage1.onnx")
    (folder / "stage1.onnx").symlink_to(elsewhere / "stage1.onnx")
    with pytest.raises(ModelIntegrityError, match="outside the model folder"):
        check_derived_from([folder / "stage1.int8.onnx", folder / "stage2.int8.onnx"])
