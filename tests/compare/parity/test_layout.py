"""Hostile parity packs, tolerances and pack options: each refused in one line, before the work, bounded."""

from __future__ import annotations

import io
import json
import os
import struct
import time
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pairedge.apps.cli import app
from pairedge.compare.parity import CheckOptions, Tolerances, check_pack, load_pack
from pairedge.core import limits
from pairedge.core.bundled import default_model_dir
from pairedge.core.errors import FormatError, InputError
from typer.testing import CliRunner

runner = CliRunner()


def _arrays(pack: Path) -> dict[str, np.ndarray]:
    with np.load(pack, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def _write(dst: Path, data: dict[str, np.ndarray]) -> Path:
    np.savez(dst, **data)  # type: ignore[arg-type]
    return dst


def _error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


# -- bounded reading -----------------------------------------------------------------------------------
def test_pack_inflating_past_the_ceiling_is_refused_before_inflating(
    pack_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small file whose members declare more than MAX_PACK_BYTES decompressed: refused from the zip
    directory, with no allocation near the declared size (the 4.9 MB -> 2 GB pack, scaled down)."""
    data = _arrays(pack_path)
    data["frame_png"] = np.zeros(8 << 20, np.uint8)  # 8 MiB of zeros: a few kB deflated
    bomb = tmp_path / "bomb.npz"
    np.savez_compressed(bomb, **data)  # type: ignore[arg-type]
    assert bomb.stat().st_size < 1 << 20
    monkeypatch.setattr(limits, "MAX_PACK_BYTES", 4 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match=r"declare .* more than the 4 MiB ceiling"):
            load_pack(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20, peak  # nothing was inflated


def _npy_header(shape: tuple[int, ...], dtype: str) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def test_header_declaring_a_huge_array_is_refused_before_reading(pack_path: Path, tmp_path: Path) -> None:
    """A ``.npy`` header claiming 10^9 timestamps in a member that holds a few bytes."""
    path = _write(tmp_path / "p.npz", _arrays(pack_path))
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("timestamps_big.npy", _npy_header((10**9,), "<f8") + b"\0" * 64)
    with pytest.raises(FormatError, match="header declares shape \\(1000000000,\\)"):
        load_pack(path)


def test_layout_is_checked_on_the_headers(pack_path: Path, tmp_path: Path) -> None:
    """Row counts and widths disagree: refused from the headers (shape named), not after reading."""
    data = _arrays(pack_path)
    data["stage2_features"] = np.zeros((len(data["pair_frame"]), 7), np.float32)
    with pytest.raises(
        FormatError, match=r"'stage2_features': expected shape \(\d+, 61\).*declares \(\d+, 7\)"
    ):
        load_pack(_write(tmp_path / "w.npz", data))


def _patch_sizes(path: Path, member: str, size: int) -> None:
    """Rewrite the uncompressed size a zip records for ``member`` (local header and central directory)."""
    blob = bytearray(path.read_bytes())
    name = member.encode()
    for sig, at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = 0
        while (pos := blob.find(sig, start)) >= 0:
            name_at = pos + (30 if sig == b"PK\x03\x04" else 46)
            if blob[name_at : name_at + len(name)] == name:
                blob[pos + at : pos + at + 4] = struct.pack("<I", size)
            start = pos + 4
    path.write_bytes(bytes(blob))


def test_member_inflating_past_its_declared_size_is_read_bounded(pack_path: Path, tmp_path: Path) -> None:
    """The header and the zip directory agree on 10 timestamps, the deflate stream holds 100,000: only the
    declared bytes are read, and the mismatch (CRC) is a corrupt pack."""
    data = _arrays(pack_path)
    path = tmp_path / "lie.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for key, value in data.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, value, allow_pickle=False)
            zf.writestr(f"{key}.npy", buf.getvalue())
        header = _npy_header((10,), "<f8")
        zf.writestr("extra.npy", header + b"\0" * 800_000)
    _patch_sizes(path, "extra.npy", len(header) + 80)
    assert zipfile.ZipFile(path).getinfo("extra.npy").file_size == len(header) + 80
    from pairedge.core.io.npz import NpzReader

    tracemalloc.start()
    try:
        with pytest.raises(
            FormatError, match="extra.*truncated or corrupt"
        ):  # CRC, as soon as the end is read
            with NpzReader(path, limits.MAX_PACK_BYTES, "parity pack (.npz)") as npz:
                npz.read("extra")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 400_000, peak  # the 800 kB the stream holds were never inflated


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
def test_non_regular_pack_is_one_line(tmp_path: Path, kind: str, non_regular) -> None:
    path = non_regular(tmp_path / "pack.npz", kind)
    start = time.monotonic()
    with pytest.raises(FormatError, match="not a regular file"):
        load_pack(path)
    res = runner.invoke(app, ["parity", "check", str(path), str(default_model_dir())])
    assert res.exit_code == 1 and len(_error_lines(res.output)) == 1 and "not a regular file" in res.output
    assert time.monotonic() - start < 30  # never blocks on the FIFO nor reads the device


def test_frame_declaring_a_huge_image_is_refused(pack_path: Path, tmp_path: Path) -> None:
    data = _arrays(pack_path)
    png = bytearray(data["frame_png"][: int(data["frame_offsets"][1])].tobytes())
    png[16:24] = struct.pack(">II", 20_000, 20_000)  # the IHDR's width x height
    data["frame_png"] = np.concatenate([np.frombuffer(bytes(png), np.uint8), data["frame_png"][len(png) :]])
    with pytest.raises(FormatError, match=r"frame 0.*20000 x 20000 pixels"):
        load_pack(_write(tmp_path / "big.npz", data))


# -- a reference is never NaN --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("p_interact", np.nan),
        ("det_boxes", np.inf),
        ("timestamps", np.nan),
        ("det_scores", np.nan),
        ("stage2_logits", np.nan),
        ("det_orientation", np.inf),
    ],
)
def test_nan_in_the_reference_is_a_corrupt_pack(
    pack_path: Path, tmp_path: Path, key: str, value: float
) -> None:
    data = _arrays(pack_path)
    arr = data[key].copy()
    arr.reshape(len(arr), -1)[0, 0] = value
    data[key] = arr
    bad = _write(tmp_path / "nan.npz", data)
    with pytest.raises(FormatError, match=f"'{key}'.*(NaN|inf)"):
        load_pack(bad)
    res = runner.invoke(app, ["parity", "check", str(bad), str(default_model_dir()), "--model-only"])
    assert res.exit_code == 1 and "PASS" not in res.output and len(_error_lines(res.output)) == 1


@pytest.mark.parametrize(
    "edit",
    [
        lambda i: i["norm"]["stage2"]["std"].__setitem__(0, float("nan")),
        lambda i: i["norm"]["stage1"]["std"].__setitem__(0, 0.0),
        lambda i: i.__setitem__("labels", []),
        lambda i: i.__setitem__("stage1_sha256", "xyz"),
    ],
)
def test_malformed_identity_is_refused(pack_path: Path, tmp_path: Path, edit: Any) -> None:
    data = _arrays(pack_path)
    identity = json.loads(str(data["identity"]))
    edit(identity)
    data["identity"] = np.array(json.dumps(identity))  # json.dumps writes NaN as the bare word NaN
    with pytest.raises(FormatError, match="identity"):
        load_pack(_write(tmp_path / "id.npz", data))


@pytest.mark.parametrize("field", ["tau_interact", "smoothing_alpha"])
def test_malformed_reference_is_refused(pack_path: Path, tmp_path: Path, field: str) -> None:
    data = _arrays(pack_path)
    reference = json.loads(str(data["reference"]))
    reference[field] = float("nan")
    data["reference"] = np.array(json.dumps(reference))
    with pytest.raises(FormatError, match="reference"):
        load_pack(_write(tmp_path / "ref.npz", data))


def test_out_of_range_labels_and_duplicate_pairs_are_refused(pack_path: Path, tmp_path: Path) -> None:
    data = _arrays(pack_path)
    label = data["label"].copy()
    label[0] = 7
    with pytest.raises(FormatError, match="'label'.*expected values in \\[-1, 2\\]"):
        load_pack(_write(tmp_path / "l.npz", {**data, "label": label}))
    pairs, frames = data["pairs"].copy(), data["pair_frame"].copy()
    pairs[1], frames[1] = pairs[0], frames[0]
    with pytest.raises(FormatError, match="listed twice"):
        load_pack(_write(tmp_path / "d.npz", {**data, "pairs": pairs, "pair_frame": frames}))


# -- a pack from another model never passes ----------------------------------------------------------------
def test_pack_claiming_other_hashes_does_not_pass(pack_path: Path, tmp_path: Path) -> None:
    data = _arrays(pack_path)
    identity = json.loads(str(data["identity"]))
    identity["stage1_sha256"], identity["stage2_sha256"] = "a" * 64, "b" * 64
    data["identity"] = np.array(json.dumps(identity))
    other = _write(tmp_path / "other.npz", data)
    report = check_pack(other, default_model_dir(), CheckOptions(model_only=True))
    assert not report.passed and not report.identity_verified
    assert report.candidate["relation"] == "unverified"
    assert all(lv.status != "FAIL" for lv in report.levels)  # the levels alone would have passed
    assert report.verdict().startswith("FAIL: model mismatch: the model's files (SHA-256")
    assert "aaaaaaaaaaaa/bbbbbbbbbbbb" in report.verdict()
    assert report.to_dict()["verdict"] == "FAIL"
    res = runner.invoke(app, ["parity", "check", str(other), str(default_model_dir()), "--model-only"])
    assert res.exit_code == 1 and "FAIL: model mismatch" in res.output and "PASS:" not in res.output


def test_nan_candidate_logits_fail_at_logits(pack_path: Path, tmp_path: Path) -> None:
    from parity_helpers import make_candidate, set_initializer

    def zero_std(m, props):  # type: ignore[no-untyped-def]  # (x - mean) / 0: every logit inf / NaN
        set_initializer(m, "norm.std", lambda s: np.zeros_like(s))

    report = check_pack(pack_path, make_candidate(tmp_path, {2: zero_std}), CheckOptions(model_only=True))
    assert not report.passed and report.first_failure is not None
    assert report.first_failure.name == "logits"
    assert "stage2 logits are NaN or inf" in report.first_failure.problems[0]


# -- tolerances ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"feature_p99_z": float("nan")}, "features level, 'feature_p99_z' must be a finite number >= 0"),
        ({"logit_max": {"int8": float("nan")}}, "logits level, \"logit_max\\['int8'\\]\""),
        ({"logit_p99": {"fp16": float("inf")}}, "logits level"),
        ({"task_drop": {"mpca": -0.1}}, "task level, \"task_drop\\['mpca'\\]\""),
        ({"gate_agreement": 1.5}, "labels level, 'gate_agreement' must be a finite number in \\[0, 1\\]"),
        ({"logit_max": {"int4": 1.0}}, "unknown key"),
        ({"pair_coverage": 10**400}, "features level"),
    ],
)
def test_every_tolerance_is_a_finite_number(values: dict, match: str) -> None:
    with pytest.raises(InputError, match=match):
        Tolerances.from_dict(values)


def test_tolerances_are_checked_when_constructed_too() -> None:
    with pytest.raises(InputError, match="labels level, 'top1_agreement'"):
        Tolerances(top1_agreement=float("nan"))
    with pytest.raises(InputError, match="expected an object with the keys"):
        Tolerances(logit_max={"int8": 1.0})


def test_cli_nan_tolerances_file_is_one_line(pack_path: Path, tmp_path: Path) -> None:
    tol = tmp_path / "tol.json"
    tol.write_text('{"feature_mean_z": NaN}')
    res = runner.invoke(
        app, ["parity", "check", str(pack_path), str(default_model_dir()), "--tolerances", str(tol)]
    )
    assert res.exit_code == 1 and len(_error_lines(res.output)) == 1
    assert "features level, 'feature_mean_z'" in res.output and "PASS" not in res.output
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    res = runner.invoke(
        app, ["parity", "check", str(pack_path), str(default_model_dir()), "--tolerances", str(fifo)]
    )
    assert res.exit_code == 1 and "FIFO" in res.output


# -- parity pack options -----------------------------------------------------------------------------------
def test_pack_frames_ceiling_is_checked_before_anything_runs(tmp_path: Path) -> None:
    out = tmp_path / "p.npz"
    start = time.monotonic()
    res = runner.invoke(app, ["parity", "pack", "default", "--out", str(out), "--frames", "100000000"])
    assert res.exit_code == 1 and len(_error_lines(res.output)) == 1 and "ceiling" in res.output
    video = tmp_path / "missing.mp4"  # the ceiling comes before the clip is even looked at
    res = runner.invoke(
        app,
        [
            "parity",
            "pack",
            "default",
            "--out",
            str(out),
            "--video",
            str(video),
            "--detections",
            str(tmp_path / "d.txt"),
            "--frames",
            "100000000",
        ],
    )
    assert res.exit_code == 1 and "100,000,000 frames" in res.output
    assert time.monotonic() - start < 20 and not out.exists()


def test_build_pack_refuses_too_many_frames_for_any_source(tmp_path: Path) -> None:
    from pairedge.compare.parity.build import build_pack

    with pytest.raises(InputError, match="--frames: 100,000,000 frames"):
        build_pack(default_model_dir(), object(), tmp_path / "p.npz", frames=100_000_000)


def test_pack_stops_when_its_frames_pass_the_pack_ceiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pairedge.apps.evaluation.sources import parse_scene
    from pairedge.compare.parity.build import build_pack

    monkeypatch.setattr(limits, "MAX_PACK_BYTES", 200_000)  # one 640 x 480 simulator frame is ~270 kB
    with pytest.raises(InputError, match="ceiling of a parity pack"):
        build_pack(default_model_dir(), parse_scene("static:0", 4), tmp_path / "p.npz", frames=4)
    assert not (tmp_path / "p.npz").exists()


def test_pack_boxes_is_a_choice(tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["parity", "pack", "default", "--out", str(tmp_path / "p.npz"), "--boxes", "bogus"]
    )
    assert res.exit_code == 2 and "bogus" in res.output and "truth" in res.output
    assert len(_error_lines(res.output)) == 1


def test_check_output_fits_80_columns_and_has_no_progress_residue(pack_path: Path) -> None:
    res = runner.invoke(app, ["parity", "check", str(pack_path), "default", "--flow", "farneback"])
    assert res.exit_code == 1
    lines = res.output.splitlines()
    verdict = [ln for ln in lines if ln.startswith("FAIL at features")]
    assert len(verdict) == 1  # the one verdict line (soft-wrapped: one line in a log)
    assert all(len(ln) <= 80 for ln in lines if ln not in verdict), [ln for ln in lines if len(ln) > 80]
    assert "\r" not in res.output and "\x1b" not in res.output
    assert sum("replaying" in ln for ln in lines) == 2  # one start and one end line when piped
    assert any(ln.startswith("  features: ") for ln in lines) and "flow backend differs" in res.output


def test_report_into_a_fifo_is_refused_not_blocked(pack_path: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    args = ["parity", "check", str(pack_path), "default", "--model-only", "--json", str(fifo)]
    res = runner.invoke(app, args)
    assert res.exit_code == 1 and "FIFO" in res.output and len(_error_lines(res.output)) == 1
