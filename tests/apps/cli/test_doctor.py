"""``pairedge doctor`` on a (fake) Jetson: the JetPack / L4T, power mode, clocks, OpenCV / numpy origin,
rosbags and ray rows in the table and in ``--json``; off a Jetson the same rows say so."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from pairedge.apps import probe as probe_jetson
from pairedge.apps.cli import app
from pairedge.apps.folder_check import LocalGpu, RunOption, inspect_model_folder
from pairedge.core.bundled import default_model_dir
from pairedge.core.errors import FormatError, ModelError, ModelIntegrityError
from pairedge.core.modelfolder import (
    MANIFEST_NAME,
    Manifest,
    load_onnx,
    register_files,
    sha256_file,
    verify_files,
    write_manifest,
)
from pairedge.runtime.loading import find_models
from typer.testing import CliRunner

runner = CliRunner()
JETSON_ROWS = (
    "Jetson L4T / JetPack",
    "Jetson power mode",
    "clocks",
    "OpenCV build",
    "numpy build",
    "rosbags",
    "ray",
    "trackers",
)


def fake_orin(root: Path) -> None:
    (root / "etc").mkdir()
    (root / "etc/nv_tegra_release").write_text("# R36 (release), REVISION: 4.3, GCID: 1, BOARD: generic\n")
    for k in range(4):
        f = root / f"sys/devices/system/cpu/cpu{k}/cpufreq/scaling_cur_freq"
        f.parent.mkdir(parents=True)
        f.write_text("1728000\n")


def commands(argv: list[str], **kw: Any) -> SimpleNamespace:
    out = {"dpkg-query": "6.2.1+b38", "nvpmodel": "NV Power Mode: 25W\n1\n"}[argv[0]]
    return SimpleNamespace(returncode=0, stdout=out, stderr="")


@pytest.fixture()
def on_orin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_orin(tmp_path)
    real = probe_jetson.jetson_checks
    monkeypatch.setattr(probe_jetson, "jetson_checks", lambda: real(tmp_path, commands))


def test_json_has_the_jetson_rows(on_orin: None) -> None:
    res = runner.invoke(app, ["doctor", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert set(JETSON_ROWS) <= set(data)
    assert data["Jetson L4T / JetPack"] == {"ok": True, "detail": "L4T 36.4.3, JetPack 6.2.1"}
    assert data["Jetson power mode"] == {"ok": True, "detail": "25W (mode 1)"}
    assert data["clocks"] == {"ok": True, "detail": "CPU 4 cores 1728 MHz, GPU devfreq not readable"}
    assert list(data)[-len(JETSON_ROWS) :] == list(JETSON_ROWS)  # after the machine's rows, in this order


def test_table_shows_them_in_80_columns(on_orin: None) -> None:
    res = runner.invoke(app, ["doctor"], terminal_width=80)
    assert res.exit_code == 0, res.output
    assert all(len(ln) <= 80 for ln in res.output.splitlines())
    table = {ln.split("│")[1].strip(): ln for ln in res.output.splitlines() if ln.startswith("│")}
    assert "L4T 36.4.3, JetPack 6.2.1" in table["Jetson L4T / JetPack"]
    assert "25W (mode 1)" in table["Jetson power mode"]


def test_off_a_jetson_the_rows_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = probe_jetson.jetson_checks
    monkeypatch.setattr(probe_jetson, "jetson_checks", lambda: real(tmp_path, commands))
    data = json.loads(runner.invoke(app, ["doctor", "--json"]).output)
    assert data["Jetson L4T / JetPack"] == {"ok": False, "detail": probe_jetson.NOT_A_JETSON}
    assert data["Jetson power mode"] == {"ok": False, "detail": probe_jetson.NOT_A_JETSON}


# -- doctor_model_hardening: `pairedge doctor --model` and the model folder's own checks on hostile folders:
# FIFOs, /dev/zero, files that are symlinks out of the folder, a manifest that describes another model, models
# that load but fail on real batches, broken listed files, engine manifests that point outside. Each is
# reported (exit 1), never read, never a hang.


NO_GPU = LocalGpu(None, None, None, "TensorRT is not installed", "no CUDA driver (libcuda) found")


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """A copy of the bundled model's fp32 folder (stage1.onnx, stage2.onnx, recipe.json and a manifest of
    those three; the bundled int8 files are left out: these tests add the files they break)."""
    out = tmp_path / "model"
    out.mkdir()
    roles = {"stage1.onnx": "stage1", "stage2.onnx": "stage2", "recipe.json": "recipe"}
    for name in roles:
        shutil.copy(default_model_dir() / name, out / name)
    write_manifest(out, roles)
    return out


def option(report, precision: str, backend: str) -> RunOption:  # type: ignore[no-untyped-def]
    found = [o for o in report.options if o.precision == precision and o.backend.startswith(backend)]
    assert len(found) == 1, report.options
    return found[0]


def _doctor(path: Path | str) -> tuple[int, str]:
    res = runner.invoke(app, ["doctor", "--model", str(path)])
    return res.exit_code, res.output


# -- files that are not regular files --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["stage2.onnx", MANIFEST_NAME])
def test_fifo_in_the_folder_is_reported_not_opened(folder: Path, name: str, bounded: None) -> None:
    (folder / name).unlink()
    os.mkfifo(folder / name)
    report = inspect_model_folder(folder, gpu=NO_GPU)
    assert any("FIFO" in p for p in report.problems), report.problems
    code, out = _doctor(folder)
    assert code == 1 and "FIFO" in out.replace("\n", " ") and "Traceback" not in out


@pytest.mark.parametrize("name", ["stage1.onnx", MANIFEST_NAME])
def test_dev_zero_in_the_folder_is_reported_not_read(folder: Path, name: str, bounded: None) -> None:
    (folder / name).unlink()
    (folder / name).symlink_to("/dev/zero")
    start = time.monotonic()
    report = inspect_model_folder(folder, gpu=NO_GPU)
    text = " ".join(report.problems)
    assert (
        "outside the model folder" in text and "/dev/zero" in text
    ) or "a character device (a symlink" in text
    assert not option(report, "fp32", "onnxruntime").runs
    assert _doctor(folder)[0] == 1 and time.monotonic() - start < 15


def test_readers_refuse_devices_and_fifos_by_name(tmp_path: Path, bounded: None) -> None:
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (zero, fifo):
        with pytest.raises(FormatError, match="not a regular file"):
            sha256_file(path)
        with pytest.raises(FormatError, match="not a regular file"):
            load_onnx(path)
        with pytest.raises(ModelError, match="not a regular file"):
            Manifest.load(path)


# -- stage files that leave the folder -------------------------------------------------------------------
def test_a_stage_file_symlinked_out_of_the_folder_is_refused_like_external_data(
    folder: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (folder / "stage1.onnx").rename(elsewhere / "stage1.onnx")
    (folder / "stage1.onnx").symlink_to(elsewhere / "stage1.onnx")  # same bytes: the hash would match
    with pytest.raises(ModelIntegrityError, match="outside the model folder"):
        verify_files(folder)
    with pytest.raises(ModelIntegrityError, match="outside the model folder"):
        find_models(folder)
    report = inspect_model_folder(folder, gpu=NO_GPU)
    assert report.integrity.startswith("FAILED") and not report.runnable
    assert _doctor(folder)[0] == 1


def test_a_symlink_inside_the_folder_is_fine(folder: Path) -> None:
    (folder / "stage1.onnx").rename(folder / "real-stage1.onnx")
    (folder / "stage1.onnx").symlink_to("real-stage1.onnx")
    assert find_models(folder).verified


# -- a manifest that describes another model -------------------------------------------------------------
def test_manifest_labels_that_differ_from_the_onnx_metadata_are_broken(folder: Path) -> None:
    data = json.loads((folder / MANIFEST_NAME).read_text())
    data["labels"] = ["fighting", "dancing", "queueing"]  # the files still hash as listed
    (folder / MANIFEST_NAME).write_text(json.dumps(data))
    verify_files(folder)  # hashes alone do not see it
    report = inspect_model_folder(folder, gpu=NO_GPU)
    assert report.integrity.startswith("FAILED") and any("labels" in p for p in report.problems)
    with pytest.raises(ModelIntegrityError, match="records labels"):
        find_models(folder)
    code, out = _doctor(folder)
    assert code == 1 and "broken" in out


# -- models that load but fail on real batches ------------------------------------------------------------
def _toy(path: Path, stage: int, body: Callable[[int, int], tuple[list, list]]) -> None:
    """A pairedge-spec classifier whose graph is ``body(F, C) -> (nodes, initializers)``."""
    from pairedge.core.features import get_spec
    from pairedge.core.labels import PAPER3, STAGE1
    from pairedge.core.modelmeta import ModelMetadata

    spec = get_spec("pairedge")
    f = spec.stage1_dim if stage == 1 else spec.stage2_dim
    labels = STAGE1.classes if stage == 1 else PAPER3.classes
    nodes, inits = body(f, len(labels))
    graph = helper.make_graph(
        nodes,
        "toy",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["pairs", f])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["pairs", len(labels)])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    meta = ModelMetadata(
        stage=stage,
        feature_spec="pairedge",
        feature_spec_version=spec.version,
        labels=labels,
        num_features=f,
        norm_mean=(0.0,) * f,
        norm_std=(1.0,) * f,
    )
    for k, v in meta.to_props().items():
        model.metadata_props.add(key=k, value=v)
    onnx.save(model, str(path))


def _batch_of_one(f: int, c: int) -> tuple[list, list]:
    """Reshape to (1, F): runs on one pair, fails on every real frame with more than one pair."""
    w = np.ones((f, c), np.float32)
    nodes = [
        helper.make_node("Reshape", ["features", "shape"], ["one"]),
        helper.make_node("MatMul", ["one", "w"], ["logits"]),
    ]
    return nodes, [
        numpy_helper.from_array(np.array([1, f], np.int64), "shape"),
        numpy_helper.from_array(w, "w"),
    ]


def _log_of_features(f: int, c: int) -> tuple[list, list]:
    """log(x): finite on a zero row... no: -inf; NaN for the negative values real features have."""
    w = np.ones((f, c), np.float32)
    nodes = [helper.make_node("Log", ["features"], ["l"]), helper.make_node("MatMul", ["l", "w"], ["logits"])]
    return nodes, [numpy_helper.from_array(w, "w")]


@pytest.mark.parametrize(
    ("body", "why"),
    [(_batch_of_one, "on a batch of realistic features"), (_log_of_features, "NaN or inf logits")],
)
def test_a_model_that_fails_on_real_batches_does_not_run_here(tmp_path: Path, body: Any, why: str) -> None:
    from pairedge.core.modelfolder import write_manifest
    from pairedge.runtime.backends.registry import get_backend

    model = tmp_path / "m"
    model.mkdir()
    _toy(model / "stage1.onnx", 1, body)
    _toy(model / "stage2.onnx", 2, body)
    write_manifest(model, {"stage1.onnx": "stage1", "stage2.onnx": "stage2"})
    pair = find_models(model)
    if body is _batch_of_one:  # the one-zero-row probe alone would have said "runs here"
        with get_backend("onnxruntime", pair.stage1) as session:
            assert session.infer(np.zeros((1, pair.stage1.num_features), np.float32)).shape == (1, 2)
    report = inspect_model_folder(model, gpu=NO_GPU)
    reason = str(option(report, "fp32", "onnxruntime").reason)
    assert why in reason and "stage1.onnx" in reason
    assert report.summary() == "nothing in this folder runs on this machine"
    assert any("fails on realistic features on onnxruntime" in p for p in report.problems)
    assert _doctor(model)[0] == 1


def test_realistic_rows_follow_the_normalisation_statistics(folder: Path) -> None:
    from pairedge.apps.folder_check import realistic_rows

    pair = find_models(folder)
    rows = realistic_rows(pair.stage2, 512)
    meta = pair.stage2.metadata
    assert rows.shape == (512, pair.stage2.num_features) and rows.dtype == np.float32
    assert np.allclose(rows.mean(axis=0), meta.norm_mean, atol=0.3 * np.asarray(meta.norm_std) + 1e-6)
    assert len(np.unique(rows[:, 0])) > 100  # not a constant probe


# -- a broken listed file ---------------------------------------------------------------------------------
def test_a_broken_listed_fp16_file_exits_1(folder: Path) -> None:
    for stage in (1, 2):  # valid ONNX, listed with the right hash, but no pairedge metadata
        graph = helper.make_graph(
            [helper.make_node("Identity", ["x"], ["y"])],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        )
        onnx.save(helper.make_model(graph), str(folder / f"stage{stage}.fp16.onnx"))
    register_files(folder, {"stage1.fp16.onnx": "stage1.fp16", "stage2.fp16.onnx": "stage2.fp16"})
    report = inspect_model_folder(folder, gpu=NO_GPU)
    assert option(report, "fp32", "onnxruntime").runs and not option(report, "fp16", "onnxruntime").runs
    assert any(p.startswith("fp16: ") for p in report.problems), report.problems
    code, out = _doctor(folder)
    assert code == 1 and "1 broken file(s)" in out.replace("\n", " ")


def test_half_a_precision_is_broken(folder: Path) -> None:
    shutil.copy(folder / "stage1.onnx", folder / "stage1.int8.onnx")
    report = inspect_model_folder(folder, gpu=NO_GPU)
    assert any("int8" in p and "stage2.int8.onnx" in p for p in report.problems)


# -- engine manifests that point outside -----------------------------------------------------------------
@pytest.mark.parametrize("source", ["../outside.onnx", "/dev/zero"])
def test_engine_manifest_onnx_outside_the_folder_is_not_hashed(
    folder: Path, source: str, bounded: None
) -> None:
    from pairedge.runtime.backends.tensorrt_loader import EngineManifest

    sub = folder / "engines" / "orin-sm87-trt10.3.0"
    sub.mkdir(parents=True)
    (folder.parent / "outside.onnx").write_bytes(b"not yours")
    for stage in (1, 2):
        engine = sub / f"stage{stage}.fp16.engine"
        engine.write_bytes(b"engine bytes")
        EngineManifest(
            stage=stage,
            precision="fp16",
            tensorrt_version="10.3.0.30",
            cuda_version="12.6",
            device_name="Orin",
            compute_capability="8.7",
            profile={"min": 1, "opt": 64, "max": 512},
            onnx={"file": source, "sha256": "0" * 64, "size": 1},
            engine={"file": engine.name, "sha256": sha256_file(engine), "size": engine.stat().st_size},
            labels=("a", "b"),
            feature_spec="pairedge",
            feature_spec_version="2",
            num_features=31,
        ).write(engine)
    report = inspect_model_folder(folder, gpu=LocalGpu("10.3.0.30", "Orin", "8.7"))
    assert not option(report, "fp16", "tensorrt").runs
    assert any("its manifest's ONNX file" in p for p in report.problems), report.problems


def test_engine_manifest_fields_of_the_wrong_type_are_refused(tmp_path: Path) -> None:
    from pairedge.runtime.backends.tensorrt_loader import EngineFileError, EngineManifest

    engine = tmp_path / "stage1.fp16.engine"
    good = {
        "format": 1,
        "stage": 1,
        "precision": "fp16",
        "tensorrt_version": "10.3",
        "cuda_version": "12.6",
        "device_name": "Orin",
        "compute_capability": "8.7",
        "profile": {"min": 1, "opt": 1, "max": 1},
        "onnx": {"file": "stage1.fp16.onnx"},
        "engine": {"size": 1, "sha256": "0" * 64},
        "labels": ["a", "b"],
        "feature_spec": "pairedge",
        "feature_spec_version": "2",
        "num_features": 31,
    }
    for key, value in (("labels", 3), ("engine", {"size": "big"}), ("stage", "one"), ("onnx", [])):
        (tmp_path / "stage1.fp16.engine.json").write_text(json.dumps({**good, key: value}))
        with pytest.raises(EngineFileError, match=repr(key.split(".")[0])[1:-1]):
            EngineManifest.read(engine)


# -- output ------------------------------------------------------------------------------------------------
def test_doctor_output_fits_80_columns_and_names_the_bundled_model() -> None:
    code, out = _doctor("default")
    assert code == 0, out
    lines = out.splitlines()
    assert all(len(ln) <= 80 for ln in lines), [ln for ln in lines if len(ln) > 80]
    assert any(ln.startswith("model folder the bundled model pairedge-default") for ln in lines)
    table = [ln for ln in lines if ln.startswith("│")]
    assert table and all(ln.count("│") in (4, 5) for ln in table)  # one value per cell, no wrapped cells
    assert any("[1]" in ln for ln in table) and any(ln.startswith("  [1] ") for ln in lines)
