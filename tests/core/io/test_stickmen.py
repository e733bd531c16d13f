"""Stickmen text and JRDB-PAR JSON Lines: round trips and malformed input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.par import ParFrame, read_par, write_par
from pairedge.core.io.stickmen import (
    StickmenImage,
    read_stickmen,
    read_stickmen_images,
    write_stickmen,
    write_stickmen_images,
)

# ----------------------------------------------------------------------------------------------- stickmen


def _people(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 500, size=(n, 6, 4))


def test_stickmen_bare_round_trip_with_occlusion(tmp_path: Path) -> None:
    sticks = _people(3)
    sticks[1, 4] = np.nan
    write_stickmen(tmp_path / "s.txt", sticks)
    back = read_stickmen(tmp_path / "s.txt")
    assert back.dtype == np.float64 and back.shape == (3, 6, 4)
    np.testing.assert_array_equal(back, sticks)  # NaN compares equal in assert_array_equal


def test_stickmen_single_person_2d_input(tmp_path: Path) -> None:
    write_stickmen(tmp_path / "s.txt", _people(1)[0], name="000063")
    assert (tmp_path / "s.txt").read_text().splitlines()[0] == "000063 1 6"
    assert read_stickmen(tmp_path / "s.txt").shape == (1, 6, 4)


def test_stickmen_official_layout_keeps_images(tmp_path: Path) -> None:
    a, b = _people(2, 1), _people(1, 2)
    write_stickmen_images(tmp_path / "m.txt", [("img_a.jpg", a), StickmenImage("img_b.jpg", b)])
    images = read_stickmen_images(tmp_path / "m.txt")
    assert [im.name for im in images] == ["img_a.jpg", "img_b.jpg"]
    np.testing.assert_array_equal(images[0].sticks, a)
    np.testing.assert_array_equal(read_stickmen(tmp_path / "m.txt"), np.concatenate([a, b]))


def test_stickmen_buffy_header_defaults_to_one_person(tmp_path: Path) -> None:
    lines = ["63"] + [f"{k} {k + 1} {k + 2} {k + 3}" for k in range(6)] + ["# comment", "", "64 1"]
    lines += [f"{k} 0 {k} 10" for k in range(6)]
    (tmp_path / "b.txt").write_text("\n".join(lines) + "\n")
    images = read_stickmen_images(tmp_path / "b.txt")
    assert [im.name for im in images] == ["63", "64"]
    assert images[0].sticks[0, 5].tolist() == [5, 6, 7, 8]


@pytest.mark.parametrize(
    ("text", "record"),
    [
        ("\n".join(["1 2 3 4"] * 7), "line 7"),  # 7 sticks: last person incomplete
        ("\n".join(["1 2 3 4"] * 5 + ["1 2 x 4"]), "line 6"),  # not a number
        ("\n".join(["1 2 3 4"] * 5 + ["1 NaN 3 4"]), "line 6"),  # partial NaN
        ("\n".join(["1 2 3 4"] * 5 + ["1 inf 3 4"]), "line 6"),  # infinite
        ("img 2 6\n" + "\n".join(["1 2 3 4"] * 6), "line 1"),  # header promises 2 people
        ("img 1 10\n" + "\n".join(["1 2 3 4"] * 10), "line 1"),  # not 6 parts
        ("img\n" + "\n".join(["1 2 3 4"] * 6) + "\nimg\n" + "\n".join(["1 2 3 4"] * 6), "line 8"),
    ],
)
def test_stickmen_malformed(tmp_path: Path, text: str, record: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(text + "\n")
    with pytest.raises(FormatError) as info:
        read_stickmen(path)
    assert info.value.path == str(path) and info.value.record == record


def test_stickmen_writer_rejects_bad_shapes(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="shape"):
        write_stickmen(tmp_path / "x.txt", np.zeros((2, 5, 4)))
    bad = _people(1)
    bad[0, 2, 1] = np.nan
    with pytest.raises(InputError, match="right_upper_arm"):
        write_stickmen(tmp_path / "x.txt", bad)
    with pytest.raises(InputError, match="duplicate"):
        write_stickmen_images(tmp_path / "x.txt", [("a", _people(1)), ("a", _people(1))])


@settings(max_examples=40, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        st.tuples(st.integers(0, 4), st.just(6), st.just(4)),
        elements=st.floats(-1e6, 1e6, allow_nan=False),
    )
)
def test_stickmen_round_trip_exact(sticks: np.ndarray) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        write_stickmen(Path(d) / "s.txt", sticks)
        np.testing.assert_array_equal(read_stickmen(Path(d) / "s.txt"), sticks.reshape(-1, 6, 4))


# ----------------------------------------------------------------------------------------------- PAR


def _frames() -> list[ParFrame]:
    f1 = ParFrame.from_labels(1, [(4, [0, 26]), (2, []), (9, [3])], [([4, 9], [31]), ([2], [5])], [6])
    scores = ParFrame(
        frame=2,
        person_ids=np.array([4], dtype=np.int64),
        actions=np.linspace(-1, 1, 27)[None],
        groups=(),
        group_activity=np.zeros((0, 32)),
        global_activity=np.arange(7, dtype=np.float64) / 7,
    )
    return [f1, scores]


def test_par_round_trip(tmp_path: Path) -> None:
    write_par(tmp_path / "p.jsonl", _frames())
    back = read_par(tmp_path / "p.jsonl")
    assert [f.frame for f in back] == [1, 2]
    for a, b in zip(_frames(), back, strict=True):
        np.testing.assert_array_equal(a.person_ids, b.person_ids)
        np.testing.assert_array_equal(a.actions, b.actions)
        assert a.actions.dtype == b.actions.dtype
        assert [m.tolist() for m in a.groups] == [m.tolist() for m in b.groups]
        np.testing.assert_array_equal(a.group_activity, b.group_activity)
        np.testing.assert_array_equal(a.global_activity, b.global_activity)


def test_par_group_label_from_lowest_index_member(tmp_path: Path) -> None:
    obj = {
        "frame": 0,
        "persons": [{"id": 8, "social": [3]}, {"id": 1, "social": [7]}, {"id": 5, "social": [9]}],
        "groups": [{"members": [5, 1]}, {"members": [8, 5][:1]}],
    }
    (tmp_path / "g.jsonl").write_text(json.dumps(obj) + "\n")
    frame = read_par(tmp_path / "g.jsonl")[0]
    # members 5 and 1 sit at positions 2 and 1 of "persons": position 1 (id 1) is the lowest index
    assert np.flatnonzero(frame.group_activity[0]).tolist() == [7]
    assert np.flatnonzero(frame.group_activity[1]).tolist() == [3]


def _bad_cases() -> list[tuple[dict, str]]:
    ok = {"frame": 0, "persons": [{"id": 1, "actions": [0]}, {"id": 2, "actions": [1]}]}
    return [
        ({**ok, "persons": [{"id": 1}, {"id": 1}]}, "duplicate person id 1"),
        ({**ok, "persons": [{"id": 1, "actions": [27]}]}, "unknown actions label id 27"),
        ({**ok, "persons": [{"id": 1, "actions": [2, 2]}]}, "duplicate actions label ids"),
        ({**ok, "groups": [{"members": [1, 2], "activity": [32]}]}, "unknown activity label id 32"),
        ({**ok, "global": [7]}, "unknown global label id 7"),
        ({**ok, "global_scores": [0.1] * 6}, "7 raw logits, got 6 values"),
        ({**ok, "persons": [{"id": 1, "action_scores": [0.0] * 26 + [float("nan")]}]}, "NaN"),
        ({**ok, "groups": [{"members": [1, 3]}]}, "member 3 is not a person"),
        ({**ok, "groups": [{"members": [1, 2]}, {"members": [2]}]}, "disjoint"),
        ({**ok, "persons": [{"id": 1, "actions": [0]}, {"id": 2, "action_scores": [0] * 27}]}, "mixes"),
        ({"persons": []}, "integer 'frame'"),
        (
            {
                "frame": 0,
                "persons": [{"id": 1, "social": [2]}, {"id": 2, "social": [4]}],
                "groups": [{"members": [1, 2], "activity": [4]}],
            },
            "lowest-index",
        ),
    ]


@pytest.mark.parametrize(("obj", "problem"), _bad_cases())
def test_par_malformed(tmp_path: Path, obj: dict, problem: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"frame": 99, "persons": []}\n' + json.dumps(obj) + "\n")
    with pytest.raises(FormatError, match=problem) as info:
        read_par(path)
    assert info.value.path == str(path) and info.value.record == "line 2"


def test_par_duplicate_frame_and_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"frame": 1}\n{"frame": 1}\n')
    with pytest.raises(FormatError, match="duplicate frame 1"):
        read_par(path)
    path.write_text('{"frame": 1\n')
    with pytest.raises(FormatError, match="invalid JSON"):
        read_par(path)
    with pytest.raises(InputError, match="duplicate frame"):
        write_par(tmp_path / "o.jsonl", [_frames()[0], _frames()[0]])
