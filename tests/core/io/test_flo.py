"""Middlebury .flo reader / writer and the end-point error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import FormatError
from pairedge.core.io.flo import endpoint_error, read_flo, write_flo


def test_roundtrip(tmp_path: Path) -> None:
    flow = np.random.default_rng(0).normal(size=(5, 7, 2)).astype(np.float32)
    write_flo(tmp_path / "a.flo", flow)
    got = read_flo(tmp_path / "a.flo")
    assert got.shape == (5, 7, 2) and got.dtype == np.float32
    np.testing.assert_array_equal(got, flow)
    assert (tmp_path / "a.flo").read_bytes()[:4] == b"PIEH"


def test_malformed_files(tmp_path: Path) -> None:
    flow = np.zeros((4, 3, 2), np.float32)
    write_flo(tmp_path / "a.flo", flow)
    raw = (tmp_path / "a.flo").read_bytes()
    (tmp_path / "trunc.flo").write_bytes(raw[:-4])
    with pytest.raises(FormatError, match="truncated"):
        read_flo(tmp_path / "trunc.flo")
    (tmp_path / "magic.flo").write_bytes(b"XXXX" + raw[4:])
    with pytest.raises(FormatError, match="magic"):
        read_flo(tmp_path / "magic.flo")
    (tmp_path / "short.flo").write_bytes(raw[:6])
    with pytest.raises(FormatError, match="header"):
        read_flo(tmp_path / "short.flo")
    (tmp_path / "size.flo").write_bytes(raw[:4] + np.array([-3, 4], "<i4").tobytes() + raw[12:])
    with pytest.raises(FormatError, match="width and height"):
        read_flo(tmp_path / "size.flo")


def test_endpoint_error_ignores_unknown_and_invalid() -> None:
    truth = np.zeros((2, 2, 2), np.float32)
    truth[0, 0] = 1e10
    flow = np.zeros_like(truth)
    flow[1, 1] = [3.0, 4.0]
    assert endpoint_error(flow, truth) == pytest.approx(5.0 / 3)
    valid = np.ones((2, 2), bool)
    valid[1, 1] = False
    assert endpoint_error(flow, truth, valid) == 0.0


def test_sintel_ground_truth_reads(shared_data: Path) -> None:
    flow = read_flo(shared_data / "sintel" / "clean" / "easy" / "gt" / "frame_0002.flo")
    assert flow.shape == (436, 1024, 2)
    assert np.isfinite(flow).all() and np.abs(flow).max() < 500
