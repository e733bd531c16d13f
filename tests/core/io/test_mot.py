"""MOT Challenge reader / writer: real PETS 2009 files, round trip, malformed lines."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io import mot
from pairedge.core.io.mot import read_mot, write_mot


@pytest.mark.data
def test_real_pets_ground_truth(shared_data: Path) -> None:
    gt = read_mot(shared_data / "pets09_s2l1/mot15/gt/gt.txt")
    assert len(gt) == 4650
    assert len(gt.ids()) == 19
    assert len(gt.frames()) == 795 and gt.frames()[0] == 1 and gt.frames()[-1] == 795
    assert gt.extra.shape == (4650, 3)  # x, y, z on the ground plane
    first = gt.by_frame()[1]
    assert first.track_ids.tolist() == [9, 15, 19]
    np.testing.assert_allclose(first.boxes[0], [499, 158, 31.03, 75.17], rtol=1e-6)
    assert (gt.scores == 1).sum() == 4476 and (gt.scores == 0).sum() == 174  # the "consider" flag


@pytest.mark.data
def test_real_pets_detections(shared_data: Path) -> None:
    det = read_mot(shared_data / "pets09_s2l1/mot15/det/det.txt")
    assert len(det) == 5578
    assert (det.track_id == -1).all() and len(det.ids()) == 0
    assert det.scores.dtype == np.float32 and det.scores.max() > 50  # raw ACF scores, not probabilities
    assert sum(len(d) for d in det.by_frame().values()) == 5578
    assert det.line[0] == 1 and det.line[-1] == 5578


def test_round_trip(tmp_path: Path) -> None:
    frame = np.array([1, 1, 2, 5])
    ids = np.array([3, 7, 3, -1])
    boxes = np.array([[10, 20, 30, 60], [100.5, 20.25, 31, 62], [12, 21, 30, 60], [0, 0, 5, 9]], np.float32)
    scores = np.array([1.0, 0.5, 0.875, 0.25], np.float32)
    path = tmp_path / "gt.txt"
    write_mot(path, frame, ids, boxes, scores)
    table = read_mot(path)
    assert table.frame.tolist() == frame.tolist() and table.track_id.tolist() == ids.tolist()
    np.testing.assert_array_equal(table.boxes, boxes)
    np.testing.assert_array_equal(table.scores, scores)
    assert (table.extra == -1).all()
    assert sorted(table.by_frame()) == [1, 2, 5]
    assert path.read_text().splitlines()[0] == "1,3,10,20,30,60,1,-1,-1,-1"


def test_six_columns_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "short.txt"
    path.write_text("1,2,3,4,5,6\n\n2,2,3.5,4,5,6,0.7\n")
    table = read_mot(path)
    assert table.scores.tolist() == pytest.approx([1.0, 0.7])
    assert table.line.tolist() == [1, 3]


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("1,2,3,4,5,6,1\n2,x,3,4,5,6,1\n", 2, "expected numbers"),
        ("1,2,3,4,5\n", 1, "at least 6"),
        ("0,2,3,4,5,6,1\n", 1, "1-based"),
        ("1.5,2,3,4,5,6,1\n", 1, "integer frame"),
        ("1,2.5,3,4,5,6,1\n", 1, "integer track id"),
        ("1,2,3,4,-5,6,1\n", 1, "non-negative width"),
        ("1,2,3,4,5,6,1\n1,2,nan,4,5,6,1\n", 2, "NaN or inf"),
        ("1,2,3,4,5,6,inf\n", 1, "NaN or inf"),
    ],
)
def test_malformed_lines_name_the_file_and_line(tmp_path: Path, text: str, line: int, problem: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(FormatError, match=problem) as info:
        read_mot(path)
    assert info.value.record == line and "bad.txt" in str(info.value)


def test_unreadable_and_bad_writer_input(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="no such file"):
        read_mot(tmp_path / "missing.txt")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(FormatError):
        read_mot(tmp_path / "bin.txt")
    with pytest.raises(InputError, match="1-based"):
        write_mot(tmp_path / "x.txt", [0], [1], [[0, 0, 1, 1]])
    with pytest.raises(InputError, match="equal lengths"):
        write_mot(tmp_path / "x.txt", [1, 2], [1], [[0, 0, 1, 1]])


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_text("\n")
    table = read_mot(path)
    assert len(table) == 0 and table.by_frame() == {} and table.boxes.shape == (0, 4)


# -- io_mot_hardening: MOT reader hardening: byte-order marks, line ends, values beyond int / float ranges,
# complex values, and the block-wise numpy parser agreeing with the line-by-line one across block boundaries.


ROWS = "1,3,10,20,30,60,1,-1,-1,-1\n1,7,100.5,20.25,31,62,0.5,-1,-1,-1\n2,3,12,21,30,60,0.875,-1,-1,-1\n"


def _write(tmp_path: Path, data: bytes | str, name: str = "gt.txt") -> Path:
    path = tmp_path / name
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    return path


def test_utf8_bom_and_crlf_are_accepted(tmp_path: Path) -> None:
    plain = read_mot(_write(tmp_path, ROWS, "plain.txt"))
    bom = read_mot(_write(tmp_path, b"\xef\xbb\xbf" + ROWS.encode(), "bom.txt"))
    crlf = read_mot(_write(tmp_path, b"\xef\xbb\xbf" + ROWS.replace("\n", "\r\n").encode(), "crlf.txt"))
    for table in (bom, crlf):
        np.testing.assert_array_equal(table.boxes, plain.boxes)
        assert table.frame.tolist() == [1, 1, 2] and table.line.tolist() == [1, 2, 3]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("1e20,1,0,0,5,5,1", "frame number below 2\\*\\*53"),
        ("1,1e20,0,0,5,5,1", "track id of magnitude below 2\\*\\*53"),
        ("1,1,0,0,1e300,5,1", "float32 range"),
        ("1,1,0,0,5,5,1e300", "float32 range"),
        ("1,1,0,0,1e400,5,1", "beyond the float64 range"),
        ("1,1,0,0,5+2j,5,1", "complex number"),
    ],
)
def test_out_of_range_values_are_rejected_with_the_true_reason(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], line: str, reason: str
) -> None:
    path = _write(tmp_path, f"1,1,0,0,5,5,1\n{line}\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow / cast warning on the way
        with pytest.raises(FormatError, match=reason) as info:
            read_mot(path)
    assert info.value.record == 2 and "gt.txt" in str(info.value) and line in str(info.value)
    assert capfd.readouterr().err == ""


def test_huge_extra_columns_stay_float64(tmp_path: Path) -> None:
    table = read_mot(_write(tmp_path, "1,1,0,0,5,5,1,1e300,-1,-1\n"))
    assert table.extra[0, 0] == 1e300


def test_whitespace_separated_and_comment_lines(tmp_path: Path) -> None:
    table = read_mot(_write(tmp_path, "# MOT file\n1 3 10 20 30 60 1\n\n   \n2\t3 12 21 30 60 0.5\n"))
    assert table.line.tolist() == [2, 5] and table.scores.tolist() == [1.0, 0.5]


def _blocky_file(rows: int, seed: int = 0) -> str:
    """Comments, blank lines, ragged 6 / 7 / 10 column rows, a trailing comma, spaces around commas."""
    rng = np.random.default_rng(seed)
    out = ["# header"]
    for k in range(rows):
        x, y, w, h = rng.uniform(0, 500, 4).round(2)
        kind = k % 11
        if kind == 3:
            out.append("")
        elif kind == 5:
            out.append(f"{k // 4 + 1},{k % 9},{x},{y},{w},{h}")
        elif kind == 7:
            out.append(f"{k // 4 + 1}, {k % 9} ,{x},{y},{w},{h},0.5,")
        elif kind == 9:
            out.append(f"  # comment {k}")
        else:
            out.append(f"{k // 4 + 1},{k % 9},{x},{y},{w},{h},1,-1,-1,-1")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("block", [64, 300, 1 << 20])
def test_block_parser_matches_line_by_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    text = _blocky_file(400)
    path = _write(tmp_path, text)
    monkeypatch.setattr(mot, "BLOCK_BYTES", block)
    table = read_mot(path)
    lines = text.split("\n")
    expected = [k + 1 for k, s in enumerate(lines) if s.strip() and not s.strip().startswith("#")]
    assert table.line.tolist() == expected
    reference_table, _ = mot._parse_rows(path, [lines[k - 1].strip() for k in expected], np.array(expected))
    np.testing.assert_array_equal(table.frame, reference_table[:, 0].astype(np.int64))
    np.testing.assert_array_equal(table.boxes, reference_table[:, 2:6].astype(np.float32))
    conf = np.where(np.isnan(reference_table[:, 6]), 1.0, reference_table[:, 6])
    np.testing.assert_array_equal(table.scores, conf.astype(np.float32))
    assert table.extra.shape == (len(expected), 3)
    np.testing.assert_array_equal(table.extra, reference_table[:, 7:10])


@pytest.mark.parametrize("block", [64, 1 << 20])
def test_errors_name_the_right_line_across_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    lines = _blocky_file(300).split("\n")
    lines[250] = "1,2,3,4,-5,6,1"
    lines[270] = "1,2,x,4,5,6,1"
    monkeypatch.setattr(mot, "BLOCK_BYTES", block)
    with pytest.raises(FormatError, match="non-negative width") as info:
        read_mot(_write(tmp_path, "\n".join(lines)))
    assert info.value.record == 251


def test_undecodable_bytes_name_the_line(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="UTF-8") as info:
        read_mot(_write(tmp_path, b"1,1,0,0,5,5,1\n1,1,0,0,\xff5,5,1\n"))
    assert info.value.record == 2


def test_writer_rejects_complex_values(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="complex values in boxes"):
        write_mot(tmp_path / "x.txt", [1], [1], np.array([[0, 0, 1 + 2j, 1]]))
    assert not (tmp_path / "x.txt").exists()
