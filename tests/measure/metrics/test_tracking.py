"""Tracking metrics (CLEAR MOT, IDF1): hand-computed sequences, the kept-correspondence rule, refusals."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pairedge.apps.cli import app
from pairedge.core.errors import FormatError
from pairedge.core.io.mot import read_mot
from pairedge.measure.metrics.pairwise.boxes import FrameBoxes
from pairedge.measure.metrics.tracking import read_tracks, score_tracks, tracking_metrics
from pairedge.runtime.tracker import IoUTracker
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


# -- tracking_crosscheck: pairedge's CLEAR MOT and IDF1 against py-motmetrics (a dev dependency): constructed
# and real PETS runs.


METRICS = [
    "mota",
    "motp",
    "idf1",
    "idp",
    "idr",
    "num_switches",
    "num_false_positives",
    "num_misses",
    "num_matches",
    "mostly_tracked",
    "mostly_lost",
    "num_objects",
    "num_predictions",
]


@pytest.fixture()
def mm(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    motmetrics = pytest.importorskip("motmetrics", reason="py-motmetrics (dev extra) is not installed")
    monkeypatch.setattr(np, "asfarray", lambda a, dtype=float: np.asarray(a, dtype=dtype), raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas deprecation warnings from inside motmetrics
        yield motmetrics


def motmetrics_scores(mm: Any, pred: dict[int, FrameBoxes], gt: dict[int, FrameBoxes]) -> dict[str, float]:
    """py-motmetrics' summary of the same boxes (its own IoU, at distance <= 0.5, i.e. IoU >= 0.5)."""
    empty = FrameBoxes(np.zeros(0, np.int64), np.zeros((0, 4)))
    acc = mm.MOTAccumulator(auto_id=False)
    for f in sorted(set(pred) | set(gt)):
        t, p = gt.get(f, empty), pred.get(f, empty)
        acc.update(t.ids, p.ids, mm.distances.iou_matrix(t.boxes, p.boxes, max_iou=0.5), frameid=f)
    row = mm.metrics.create().compute(acc, metrics=METRICS).iloc[0]
    return {k: float(row[k]) for k in METRICS}


def assert_agree(mine: dict[str, Any], theirs: dict[str, float]) -> None:
    for a, b in (("mota", "mota"), ("idf1", "idf1"), ("idp", "idp"), ("idr", "idr")):
        assert mine[a] == pytest.approx(theirs[b], abs=1e-9), a
    assert 1.0 - mine["motp"] == pytest.approx(theirs["motp"], abs=1e-9)
    for a, b in (
        ("id_switches", "num_switches"),
        ("false_positives", "num_false_positives"),
        ("misses", "num_misses"),
        ("mostly_tracked", "mostly_tracked"),
        ("mostly_lost", "mostly_lost"),
        ("gt_boxes", "num_objects"),
        ("pred_boxes", "num_predictions"),
    ):
        assert mine[a] == int(theirs[b]), a
    assert mine["matches"] == int(
        theirs["num_matches"] + theirs["num_switches"]
    )  # theirs leaves switches out


