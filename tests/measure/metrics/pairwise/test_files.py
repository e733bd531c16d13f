"""Pairwise files: JSON Lines and CSV parsing, which pairs count, and malformed input errors."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from pairedge.core.errors import FormatError, InputError
from pairedge.measure.metrics.pairwise import read_pairwise_file, resolve_labels, score_files

PAPER3 = ("walking_together", "standing_together", "sitting_together")
W, S, T = PAPER3


def write_jsonl(path: Path, records: list[Any], header: dict[str, Any] | None = None) -> Path:
    lines = ([json.dumps(header)] if header else []) + [json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n")
    return path


def inter(a: int, b: int, label: str | None = None, p: float | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"ids": [a, b], **extra}
    if label is not None:
        out["label"] = label
    if p is not None:
        out["p_interact"] = p
    return out


@pytest.fixture
def gold(tmp_path: Path) -> Path:
    return write_jsonl(
        tmp_path / "gold.jsonl",
        [
            {
                "frame": 10,
                "interactions": [inter(1, 2, W), inter(3, 4, S), inter(1, 3, p=0)],
                "groups": [{"members": [1, 2], "activity": W}, {"members": [3, 4, 5], "activity": S}],
            },
            {"frame": 20, "interactions": [inter(6, 7, T)], "groups": [{"members": [6, 7], "activity": T}]},
            {"frame": 30, "interactions": [], "groups": []},
        ],
        header={"label_set": "paper3"},
    )


def test_scores_runtime_output_with_extra_keys(tmp_path: Path, gold: Path) -> None:
    pred = write_jsonl(
        tmp_path / "pred.jsonl",
        [
            {
                "frame": 10,
                "timestamp": 0.33,
                "timings_ms": {"flow": 4.0},
                "interactions": [inter(2, 1, W, 0.9, probs=[0.8, 0.1, 0.1]), inter(3, 4, T, 0.3)],
                "groups": [{"members": [1, 2], "activity": W}],
            },
            {"frame": 20, "interactions": [inter(6, 7, T, 0.8), inter(8, 9, S, 0.9)], "groups": []},
            {"frame": 99, "interactions": [inter(1, 2, W, 1.0)], "groups": []},  # not in gold: ignored
        ],
    )
    r = score_files(pred, gold)
    # classification over gold interacting pairs: (1,2) W ok, (3,4) S->T wrong, (6,7) T ok
    assert r.summary["accuracy"] == pytest.approx(2 / 3)
    assert r.summary["mpca"] == pytest.approx(2 / 3)  # recalls 1, 0, 1
    # stage 1 at tau 0.5: predicted {(10,1,2), (20,6,7), (20,8,9)} vs gold {(10,1,2), (10,3,4), (20,6,7)}
    assert r.summary["pair_precision"] == pytest.approx(2 / 3)
    assert r.summary["pair_recall"] == pytest.approx(2 / 3)
    # group activity: {1,2} W ok; {3,4,5} votes T -> wrong; {6,7} T ok
    assert r.summary["group_activity_accuracy"] == pytest.approx(2 / 3)
    # group detection: one TP ({1,2}), gold {3,4,5} and {6,7} missed
    assert r.summary["group_precision"] == 1.0 and r.summary["group_recall"] == pytest.approx(1 / 3)
    assert r.details["counts"]["pred_pairs_outside_gold"] == 1
    assert r.details["counts"]["gold_interacting_pairs"] == 3
    assert r.protocol == "pairwise" and len(r.tables) == 3
    json.dumps(r.to_dict())  # serialisable


def test_tau_changes_stage1_only(tmp_path: Path, gold: Path) -> None:
    pred = write_jsonl(tmp_path / "p.jsonl", [{"frame": 10, "interactions": [inter(1, 2, W, 0.4)]}])
    low, high = score_files(pred, gold, tau=0.3), score_files(pred, gold, tau=0.5)
    assert low.summary["pair_recall"] == pytest.approx(1 / 3) and high.summary["pair_recall"] == 0.0
    assert low.summary["accuracy"] == high.summary["accuracy"] == pytest.approx(1 / 3)


def test_missing_prediction_counts_wrong_and_is_reported(tmp_path: Path, gold: Path) -> None:
    pred = write_jsonl(tmp_path / "p.jsonl", [{"frame": 10, "interactions": [inter(1, 2, W), inter(3, 4)]}])
    r = score_files(pred, gold)
    assert r.summary["accuracy"] == pytest.approx(1 / 3)
    assert r.details["counts"]["missing_predictions"] == 2
    assert r.details["missing"].tolist() == [0, 1, 1]
    assert any("no predicted label" in n for n in r.notes)
    assert any("prediction has no groups" in n for n in r.notes)
    assert math.isnan(r.summary["group_f1"])


def test_csv_scores_like_jsonl(tmp_path: Path) -> None:
    gold_csv = tmp_path / "gold.csv"
    gold_csv.write_text(
        "frame,id_a,id_b,label\n1,1,2,walking_together\n1,4,3,sitting_together\n2,1,2,walking_together\n"
    )
    pred_csv = tmp_path / "pred.csv"
    pred_csv.write_text("# comment\n1,2,1,walking_together,0.9\n1,3,4,standing_together,0.2\n2,1,2,,0.8\n")
    r = score_files(pred_csv, gold_csv, labels="paper3")
    assert r.summary["accuracy"] == pytest.approx(1 / 3)
    assert r.summary["pair_precision"] == 1.0 and r.summary["pair_recall"] == pytest.approx(2 / 3)
    assert math.isnan(r.summary["group_activity_accuracy"])
    parsed = read_pairwise_file(pred_csv, PAPER3)
    assert parsed.pairs.id_a.tolist() == [1, 3, 1] and parsed.pairs.id_b.tolist() == [2, 4, 2]
    assert parsed.pairs.label.tolist() == [0, 1, -1] and parsed.groups is None


def test_labels_from_header_argument_or_error(tmp_path: Path, gold: Path) -> None:
    plain = write_jsonl(tmp_path / "p.jsonl", [{"frame": 10}])
    assert resolve_labels(plain, gold) == PAPER3
    assert resolve_labels(plain, plain, ["a", "b"]) == ("a", "b")
    with pytest.raises(InputError, match="no label set"):
        resolve_labels(plain, plain)
    other = write_jsonl(tmp_path / "o.jsonl", [{"frame": 10}], header={"labels": ["x", "y"]})
    with pytest.raises(FormatError, match="o.jsonl, record line 1: header declares labels"):
        resolve_labels(other, gold)
    with pytest.raises(FormatError, match="unknown label set"):
        resolve_labels(write_jsonl(tmp_path / "u.jsonl", [], header={"label_set": "nope"}), gold)


BAD_RECORDS: list[tuple[str, str]] = [
    ('{"frame": 1, "interactions": [{"ids": [1, 2], "label": "dancing"}]}', "unknown label 'dancing'"),
    (
        '{"frame": 1, "interactions": [{"ids": [1, 2], "label": "walking_together", "p_interact": NaN}]}',
        "p_interact",
    ),
    (
        '{"frame": 1, "interactions": [{"ids": [1, 2], "p_interact": 1.5}]}',
        "p_interact: expected a probability",
    ),
    ('{"frame": 1, "interactions": [{"ids": [1, 2]}, {"ids": [2, 1]}]}', "duplicate pair [1, 2] in frame 1"),
    ('{"frame": 1, "interactions": [{"ids": [3, 3]}]}', "two different people"),
    ('{"frame": 1, "interactions": [{"ids": [-1, 3]}]}', "track ids >= 0"),
    ('{"frame": 1, "interactions": [{"ids": [1, 2, 3]}]}', "list of two track ids"),
    ('{"frame": 1, "interactions": [{"ids": [1.5, 2]}]}', "expected an integer"),
    (
        '{"frame": 1, "interactions": [{"ids": [1, 2], "probs": [0.5, 0.5]}]}',
        "probs: expected 3 finite numbers",
    ),
    (
        '{"frame": 1, "groups": [{"members": [1, 2]}, {"members": [2, 3]}]}',
        "person 2 appears twice in the groups of frame 1",
    ),
    ('{"frame": 1, "groups": [{"members": []}]}', "at least one track id"),
    ('{"frame": 1, "groups": [{"members": [1, 2], "activity": "x"}]}', "unknown label 'x'"),
    ('{"frame": 1, "interactions": {"ids": [1, 2]}}', "interactions: expected a list"),
    ('{"frame": "1"}', "frame: expected an integer"),
    ("[1, 2, 3]", "expected a frame object"),
    ('{"frame": 1, "interactions": [', "invalid JSON"),
]


@pytest.mark.parametrize(("record", "message"), BAD_RECORDS)
def test_malformed_records_name_file_line_and_problem(tmp_path: Path, record: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"label_set": "paper3"}\n{"frame": 0}\n\n' + record + "\n")
    with pytest.raises(FormatError) as info:
        read_pairwise_file(path, PAPER3)
    assert info.value.path == str(path)
    assert str(info.value.record).startswith("line 4")
    assert message in info.value.problem


def test_duplicate_frame_and_pair_name_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    path.write_text('{"frame": 3}\n{"frame": 4}\n{"frame": 3}\n')
    with pytest.raises(FormatError, match="frame 3 already given on line 1"):
        read_pairwise_file(path, PAPER3)
    path.write_text('{"frame": 3, "interactions": [{"ids": [1, 2]}, {"ids": [5, 6]}, {"ids": [2, 1]}]}\n')
    with pytest.raises(FormatError, match="first on line 1"):
        read_pairwise_file(path, PAPER3)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1,2,3\n", "expected 4 or 5 fields"),
        ("1,a,3,walking_together\n", "id_a: expected an integer"),
        ("1,2,3,walking_together,nan\n", "p_interact: expected a probability"),
        ("1,2,3,walking_together,high\n", "p_interact: expected a number"),
        ("1,2,3,jogging\n", "unknown label 'jogging'"),
    ],
)
def test_malformed_csv(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("frame,id_a,id_b,label\n" + text)
    with pytest.raises(FormatError, match=message) as info:
        read_pairwise_file(path, PAPER3)
    assert info.value.record == "line 2"


def test_gold_interacting_pair_needs_label(tmp_path: Path) -> None:
    gold = write_jsonl(
        tmp_path / "g.jsonl", [{"frame": 1, "interactions": [inter(1, 2)]}], {"label_set": "paper3"}
    )
    with pytest.raises(FormatError, match="needs a label") as info:
        score_files(gold, gold)
    assert info.value.record == "line 2"


def test_missing_file_and_bad_tau(tmp_path: Path, gold: Path) -> None:
    with pytest.raises(FormatError, match="no such file"):
        score_files(tmp_path / "nope.jsonl", gold)
    with pytest.raises(InputError, match="tau"):
        score_files(gold, gold, tau=1.5)


def test_perfect_prediction_scores_one(gold: Path) -> None:
    r = score_files(gold, gold)
    for key in ("accuracy", "mpca", "mpca_over_all_classes", "macro_f1", "pair_f1", "group_f1"):
        assert r.summary[key] == 1.0, key
    assert r.summary["group_activity_accuracy"] == 1.0 and r.summary["group_vote_share"] == 1.0


def test_person_twice_in_one_group_and_bool_ids_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    path.write_text('{"frame": 1, "groups": [{"members": [4, 4]}]}\n')
    with pytest.raises(FormatError, match="person 4 appears twice"):
        read_pairwise_file(path, PAPER3)
    path.write_text('{"frame": 1, "interactions": [{"ids": [true, 2]}]}\n')
    with pytest.raises(FormatError, match="ids: expected an integer"):
        read_pairwise_file(path, PAPER3)
    path.write_text('{"frame": 1, "groups": [{"members": [1, -3]}]}\n')
    with pytest.raises(FormatError, match="members: expected track ids >= 0"):
        read_pairwise_file(path, PAPER3)
