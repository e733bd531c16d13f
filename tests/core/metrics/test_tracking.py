"""Tracking metrics (CLEAR MOT, IDF1): hand-computed sequences, the kept-correspondence rule, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pairedge.apps.cli import app
from pairedge.core.errors import FormatError
from pairedge.core.metrics.tracking import tracking_metrics
from typer.testing import CliRunner

A, B, C = "0,0,10,20", "100,0,10,20", "300,0,10,20"


def _mot(path: Path, rows: list[tuple[int, int, str]]) -> Path:
    path.write_text("".join(f"{f},{i},{box},1,-1,-1,-1\n" for f, i, box in rows))
    return path


def _switch_case(tmp_path: Path) -> tuple[Path, Path]:
    gt = _mot(tmp_path / "gt.txt", [(f, i, box) for f in range(1, 5) for i, box in ((1, A), (2, B))])
    pred = _mot(
        tmp_path / "pred.txt",
        [
            (1, 10, A),
            (1, 20, B),
            (2, 10, A),
            (2, 20, B),
            (3, 11, A),
            (3, 20, B),
            (4, 11, A),
            (4, 20, B),
            (4, 30, C),
        ],
    )
    return pred, gt


def test_switch_and_false_positive_by_hand(tmp_path: Path) -> None:
    m = tracking_metrics(*_switch_case(tmp_path))
    # 8 true boxes, 9 predicted, 8 matches; true 1 goes from id 10 to id 11 (one switch); id 30 is a false
    # positive
    assert (
        m["gt_boxes"],
        m["pred_boxes"],
        m["matches"],
        m["id_switches"],
        m["false_positives"],
        m["misses"],
    ) == (8, 9, 8, 1, 1, 0)
    assert m["mota"] == pytest.approx(1 - 2 / 8)
    assert m["motp"] == pytest.approx(1.0)
    # IDF1: true 1 pairs with 10 or 11 (2 frames), true 2 with 20 (4 frames): IDTP 6
    assert m["idtp"] == 6
    assert m["idf1"] == pytest.approx(12 / 17)
    assert (m["idp"], m["idr"]) == (pytest.approx(6 / 9), pytest.approx(6 / 8))
    assert (m["gt_tracks"], m["pred_tracks"], m["mostly_tracked"], m["mostly_lost"]) == (2, 4, 2, 0)


def test_established_match_is_kept(tmp_path: Path) -> None:
    # frame 2: id 10 still overlaps true 1 at IoU 0.6, id 11 at IoU 1: CLEAR MOT keeps 10 (no switch, 11 is a
    # FP)
    gt = _mot(tmp_path / "gt.txt", [(1, 1, "0,0,10,10"), (2, 1, "0,0,10,10")])
    pred = _mot(tmp_path / "p.txt", [(1, 10, "0,0,10,10"), (2, 10, "0,0,10,6"), (2, 11, "0,0,10,10")])
    m = tracking_metrics(pred, gt)
    assert (m["id_switches"], m["false_positives"], m["matches"]) == (0, 1, 2)
    assert m["motp"] == pytest.approx((1.0 + 0.6) / 2)


def test_misses_and_ignored_truth(tmp_path: Path) -> None:
    gt = tmp_path / "gt.txt"
    gt.write_text(f"1,1,{A},1,-1,-1,-1\n2,1,{A},1,-1,-1,-1\n2,2,{B},0,-1,-1,-1\n")  # true 2 not considered
    pred = _mot(tmp_path / "p.txt", [(1, 5, A)])
    m = tracking_metrics(pred, gt)
    assert (m["gt_boxes"], m["misses"], m["false_positives"], m["mota"]) == (2, 1, 0, 0.5)
    assert m["mostly_tracked"] == 0 and m["mostly_lost"] == 0  # matched in 1 of 2 frames


def test_detections_refused(tmp_path: Path) -> None:
    gt = _mot(tmp_path / "gt.txt", [(1, 1, A)])
    det = _mot(tmp_path / "det.txt", [(1, -1, A)])
    with pytest.raises(FormatError, match="id -1"):
        tracking_metrics(det, gt)


def test_cli_protocol_mot(tmp_path: Path) -> None:
    pred, gt = _switch_case(tmp_path)
    out = tmp_path / "r.json"
    res = CliRunner().invoke(
        app, ["score", "-p", "mot", "--pred", str(pred), "--gold", str(gt), "--json", str(out)]
    )
    assert res.exit_code == 0, res.output
    rep = json.loads(out.read_text())
    assert rep["summary"]["mota"] == pytest.approx(0.75) and rep["details"]["id_switches"] == 1
    assert "idf1" in res.output


def test_pets_truth_against_itself(shared_data: Path) -> None:
    gt = shared_data / "pets09_s2l1" / "mot15" / "gt" / "gt.txt"
    m = tracking_metrics(gt, gt)
    # 4,650 rows, 174 of them conf 0: left out of the truth, so the same boxes as predictions are 174 FPs
    assert (m["gt_boxes"], m["pred_boxes"], m["false_positives"], m["misses"], m["id_switches"]) == (
        4476,
        4650,
        174,
        0,
        0,
    )
    assert m["mota"] == pytest.approx(1 - 174 / 4476)
    assert m["idf1"] == pytest.approx(2 * 4476 / (4476 + 4650))
    assert (m["gt_tracks"], m["mostly_tracked"]) == (19, 19)