def _walkers(seed: int) -> tuple[dict[int, FrameBoxes], dict[int, FrameBoxes]]:
    """8 people walking for 40 frames; the prediction misses some, swaps some ids, adds false boxes."""
    rng = np.random.default_rng(seed)
    pos, vel = rng.uniform(0, 200, (8, 2)), rng.normal(0, 3, (8, 2))
    gt, pred = {}, {}
    for f in range(1, 41):
        pos += vel
        ids = np.flatnonzero(rng.random(8) < 0.8)
        boxes = np.concatenate([pos[ids], np.full((len(ids), 2), 25.0)], 1)
        gt[f] = FrameBoxes(ids.astype(np.int64), boxes)
        keep = rng.random(len(ids)) < 0.85
        pids = ids[keep] + (f // 10) * (rng.random(int(keep.sum())) < 0.3) * 100  # id changes every 10 frames
        pb = boxes[keep] + rng.normal(0, 4, (int(keep.sum()), 4))
        pb[:, 2:] = np.abs(pb[:, 2:])
        if rng.random() < 0.3:
            pids = np.append(pids, 999 + f)
            pb = np.vstack([pb, [rng.uniform(0, 200), rng.uniform(0, 200), 25, 25]])
        _, first = np.unique(pids, return_index=True)
        pred[f] = FrameBoxes(pids[np.sort(first)].astype(np.int64), pb[np.sort(first)])
    return pred, gt


@pytest.mark.parametrize("seed", range(5))
def test_constructed_runs_agree_with_motmetrics(mm: Any, seed: int) -> None:
    pred, gt = _walkers(seed)
    mine = score_tracks(pred, gt)
    assert mine["id_switches"] > 0 and mine["false_positives"] > 0 and mine["misses"] > 0
    assert_agree(mine, motmetrics_scores(mm, pred, gt))


def test_hand_case_agrees_with_motmetrics(mm: Any) -> None:
    a, b = [0.0, 0.0, 10.0, 20.0], [100.0, 0.0, 10.0, 20.0]
    gt = {f: FrameBoxes(np.array([1, 2]), np.array([a, b])) for f in range(1, 5)}
    pred = {
        1: FrameBoxes(np.array([10, 20]), np.array([a, b])),
        2: FrameBoxes(np.array([10]), np.array([a])),
        3: FrameBoxes(np.array([11, 20]), np.array([a, b])),
        4: FrameBoxes(np.array([20, 11]), np.array([b, a])),
    }
    mine = score_tracks(pred, gt)
    assert (mine["id_switches"], mine["misses"]) == (1, 1)
    assert_agree(mine, motmetrics_scores(mm, pred, gt))


def _track_detections(det_txt: Path) -> dict[int, FrameBoxes]:
    """The built-in tracker (its defaults) over PETS's ACF detections, frame by frame at 10 fps."""
    table = read_mot(det_txt)
    tracker = IoUTracker()
    out = {}
    for f in range(1, int(table.frame.max()) + 1):
        rows = np.flatnonzero(table.frame == f)
        ids = tracker.step(table.boxes[rows].astype(np.float64), (f - 1) / 10.0, table.scores[rows])
        keep = ids >= 0
        if keep.any():
            out[f] = FrameBoxes(ids[keep], table.boxes[rows][keep].astype(np.float64))
    return out


@pytest.mark.data
def test_real_pets_tracker_run_agrees_with_motmetrics(mm: Any, shared_data: Path) -> None:
    root = shared_data / "pets09_s2l1" / "mot15"
    gt = read_tracks(root / "gt" / "gt.txt", truth=True)
    pred = _track_detections(root / "det" / "det.txt")
    mine = score_tracks(pred, gt)
    assert mine["gt_boxes"] == 4476 and mine["id_switches"] > 10 and 0.3 < mine["idf1"] < 0.9
    assert_agree(mine, motmetrics_scores(mm, pred, gt))


def test_two_true_people_last_matched_to_one_id(mm: Any) -> None:
    """True 17 and then true 9 were matched to predicted 2; when both overlap it, the first (9) keeps it."""
    a, far = [0.0, 0.0, 10.0, 20.0], [300.0, 0.0, 10.0, 20.0]
    gt = {
        1: FrameBoxes(np.array([17]), np.array([a])),
        2: FrameBoxes(np.array([9, 17]), np.array([a, far])),
        3: FrameBoxes(np.array([9, 17]), np.array([a, [3.0, 0.0, 10.0, 20.0]])),
    }
    pred = {
        1: FrameBoxes(np.array([2]), np.array([a])),
        2: FrameBoxes(np.array([2]), np.array([a])),
        3: FrameBoxes(np.array([2, 5]), np.array([[1.5, 0.0, 10.0, 20.0], [6.0, 0.0, 10.0, 20.0]])),
    }
    mine = score_tracks(pred, gt)
    # frame 3: 9 keeps 2 (IoU 0.74); 17 (its last match 2 is taken) takes 5 (IoU 0.54): one switch, no miss
    # there
    assert (mine["id_switches"], mine["misses"], mine["false_positives"]) == (1, 1, 0)
    assert_agree(mine, motmetrics_scores(mm, pred, gt))
