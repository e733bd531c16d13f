"""Box matching before pair scoring (``pairedge score --match-boxes``): hand-computed frames."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pairedge.apps.cli import app
from pairedge.core.errors import FormatError, InputError
from pairedge.measure.metrics import pairwise
from pairedge.measure.metrics.pairwise.boxes import read_run_tracks, read_truth_boxes
from typer.testing import CliRunner

HEADER = {"label_set": "paper3"}
# True people (MOT frame 1 = run frame 0; frame 2 = run frame 1): 1, 2 side by side, 3 further right.
GT_MOT = (
    "1,1,0,0,10,20,1,-1,-1,-1\n1,2,20,0,10,20,1,-1,-1,-1\n1,3,50,0,10,20,1,-1,-1,-1\n"
    "2,1,0,0,10,20,1,-1,-1,-1\n2,2,20,0,10,20,1,-1,-1,-1\n2,3,50,0,10,20,0,-1,-1,-1\n"
)
GOLD = [
    HEADER,
    {
        "frame": 0,
        "interactions": [
            {"ids": [1, 2], "label": "walking_together"},
            {"ids": [2, 3], "label": "standing_together"},
        ],
    },
    {"frame": 1, "interactions": [{"ids": [1, 2], "label": "walking_together"}]},
]
RUN = [
    {"labels": ["walking_together", "standing_together", "sitting_together"], "source": "x"},
    # frame 0: 7 -> 1 (IoU 1), 8 -> 2 (IoU 180/220), 9 matches nobody
    {
        "frame": 0,
        "tracks": [
            {"id": 7, "box": [0, 0, 10, 20]},
            {"id": 8, "box": [21, 0, 10, 20]},
            {"id": 9, "box": [100, 0, 10, 20]},
        ],
        "interactions": [
            {"ids": [7, 8], "label": "walking_together", "p_interact": 0.9},
            {"ids": [8, 9], "label": "standing_together", "p_interact": 0.8},
        ],
    },
    # frame 1: the tracker swapped its ids; matching is per frame, so (8, 7) is still the true (1, 2)
    {
        "frame": 1,
        "tracks": [{"id": 8, "box": [0, 0, 10, 20]}, {"id": 7, "box": [20, 0, 10, 20]}],
        "interactions": [{"ids": [7, 8], "label": "standing_together", "p_interact": 0.7}],
    },
]


def _write(tmp_path: Path) -> tuple[Path, Path, Path]:
    run, gold, gt = tmp_path / "results.jsonl", tmp_path / "gold.jsonl", tmp_path / "gt.txt"
    run.write_text("".join(json.dumps(r) + "\n" for r in RUN))
    gold.write_text("".join(json.dumps(r) + "\n" for r in GOLD))
    gt.write_text(GT_MOT)
    return run, gold, gt


def test_pairs_scored_after_matching(tmp_path: Path) -> None:
    run, gold, gt = _write(tmp_path)
    plain = pairwise.score_files(run, gold)
    assert plain.summary["pair_f1"] == 0.0  # the tracker's ids are not the truth's
    rep = pairwise.score_files(run, gold, match_boxes=gt)
    # predicted interacting: (1,2)@0 TP, (2,fresh)@0 FP, (1,2)@1 TP; true: (1,2)@0, (2,3)@0 missed, (1,2)@1
    assert rep.summary["pair_precision"] == pytest.approx(2 / 3)
    assert rep.summary["pair_recall"] == pytest.approx(2 / 3)
    assert rep.summary["pair_f1"] == pytest.approx(2 / 3)
    # classification on the true pairs: walking right, standing missing, walking labelled standing
    assert rep.summary["accuracy"] == pytest.approx(1 / 3)
    bm = rep.details["box_matching"]
    # frame 0: 3 predicted, 2 matched, 3 true; frame 1: 2 predicted, 2 matched, 3 true (a conf 0 row counts)
    assert (bm["pred"], bm["matched"], bm["pred_unmatched"], bm["truth"], bm["truth_unmatched"]) == (
        5,
        4,
        1,
        6,
        2,
    )
    assert any("box matching" in n for n in rep.notes)


def test_match_iou_sets_how_close_a_box_must_be(tmp_path: Path) -> None:
    """Track 8 of frame 0 moved to x = 25: IoU 100 / 300 = 1/3 with true person 2 (below the MOT 0.5)."""
    run, gold, gt = _write(tmp_path)
    rows = [json.loads(line) for line in run.read_text().splitlines()]
    rows[1]["tracks"][1]["box"] = [25, 0, 10, 20]
    run.write_text("".join(json.dumps(r) + "\n" for r in rows))
    strict = pairwise.score_files(run, gold, match_boxes=gt)
    # 8 matches nobody: (7,8)@0 and (8,9)@0 are false positives, (1,2)@1 the one true positive
    assert strict.summary["pair_precision"] == pytest.approx(1 / 3)
    assert strict.details["box_matching"]["min_iou"] == 0.5
    loose = pairwise.score_files(run, gold, match_boxes=gt, match_iou=0.3)
    assert loose.summary["pair_precision"] == pytest.approx(2 / 3)  # (7,8)@0 is the true (1,2) again
    assert loose.details["box_matching"]["min_iou"] == 0.3
    assert any("IoU >= 0.3" in n for n in loose.notes)


@pytest.mark.parametrize("bad", [0.0, 1.5, float("nan"), True, "0.5"])
def test_a_bad_match_iou_is_refused(tmp_path: Path, bad: object) -> None:
    run, gold, gt = _write(tmp_path)
    with pytest.raises(InputError, match="match_iou"):
        pairwise.score_files(run, gold, match_boxes=gt, match_iou=bad)  # type: ignore[arg-type]


def test_cli_match_boxes(tmp_path: Path) -> None:
    run, gold, gt = _write(tmp_path)
    out = tmp_path / "r.json"
    res = CliRunner().invoke(
        app,
        [
            "score",
            "-p",
            "pairwise",
            "--pred",
            str(run),
            "--gold",
            str(gold),
            "--match-boxes",
            str(gt),
            "--json",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["summary"]["pair_f1"] == pytest.approx(2 / 3)
    res = CliRunner().invoke(
        app, ["score", "-p", "pcp", "--pred", str(run), "--gold", str(gold), "--match-boxes", str(gt)]
    )
    assert res.exit_code != 0 and "only for --protocol pairwise" in res.output


def test_pred_without_tracks_refused(tmp_path: Path) -> None:
    _, gold, gt = _write(tmp_path)
    with pytest.raises(FormatError, match="no frame record has 'tracks'"):
        pairwise.score_files(gold, gold, match_boxes=gt)
    csv = tmp_path / "p.csv"
    csv.write_text("0,7,8,walking_together\n")
    with pytest.raises(FormatError, match="CSV"):
        read_run_tracks(csv)


@pytest.mark.parametrize(
    ("track", "message"),
    [
        ({"id": 1, "box": [0, 0, float("nan"), 1]}, "finite"),
        ({"id": -1, "box": [0, 0, 1, 1]}, "id"),
        ({"id": 1, "box": [0, 0, -1, 1]}, "width"),
        ({"id": 1, "box": [0, 0, 1]}, "4 finite"),
    ],
)
def test_bad_tracks_refused(tmp_path: Path, track: dict, message: str) -> None:
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({"frame": 0, "tracks": [track]}) + "\n")
    with pytest.raises(FormatError, match=message):
        read_run_tracks(p)


def test_truth_needs_ids(tmp_path: Path) -> None:
    det = tmp_path / "det.txt"
    det.write_text("1,-1,0,0,10,20,0.9,-1,-1,-1\n")
    with pytest.raises(InputError, match="track ids"):
        read_truth_boxes(det)
    gt = tmp_path / "gt.txt"
    gt.write_text(GT_MOT)
    truth = read_truth_boxes(gt)
    assert sorted(truth) == [0, 1] and truth[1].ids.tolist() == [1, 2, 3]
    np.testing.assert_array_equal(truth[0].boxes[1], [20, 0, 10, 20])


@pytest.mark.parametrize(
    ("gt_text", "why"),
    [
        # another clip's frames: MOT frames 50-51 are no scored frame
        (
            "".join(f"{f},{i},{x},0,10,20,1,-1,-1,-1\n" for f in (50, 51) for i, x in ((1, 0), (2, 20))),
            "no true box",
        ),
        # the same frames, boxes far away from every predicted person
        (
            "".join(f"{f},{i},{x},500,10,20,1,-1,-1,-1\n" for f in (1, 2) for i, x in ((1, 0), (2, 20))),
            "overlaps",
        ),
        # the right boxes, numbered 101 / 102: the gold never names them
        (
            "".join(f"{f},{i},{x},0,10,20,1,-1,-1,-1\n" for f in (1, 2) for i, x in ((101, 0), (102, 20))),
            "none of",
        ),
    ],
)
def test_a_box_truth_that_matches_nothing_usable_is_an_error(tmp_path: Path, gt_text: str, why: str) -> None:
    """Nothing matched is one line and exit 1, not F1 0 with a count note (issue 40, case 6)."""
    run, gold, gt = _write(tmp_path)
    gt.write_text(gt_text)
    with pytest.raises(InputError, match=why):
        pairwise.score_files(run, gold, match_boxes=gt)
    result = CliRunner().invoke(
        app,
        [
            "score",
            "--protocol",
            "pairwise",
            "--pred",
            str(run),
            "--gold",
            str(gold),
            "--match-boxes",
            str(gt),
        ],
    )
    assert result.exit_code == 1 and why in result.output, result.output
