"""bench_tracking's run plan and its py-motmetrics cross-check on a hand-made MOT pair."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pairedge.measure.metrics.tracking import tracking_metrics

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_tracking import motmetrics_agrees, plan  # noqa: E402


def test_plan_runs_each_tracker_on_detections_and_gt_once() -> None:
    assert plan("det,gt", "iou,botsort", "iou") == [("det", "iou"), ("det", "botsort"), ("gt", "iou")]
    assert plan("hog", "iou", "iou, bytetrack") == [("hog", "iou"), ("hog", "bytetrack")]
    with pytest.raises(SystemExit, match="unknown input"):
        plan("det,truth", "iou", "iou")


def _mot(path: Path, rows: list[tuple[int, int, str]]) -> Path:
    path.write_text("".join(f"{f},{i},{box},1,-1,-1,-1\n" for f, i, box in rows))
    return path


def test_motmetrics_check_sees_agreement_and_a_difference(tmp_path: Path) -> None:
    pytest.importorskip("motmetrics", reason="py-motmetrics (dev extra) is not installed")
    a, b = "0,0,10,20", "100,0,10,20"
    gt = _mot(tmp_path / "gt.txt", [(f, i, box) for f in range(1, 5) for i, box in ((1, a), (2, b))])
    pred = _mot(
        tmp_path / "pred.txt", [(1, 10, a), (2, 10, a), (3, 11, a), (4, 11, a), (1, 20, b), (3, 20, b)]
    )
    m = tracking_metrics(pred, gt)
    assert m["id_switches"] == 1 and m["misses"] == 2
    assert motmetrics_agrees(pred, gt, m) is True
    assert motmetrics_agrees(pred, gt, {**m, "id_switches": 2}) is False
