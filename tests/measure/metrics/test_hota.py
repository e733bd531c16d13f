"""HOTA (TrackEval's definition): hand-computed sequences and the TrackEval port in Roboflow's trackers."""

from __future__ import annotations

import numpy as np
import pytest
from pairedge.measure.metrics.hota import ALPHAS, hota
from pairedge.measure.metrics.pairwise.boxes import FrameBoxes
from pairedge.measure.metrics.tracking import score_tracks


def _frames(rows: list[tuple[int, int, list[float]]]) -> dict[int, FrameBoxes]:
    out: dict[int, list[tuple[int, list[float]]]] = {}
    for f, i, box in rows:
        out.setdefault(f, []).append((i, box))
    return {
        f: FrameBoxes(np.array([i for i, _ in v], np.int64), np.array([b for _, b in v], np.float64))
        for f, v in out.items()
    }


A, B = [0.0, 0.0, 10.0, 20.0], [100.0, 0.0, 10.0, 20.0]


def test_alphas_are_trackevals_nineteen() -> None:
    assert len(ALPHAS) == 19
    np.testing.assert_allclose(ALPHAS[[0, -1]], [0.05, 0.95])


def test_perfect_tracks_score_one() -> None:
    gt = _frames([(f, i, box) for f in range(1, 5) for i, box in ((1, A), (2, B))])
    m = hota(gt, gt)
    assert (m["hota"], m["deta"], m["assa"], m["loca"]) == (1.0, 1.0, 1.0, 1.0)


def test_one_true_track_split_into_two_ids_by_hand() -> None:
    gt = _frames([(f, 1, A) for f in range(1, 5)])
    pred = _frames([(1, 7, A), (2, 7, A), (3, 8, A), (4, 8, A)])
    m = hota(pred, gt)
    # every box is a TP at every alpha: DetA 1. c(1, 7) = c(1, 8) = 2, n_1 = 4, m_7 = m_8 = 2:
    # AssA = (2 * 2 / (4 + 2 - 2) + 2 * 2 / (4 + 2 - 2)) / 4 = 0.5; AssRe = (4/4 + 4/4) / 4; AssPr = (4/2 +
    # 4/2) / 4
    assert m["deta"] == pytest.approx(1.0)
    assert m["assa"] == pytest.approx(0.5)
    assert m["hota"] == pytest.approx(np.sqrt(0.5))
    assert (m["assre"], m["asspr"]) == (pytest.approx(0.5), pytest.approx(1.0))


def test_localisation_counts_only_thresholds_the_iou_reaches() -> None:
    gt = _frames([(1, 1, A)])
    pred = _frames([(1, 5, [0.0, 0.0, 10.0, 40.0])])  # IoU 200 / 400 = 0.5 exactly
    m = hota(pred, gt)
    # alpha 0.05 .. 0.50 (10 of 19, 0.50 with TrackEval's epsilon): a TP with AssA 1; above: one FN + one FP
    assert m["hota"] == pytest.approx(10 / 19)
    assert m["deta"] == pytest.approx(10 / 19)
    # TrackEval's LocA: 0.5 where a TP exists, max(1e-10, 0) / max(1e-10, 0) = 1 where none
    assert m["loca"] == pytest.approx((10 * 0.5 + 9 * 1.0) / 19)
    assert m["hota_alpha"][9] == pytest.approx(1.0) and m["hota_alpha"][10] == 0.0


def test_false_positive_halves_detection_accuracy() -> None:
    gt = _frames([(1, 1, A)])
    pred = _frames([(1, 3, A), (1, 4, B)])
    m = hota(pred, gt)
    assert m["deta"] == pytest.approx(0.5)  # TP 1 / (TP 1 + FN 0 + FP 1)
    assert m["assa"] == pytest.approx(1.0)
    assert m["hota"] == pytest.approx(np.sqrt(0.5))
    assert m["detpr"] == pytest.approx(0.5) and m["detre"] == pytest.approx(1.0)


def test_empty_sides_follow_trackeval() -> None:
    gt = _frames([(1, 1, A)])
    for pred, truth in (({}, gt), (gt, {})):
        m = hota(pred, truth)
        assert (m["hota"], m["deta"], m["assa"], m["loca"]) == (0.0, 0.0, 0.0, 1.0)


def test_score_tracks_reports_hota() -> None:
    gt = _frames([(f, 1, A) for f in range(1, 5)])
    pred = _frames([(1, 7, A), (2, 7, A), (3, 8, A), (4, 8, A)])
    m = score_tracks(pred, gt)
    assert m["hota"] == pytest.approx(np.sqrt(0.5)) and m["id_switches"] == 1


def _random_case(seed: int) -> tuple[dict[int, FrameBoxes], dict[int, FrameBoxes]]:
    rng = np.random.default_rng(seed)
    gt, pred = {}, {}
    for f in range(40):
        ids = rng.choice(8, rng.integers(0, 6), replace=False).astype(np.int64)
        boxes = np.concatenate([rng.uniform(0, 100, (len(ids), 2)), rng.uniform(10, 30, (len(ids), 2))], 1)
        gt[f] = FrameBoxes(ids, boxes)
        m = int(rng.integers(0, 6))
        near = boxes + rng.normal(0, 3, boxes.shape)
        far = np.concatenate([rng.uniform(0, 100, (m, 2)), rng.uniform(10, 30, (m, 2))], 1)
        pb = np.concatenate([near, far])[:m]
        pb[:, 2:] = np.abs(pb[:, 2:]) + 1
        pred[f] = FrameBoxes(rng.choice(12, m, replace=False).astype(np.int64), pb)
    return pred, gt


@pytest.mark.parametrize("seed", range(4))
def test_agrees_with_the_trackeval_port_in_trackers(seed: int) -> None:
    pytest.importorskip(
        "trackers", reason="Roboflow's trackers (its eval is a TrackEval port) is not installed"
    )
    from trackers.eval.box import box_iou
    from trackers.eval.hota import compute_hota_metrics

    pred, gt = _random_case(seed)
    frames = sorted(set(gt) | set(pred))
    ref = compute_hota_metrics(
        [gt[f].ids for f in frames],
        [pred[f].ids for f in frames],
        [box_iou(gt[f].boxes, pred[f].boxes, "xywh") for f in frames],
    )
    m = hota(pred, gt)
    assert 0.0 < m["hota"] < 1.0
    for mine, theirs in (
        ("hota", "HOTA"),
        ("deta", "DetA"),
        ("assa", "AssA"),
        ("loca", "LocA"),
        ("detre", "DetRe"),
        ("detpr", "DetPr"),
        ("assre", "AssRe"),
        ("asspr", "AssPr"),
    ):
        assert m[mine] == pytest.approx(ref[theirs], abs=1e-12), mine
