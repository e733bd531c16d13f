"""The pack file: round trip, no pickle, and one clear error for every kind of bad file; the CLI."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from pairedge.apps.cli import app
from pairedge.compare.parity import PACK_FORMAT, load_pack, save_pack
from pairedge.core.bundled import default_model_dir
from pairedge.core.errors import FormatError
from typer.testing import CliRunner

runner = CliRunner()


def test_pack_holds_clip_reference_truth_and_identity(pack_path: Path) -> None:
    pk = load_pack(pack_path)
    assert pk.num_frames == 12 and len(pk.detections) == 12
    assert pk.image(0).shape == (480, 640, 3) and pk.image(0).dtype == np.uint8
    assert pk.rows.stage1_features.shape[1] == len(pk.identity["stage1_feature_names"])
    assert pk.rows.stage2_logits.shape == (len(pk.rows), 3)
    assert pk.labels == ("walking_together", "standing_together", "sitting_together")
    assert pk.has_truth and set(np.unique(pk.truth_interacting)) <= {0, 1}
    assert (pk.truth_label[pk.truth_interacting == 0] == -1).all()
    assert pk.reference["flow"]["name"] == "dis" and pk.reference["precision"] == "fp32"
    assert pk.reference["image_size"] == [640, 480] and not pk.reference["box_only"]
    assert len(pk.identity["stage2_sha256"]) == 64
    # the stored frames are lossless: the first frame decodes to the simulator's pixels
    from pairedge.measure.sim import Scene

    first = next(Scene("static", 0).frames(1)).image
    assert np.array_equal(pk.image(0), first)


def test_round_trip_is_exact(pack_path: Path, tmp_path: Path) -> None:
    pk = load_pack(pack_path)
    again = load_pack(save_pack(pk, tmp_path / "copy.npz"))
    assert again.identity == pk.identity and again.reference == pk.reference
    for name in ("stage1_features", "stage2_logits", "pairs", "label"):
        assert np.array_equal(getattr(again.rows, name), getattr(pk.rows, name))
    assert all(np.array_equal(a.boxes, b.boxes) for a, b in zip(again.detections, pk.detections, strict=True))
    assert not (tmp_path / "copy.npz.partial").exists()


def test_detection_orientation_survives_the_pack(pack_path: Path, tmp_path: Path) -> None:
    """Body orientation reaches the spec v2 features, so the pack keeps it (NaN / 0 where unknown)."""
    from dataclasses import replace

    from pairedge.core.types import Detections

    pk = load_pack(pack_path)
    first = pk.detections[0]
    ori = np.linspace(-3.0, 3.0, len(first)).astype(np.float32)
    ori[0] = np.nan
    conf = np.where(np.isnan(ori), 0.0, 0.8).astype(np.float32)
    dets = (Detections.from_arrays(first.boxes, first.track_ids, first.scores, ori, conf), *pk.detections[1:])
    again = load_pack(save_pack(replace(pk, detections=dets), tmp_path / "ori.npz"))
    got = again.detections[0]
    np.testing.assert_array_equal(got.orientation, ori)
    np.testing.assert_array_equal(got.orientation_conf, conf)
    assert (
        np.isnan(again.detections[1].orientation).all() and (again.detections[1].orientation_conf == 0).all()
    )
    with pytest.raises(FormatError, match="det_orientation.*expected shape"):
        load_pack(_rewrite(pack_path, tmp_path / "short.npz", det_orientation=np.zeros(1, np.float32)))


def _rewrite(src: Path, dst: Path, **changes: object) -> Path:
    with np.load(src, allow_pickle=False) as npz:
        data = {k: npz[k] for k in npz.files}
    for k, v in changes.items():
        if v is None:
            data.pop(k)
        else:
            data[k] = v  # type: ignore[assignment]
    np.savez(dst, **data)  # type: ignore[arg-type]
    return dst


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"format": np.array("something-else")}, "format is"),
        ({"version": np.array(99)}, "layout version 99"),
        ({"stage2_logits": None}, "array 'stage2_logits'"),
        ({"pairs": np.zeros((3, 2), np.int64)}, "expected shape"),
        ({"identity": np.array("{not json")}, "not valid JSON"),
        ({"stage1_logits": np.full((1, 2), np.nan, np.float32)}, "expected shape|NaN"),
        ({"det_boxes": np.object_}, ""),
    ],
)
def test_bad_packs_raise_format_error(pack_path: Path, tmp_path: Path, changes: dict, match: str) -> None:
    if "det_boxes" in changes:  # an object array: refused without unpickling
        changes = {"det_boxes": np.array([{"a": 1}], dtype=object)}
        with np.load(pack_path, allow_pickle=False) as npz:
            data = {k: npz[k] for k in npz.files}
        data.update(changes)
        np.savez(tmp_path / "bad.npz", **data, allow_pickle=True)  # type: ignore[arg-type]
        with pytest.raises(FormatError, match="not a readable parity pack"):
            load_pack(tmp_path / "bad.npz")
        return
    with pytest.raises(FormatError, match=match):
        load_pack(_rewrite(pack_path, tmp_path / "bad.npz", **changes))


def test_truncated_and_missing_packs(pack_path: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.npz"
    cut.write_bytes(pack_path.read_bytes()[: pack_path.stat().st_size // 2])
    with pytest.raises(FormatError, match="truncated or corrupt"):
        load_pack(cut)
    with pytest.raises(FormatError, match="not found"):
        load_pack(tmp_path / "nope.npz")
    assert zipfile.is_zipfile(pack_path)
    assert json.loads(str(np.load(pack_path)["identity"]))["feature_spec"] == "pairedge"
    assert str(np.load(pack_path)["format"]) == PACK_FORMAT


def test_cli_pack_then_check_pass_and_reports(tmp_path: Path) -> None:
    pack = tmp_path / "p.npz"
    res = runner.invoke(
        app, ["parity", "pack", str(default_model_dir()), "--out", str(pack), "--frames", "4"]
    )
    assert res.exit_code == 0, res.output
    assert "4 frames" in res.output and pack.is_file()
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    res = runner.invoke(
        app, ["parity", "check", str(pack), str(default_model_dir()), "--json", str(js), "--md", str(md)]
    )
    assert res.exit_code == 0, res.output
    assert "PASS" in res.output
    assert json.loads(js.read_text())["verdict"] == "PASS"
    assert md.read_text().startswith("# Parity check")


def test_cli_check_fail_exit_code_and_bad_input(pack_path: Path, tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["parity", "check", str(pack_path), str(default_model_dir()), "--flow", "farneback"]
    )
    assert res.exit_code == 1 and "FAIL at features" in res.output
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"PK\x03\x04 not really")
    res = runner.invoke(app, ["parity", "check", str(bad), str(default_model_dir())])
    assert res.exit_code == 1 and "error:" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["parity", "check", str(pack_path), str(tmp_path / "missing")])
    assert res.exit_code == 1 and "error:" in res.output
    fp32_only = tmp_path / "fp32"  # the bundled folder ships int8 files: a folder without them
    fp32_only.mkdir()
    for stage in (1, 2):
        shutil.copy(default_model_dir() / f"stage{stage}.onnx", fp32_only)
    res = runner.invoke(app, ["parity", "check", str(pack_path), str(fp32_only), "--precision", "int8"])
    assert res.exit_code == 1 and "int8" in res.output


def test_check_side_imports_no_torch() -> None:
    """The robot side (pack reading, replay, levels, report) never imports torch."""
    import subprocess
    import sys

    code = (
        "import sys, pairedge.compare.parity, pairedge.compare.parity.check, pairedge.apps.cli.parity; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_cli_refuses_other_model_and_unavailable_backend(pack_path: Path, tmp_path: Path) -> None:
    from parity_helpers import make_candidate

    def other(m, props):  # type: ignore[no-untyped-def]
        props["pairedge.data_fingerprint"] = "sha256:" + "1" * 64

    res = runner.invoke(app, ["parity", "check", str(pack_path), str(make_candidate(tmp_path, {1: other}))])
    assert res.exit_code == 1 and "pack from another model" in res.output
    assert len([ln for ln in res.output.splitlines() if ln.startswith("error:")]) == 1
    res = runner.invoke(
        app, ["parity", "check", str(pack_path), str(default_model_dir()), "--backend", "tensorrt"]
    )
    assert res.exit_code == 1 and "error:" in res.output and "Traceback" not in res.output
