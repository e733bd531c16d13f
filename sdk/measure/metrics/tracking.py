"""Tracking metrics of a tracker's boxes against MOT ground truth: CLEAR MOT (MOTA, ID switches) and IDF1.

Both files are MOT Challenge text (``frame,id,left,top,w,h,conf,...``, :mod:`pairedge.core.io.mot`); the
prediction's ids must be >= 0 (a tracker's output), ground-truth rows with ``conf`` 0 are left out (as
TrackEval does for MOT15: a predicted box on such a person is a false positive). A
predicted and a true box can correspond when their IoU is >= ``min_iou`` (0.5, the MOT convention).

**CLEAR MOT** (Bernardin & Stiefelhagen 2008, as py-motmetrics computes it). Frame by frame: a true person
still matched to the same predicted id as when last matched keeps it if their IoU is still >= ``min_iou``
(when two true people were last matched to one predicted id, the first in the frame's order keeps it);
the others are matched by the Hungarian algorithm on IoU (:mod:`pairedge.measure.metrics.box_matching`). An ID
switch is a match of a true person to another predicted id than the one of its last match (in any earlier
frame). Unmatched predicted boxes are false positives, unmatched true boxes misses.
``MOTA = 1 - (misses + false positives + ID switches) / true boxes``; ``MOTP`` here is the mean IoU of the
matches (higher is better; py-motmetrics reports 1 - IoU).

**IDF1** (Ristani et al. 2016). Every true track is paired with at most one predicted track (one-to-one,
over the whole sequence) so that the frames where the paired boxes overlap at IoU >= ``min_iou`` (IDTP) are
as many as possible; ``IDF1 = 2 IDTP / (true boxes + predicted boxes)``, ``IDP = IDTP / predicted boxes``,
``IDR = IDTP / true boxes``.

**HOTA** (Luiten et al. 2021, TrackEval's definition: :mod:`pairedge.measure.metrics.hota`): the mean over
IoU thresholds 0.05 .. 0.95 of ``sqrt(DetA * AssA)``, with DetA, AssA and LocA.

Also: mostly tracked / mostly lost true tracks (matched in >= 80 % / < 20 % of their frames).

Cross-checked: MOTA, MOTP, ID switches, IDF1 / IDP / IDR and the counts against py-motmetrics on a real
PETS run and constructed cases (``tests/measure/metrics/test_tracking.py``), HOTA against hand
computations and the TrackEval port in Roboflow's ``trackers`` library.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.mot import read_mot
from pairedge.measure.metrics.box_matching import MIN_IOU, iou_matrix, match_boxes, max_weight_assignment
from pairedge.measure.metrics.hota import hota
from pairedge.measure.metrics.pairwise.boxes import FrameBoxes
from pairedge.measure.metrics.result import ScoreReport, Table

#: Most distinct track ids on either side that take part in the IDF1 assignment.
MAX_TRACKS = 5000


def read_tracks(path: str | Path, *, truth: bool) -> dict[int, FrameBoxes]:
    """The boxes of each (1-based MOT) frame; ``truth`` drops ``conf`` 0 rows.

    Raises:
        FormatError: a malformed file, or a row with id -1 (a detection file, not tracks).
    """

    table = read_mot(path)
    keep = table.scores != 0 if truth else np.ones(len(table), bool)
    bad = np.flatnonzero(keep & (table.track_id < 0))
    if len(bad):
        raise FormatError(
            path,
            "id -1: expected track ids >= 0 (a tracker's output or ground truth, not raw detections)",
            f"line {int(table.line[bad[0]])}",
        )
    frame, ids, boxes = table.frame[keep], table.track_id[keep], table.boxes[keep].astype(np.float64)
    if len(frame) == 0:
        return {}
    order = np.argsort(frame, kind="stable")
    frames, starts = np.unique(frame[order], return_index=True)
    out: dict[int, FrameBoxes] = {}
    for f, rows in zip(frames.tolist(), np.split(order, starts[1:]), strict=True):
        if len(np.unique(ids[rows])) != len(rows):
            raise FormatError(path, f"frame {f}: a track id given twice; expected each id once per frame")
        out[f] = FrameBoxes(ids[rows], boxes[rows])
    return out


def tracking_metrics(pred_mot: str | Path, gt_mot: str | Path, min_iou: float = MIN_IOU) -> dict[str, Any]:
    """CLEAR MOT and IDF1 of the tracks in ``pred_mot`` against ``gt_mot`` (both MOT files).

    Returns:
        ``mota``, ``motp`` (mean IoU of matches), ``idf1``, ``idp``, ``idr`` (floats, NaN when the ground
        truth has no box), ``hota``, ``deta``, ``assa``, ``loca`` (and ``detre``, ``detpr``, ``assre``,
        ``asspr``, ``hota_alpha``: :func:`pairedge.measure.metrics.hota.hota`; ``min_iou`` plays no part in
        them), and the counts ``id_switches``, ``false_positives``, ``misses``, ``matches``,
        ``gt_boxes``, ``pred_boxes``, ``gt_tracks``, ``pred_tracks``, ``mostly_tracked``,
        ``mostly_lost``, ``idtp``.

    Raises:
        FormatError: a malformed file; InputError: ``min_iou`` outside (0, 1].
    """
    return score_tracks(read_tracks(pred_mot, truth=False), read_tracks(gt_mot, truth=True), min_iou)


def score_tracks(
    pred: dict[int, FrameBoxes], gt: dict[int, FrameBoxes], min_iou: float = MIN_IOU
) -> dict[str, Any]:
    """:func:`tracking_metrics` on boxes already read (frame -> people)."""
    if not isinstance(min_iou, int | float) or not 0.0 < float(min_iou) <= 1.0:
        raise InputError(f"min_iou: expected a number in (0, 1], got {min_iou!r}")
    empty = FrameBoxes(np.zeros(0, np.int64), np.zeros((0, 4)))
    last: dict[int, int] = {}  # true id -> predicted id of its last match
    switches = fp = fn = matches = 0
    iou_sum = 0.0
    overlap: dict[tuple[int, int], int] = {}  # (true id, pred id) -> frames with IoU >= min_iou
    gt_frames: dict[int, int] = {}
    gt_matched: dict[int, int] = {}
    n_gt = n_pred = 0
    for f in sorted(set(pred) | set(gt)):
        p, t = pred.get(f, empty), gt.get(f, empty)
        n_gt, n_pred = n_gt + len(t.ids), n_pred + len(p.ids)
        iou = iou_matrix(p.boxes, t.boxes)  # (P, T)
        for pi, ti in zip(*np.nonzero(iou >= min_iou), strict=True):
            key = (int(t.ids[ti]), int(p.ids[pi]))
            overlap[key] = overlap.get(key, 0) + 1
        truth_of = _clear_match(p, t, iou, last, min_iou)
        for pi, ti in enumerate(truth_of.tolist()):
            if ti < 0:
                continue
            g, q = int(t.ids[ti]), int(p.ids[pi])
            switches += g in last and last[g] != q
            last[g] = q
            iou_sum += float(iou[pi, ti])
            gt_matched[g] = gt_matched.get(g, 0) + 1
        k = int((truth_of >= 0).sum())
        matches += k
        fp += len(p.ids) - k
        fn += len(t.ids) - k
        for g in t.ids.tolist():
            gt_frames[g] = gt_frames.get(g, 0) + 1
    idtp = _idtp(overlap)
    nan = float("nan")
    ratio = {g: gt_matched.get(g, 0) / n for g, n in gt_frames.items()}
    return {
        "mota": 1.0 - (fn + fp + switches) / n_gt if n_gt else nan,
        "motp": iou_sum / matches if matches else nan,
        "idf1": 2 * idtp / (n_gt + n_pred) if n_gt + n_pred else nan,
        "idp": idtp / n_pred if n_pred else nan,
        "idr": idtp / n_gt if n_gt else nan,
        "id_switches": switches,
        "false_positives": fp,
        "misses": fn,
        "matches": matches,
        "idtp": idtp,
        "gt_boxes": n_gt,
        "pred_boxes": n_pred,
        "gt_tracks": len(gt_frames),
        "pred_tracks": len({i for fb in pred.values() for i in fb.ids.tolist()}),
        "mostly_tracked": sum(r >= 0.8 for r in ratio.values()),
        "mostly_lost": sum(r < 0.2 for r in ratio.values()),
        **hota(pred, gt),
    }


def _clear_match(
    p: FrameBoxes, t: FrameBoxes, iou: np.ndarray, last: dict[int, int], min_iou: float
) -> np.ndarray:
    """(P,) index of the true box each predicted box matches in this frame, or -1 (CLEAR MOT rule)."""
    out = np.full(len(p.ids), -1, np.int64)
    row_of = {int(i): n for n, i in enumerate(p.ids.tolist())}
    for ti, g in enumerate(t.ids.tolist()):
        pi = row_of.get(last.get(g, -1), -1)
        if pi >= 0 and out[pi] < 0 and iou[pi, ti] >= min_iou:
            out[pi] = ti  # an established correspondence is kept (the first true person's, if two claim it)
    free_p = np.flatnonzero(out < 0)
    free_t = np.setdiff1d(np.arange(len(t.ids)), out[out >= 0])
    if len(free_p) and len(free_t):
        j = match_boxes(p.boxes[free_p], t.boxes[free_t], min_iou)
        hit = j >= 0
        out[free_p[hit]] = free_t[j[hit]]
    return out


def _idtp(overlap: dict[tuple[int, int], int]) -> int:
    """The most overlapping frames a one-to-one pairing of true and predicted tracks keeps."""
    if not overlap:
        return 0
    gids = sorted({g for g, _ in overlap})
    pids = sorted({q for _, q in overlap})
    if len(gids) > MAX_TRACKS or len(pids) > MAX_TRACKS:
        raise InputError(
            f"IDF1: more than {MAX_TRACKS} overlapping tracks on one side; too many to pair exactly"
        )
    gi, pi = {g: n for n, g in enumerate(gids)}, {q: n for n, q in enumerate(pids)}
    w = np.zeros((len(gids), len(pids)))
    for (g, q), n in overlap.items():
        w[gi[g], pi[q]] = n
    rows, cols = max_weight_assignment(w)
    return int(w[rows, cols].sum())


def score_files(pred: str | Path, gold: str | Path, min_iou: float = MIN_IOU) -> ScoreReport:
    """``pairedge score --protocol mot``: :func:`tracking_metrics` as a report.

    Raises:
        FormatError: a malformed file, or a ground truth without any box.
    """
    gt = read_tracks(gold, truth=True)
    if not gt:
        raise FormatError(gold, "no ground-truth box (every row has conf 0?); nothing to score")
    m = score_tracks(read_tracks(pred, truth=False), gt, min_iou)
    headline = ("mota", "motp", "idf1", "idp", "idr", "hota", "deta", "assa", "loca")
    counts = tuple((k, int(v)) for k, v in m.items() if isinstance(v, int))
    return ScoreReport(
        protocol="mot",
        summary={k: float(m[k]) for k in headline},
        tables=(Table("mot: counts", ("count", "value"), counts),),
        details={"min_iou": min_iou, **m},
        notes=(f"boxes correspond at IoU >= {min_iou:g}; MOTP is the mean IoU of the matches",),
    )
