"""MOT Challenge reader / writer: real PETS 2009 files, round trip, malformed lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import FormatError, InputError
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
