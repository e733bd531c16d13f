"""``pairedge calibrate`` end to end on features files, and its one-line errors that write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from cal_data import model_dir, save_npz
from pairedge.apps.cli import app
from pairedge.calibration.qdq_rules import check_qdq_rules
from pairedge.core.modelfolder import sha256_file, verify_files
from typer.testing import CliRunner

runner = CliRunner()


def _run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["calibrate", str(model_dir()), *args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def features(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("features")
    return save_npz(folder / "s1.npz", 1), save_npz(folder / "s2.npz", 2)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory, features: tuple[Path, Path]) -> Path:
    """The bundled model ('default') calibrated into a new folder."""
    out = tmp_path_factory.mktemp("cal") / "model"
    before = sorted(p.name for p in model_dir().iterdir())
    result = runner.invoke(
        app,
        [
            "calibrate",
            "default",
            "--out",
            str(out),
            "--features",
            str(features[0]),
            "--features",
            str(features[1]),
        ],
    )
    assert result.exit_code == 0, result.output
    assert f"model: the bundled model pairedge-default ({model_dir()})" in result.stdout
    assert sorted(p.name for p in model_dir().iterdir()) == before  # nothing written into the package
    return out


def test_a_new_out_folder_gets_copies_of_the_fp32_files(calibrated: Path) -> None:
    for name in ("stage1.onnx", "stage2.onnx"):
        assert sha256_file(calibrated / name) == sha256_file(model_dir() / name)
    verify_files(model_dir())  # the bundled folder's manifest still matches its files


def test_writes_every_file_registered_in_the_manifest(calibrated: Path) -> None:
    names = {
        "stage1.onnx",
        "stage2.onnx",
        "stage1.int8.onnx",
        "stage2.int8.onnx",
        "stage1.fp16.onnx",
        "stage2.fp16.onnx",
        "calibration.json",
        "calibration.md",
    }
    manifest = verify_files(calibrated)
    assert names <= set(manifest.files)
    roles = {e.role for e in manifest.files.values()}
    assert {"stage1.int8", "stage2.fp16", "calibration"} <= roles
    assert not [p for p in calibrated.parent.iterdir() if p.name.startswith(".")]  # no temp folder left


def test_quantized_models_carry_metadata_and_pass_tensorrt_rules(calibrated: Path) -> None:
    for stage in (1, 2):
        fp32_sha = sha256_file(model_dir() / f"stage{stage}.onnx")
        for precision in ("int8", "fp16"):
            model = onnx.load(str(calibrated / f"stage{stage}.{precision}.onnx"))
            props = {p.key: p.value for p in model.metadata_props}
            assert props["pairedge.precision"] == precision
            assert json.loads(props["pairedge.quantization"])["fp32_sha256"] == fp32_sha
            assert props["pairedge.labels"] and props["pairedge.feature_spec"] == "pairedge"
        assert check_qdq_rules(onnx.load(str(calibrated / f"stage{stage}.int8.onnx"))) == []


def test_runtime_loads_each_precision(calibrated: Path) -> None:
    from pairedge.runtime import Pipeline

    for precision in ("fp32", "fp16", "int8"):
        with Pipeline.load(calibrated, precision=precision) as pipe:
            assert pipe.labels == ("walking_together", "standing_together", "sitting_together")


def test_report_has_ranges_clipping_strata_and_hashes(calibrated: Path) -> None:
    report = json.loads((calibrated / "calibration.json").read_text())
    assert report["method"] in ("minmax", "entropy", "percentile")
    for st in report["stages"].values():
        assert st["tensors"] and all(
            0.0 <= t["clip_rate"] <= 1.0 and t["range"][1] > 0 for t in st["tensors"]
        )
        assert sum(st["strata"]["calibration"].values()) == st["rows"]["calibration"]
        floats = st["float_nodes"]  # the plain statement of what stays in float and what it costs
        assert set(floats["gemms_in_float"]) == set(st["excluded_nodes"]) and floats["gemms"]
        assert all(d["jetson_cost"] and d["why"] for d in floats["nodes"])
        assert 0.0 <= st["held_out"]["int8"]["agreement"] <= 1.0
        assert st["rows"]["search"] + st["rows"]["report"] == st["rows"]["held_out"]
    assert all(len(sha) == 64 for sha in report["inputs_sha256"].values())
    md = (calibrated / "calibration.md").read_text()
    assert "clipping rate" in md and "Gemms run in int8" in md and "on a Jetson" in md


def _fails_cleanly(tmp_path: Path, *args: str, match: str) -> None:
    out = tmp_path / "out"
    code, output = _run("--out", str(out), *args)
    assert code == 1, output
    assert match in output and "Traceback" not in output
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_one_class_only(tmp_path: Path, features: tuple[Path, Path]) -> None:
    data = dict(np.load(features[1]))
    f = save_npz(tmp_path / "one.npz", 2, y=np.zeros_like(data["y"]))
    _fails_cleanly(tmp_path, "--features", str(f), "--features", str(features[0]), match="one class")


def test_nan_features(tmp_path: Path, features: tuple[Path, Path]) -> None:
    data = dict(np.load(features[1]))
    X = data["X"].copy()
    X[2, 5] = np.nan
    f = save_npz(tmp_path / "nan.npz", 2, X=X)
    _fails_cleanly(tmp_path, "--features", str(f), "--features", str(features[0]), match="NaN")


def test_unknown_method_fails_before_collecting(tmp_path: Path) -> None:
    missing = tmp_path / "never-read.npz"  # collecting would report this file: the method is checked first
    _fails_cleanly(tmp_path, "--features", str(missing), "--method", "[red]bogus", match="calibration method")


def test_zero_samples(tmp_path: Path, features: tuple[Path, Path]) -> None:
    _fails_cleanly(tmp_path, "--features", str(features[0]), match="zero calibration samples")


def test_features_of_another_spec_or_label_set(tmp_path: Path, features: tuple[Path, Path]) -> None:
    other_spec = save_npz(tmp_path / "spec.npz", 2, feature_spec=np.asarray("liang2026"))
    _fails_cleanly(tmp_path, "--features", str(other_spec), match="spec 'liang2026'")
    labels = np.asarray(["a", "b", "c"])
    other_labels = save_npz(tmp_path / "labels.npz", 2, labels=labels)
    _fails_cleanly(tmp_path, "--features", str(other_labels), match="another label set")


def test_out_folder_of_another_model(tmp_path: Path, features: tuple[Path, Path], calibrated: Path) -> None:
    out = tmp_path / "other"
    out.mkdir()
    (out / "stage1.onnx").write_bytes(b"not this model")
    code, output = _run("--out", str(out), "--features", str(features[0]), "--features", str(features[1]))
    assert code == 1 and "already holds other files" in output
    assert sorted(p.name for p in out.iterdir()) == ["stage1.onnx"]


def test_strict_fails_on_small_strata(tmp_path: Path, features: tuple[Path, Path]) -> None:
    _fails_cleanly(
        tmp_path,
        "--features",
        str(features[0]),
        "--features",
        str(features[1]),
        "--min-per-stratum",
        "100000",
        "--strict",
        match="too small",
    )


def test_in_place_keeps_the_other_manifest_entries(tmp_path: Path, features: tuple[Path, Path]) -> None:
    import shutil

    from pairedge.core.modelfolder import read_manifest, register_files

    folder = tmp_path / "model"
    shutil.copytree(model_dir(), folder)
    (folder / "notes.txt").write_text("kept")
    register_files(folder, {"notes.txt": "notes"})
    result = runner.invoke(
        app,
        [
            "calibrate",
            str(folder),
            "--out",
            str(folder),
            "--features",
            str(features[0]),
            "--features",
            str(features[1]),
        ],
    )
    assert result.exit_code == 0, result.output
    manifest = verify_files(folder)
    assert manifest.files["notes.txt"].role == "notes" and "stage2.int8.onnx" in manifest.files
    assert read_manifest(folder) is not None and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_report_gives_each_layer_its_range_and_the_multiply_adds(calibrated: Path) -> None:
    from onnx import numpy_helper
    from pairedge.compare.cost import graph_macs

    report = json.loads((calibrated / "calibration.json").read_text())
    for key, st in report["stages"].items():
        weights, macs = st["layers"]["weights"], st["layers"]["macs_per_pair"]
        assert weights and all(w["range"] > 0 and "copies" not in w for w in weights.values())
        in_float = st["float_nodes"]["gemms_in_float"]  # the sweep may keep one in float: its MACs stay float
        assert macs["int8"] == sum(w["int8_macs_per_pair"] for w in weights.values())
        assert macs["int8"] + macs["float"] == macs["fp32"] and (macs["float"] == 0) == (not in_float)
        # int8 Gemm weights keep the fp32 Gemm's shape; the multiply-adds are fp32's (read once)
        fp32 = onnx.load(str(calibrated / f"{key}.onnx"))
        int8 = onnx.load(str(calibrated / f"{key}.int8.onnx"))
        shapes = sorted(numpy_helper.to_array(t).shape for t in fp32.graph.initializer if len(t.dims) == 2)
        q = sorted(
            numpy_helper.to_array(t).shape
            for t in int8.graph.initializer
            if len(t.dims) == 2 and t.data_type == onnx.TensorProto.INT8
        )
        assert q and set(q) <= set(shapes)
        assert graph_macs(int8)["macs_per_pair"] == graph_macs(fp32)["macs_per_pair"] == macs["fp32"]
        assert set(st["cost"]) == {"fp32", "fp16", "int8"}
        assert st["cost"]["int8"]["int8_macs_per_pair"] == macs["int8"]
    md = (calibrated / "calibration.md").read_text()
    assert "multiply-adds per pair" in md and "Cost per precision" in md


@pytest.mark.parametrize(
    ("option", "value", "match"), [("--headroom", "6,0.5", "headroom"), ("--headroom", "1,2,3", "--headroom")]
)
def test_bad_headroom_fails_before_collecting(tmp_path: Path, option: str, value: str, match: str) -> None:
    missing = tmp_path / "never-read.npz"
    _fails_cleanly(tmp_path, "--features", str(missing), option, value, match=match)


def test_copies_is_gone_and_headroom_reaches_the_graph(tmp_path: Path, features: tuple[Path, Path]) -> None:
    code, output = _run("--out", str(tmp_path / "x"), "--features", str(features[0]), "--copies", "1")
    assert code != 0 and "--copies" in output  # the shifted copies were removed (issue 38)
    out = tmp_path / "plain"
    code, output = _run(
        "--out",
        str(out),
        "--features",
        str(features[0]),
        "--features",
        str(features[1]),
        "--headroom",
        "2,3",
        "--target-agreement",
        "0",
    )
    assert code == 0, output
    stage2 = json.loads((out / "calibration.json").read_text())["stages"]["stage2"]["layers"]
    assert {w["headroom"] for w in stage2["weights"].values()} == {2.0, 3.0}
    model = onnx.load(str(out / "stage2.int8.onnx"))
    assert not [n for n in model.graph.node if n.op_type == "Concat" and "copies" in n.name]
    assert "multiply-adds per pair" in output and "cost (ONNX Runtime CPU" in output, output
