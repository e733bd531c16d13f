"""Scoring a tracker's pairs against ground truth with other ids: box matching before pair scoring.

A run on raw detections (``pairedge run --detections det.txt`` with the built-in tracker) names people by
its own track ids, which are not the ground truth's. With a MOT ground-truth file holding the true boxes
(``gt.txt``: ``frame,id,left,top,w,h,conf,...``), each frame's predicted people (the ``tracks`` of the run's
``results.jsonl``) are matched to the true people by box IoU (:mod:`pairedge.measure.metrics.box_matching`:
Hungarian, IoU >= 0.5, the MOT convention), and every predicted id is replaced, in that frame, by the true
id it matched. Then the pairs are scored as usual (:mod:`pairedge.measure.metrics.pairwise`):

- a predicted pair whose two people matched two true people is that true pair;
- a predicted pair with an unmatched person (no true box within IoU 0.5, or no box in ``tracks``) is a
  pair of no true person: a false positive (its person gets an id no true person has);
- a true pair whose people no prediction matched has no prediction: a miss.

Frames: MOT frames are 1-based, so MOT frame ``k + 1`` is the run's frame ``k`` (as ``pairedge run`` maps a
MOT detection file). Every ground-truth row is used, ``conf`` 0 ones ("not considered" by the tracking
metrics) included: the pairwise ground truth decides which pairs count, and a person it names must be
findable by box even where the tracking benchmark ignores them (PETS ``gt.txt`` has 174 such rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.mot import read_mot
from pairedge.core.io.textio import is_number, iter_lines, parse_json, short
from pairedge.measure.metrics.box_matching import MIN_IOU, match_boxes
from pairedge.measure.metrics.pairwise.files import PairTable, PairwiseFile
from pairedge.measure.metrics.pairwise.groups import Groups

EXPECTED = "a pairedge run results.jsonl with per-frame tracks"


@dataclass(frozen=True)
class FrameBoxes:
    """The people of one frame: ``ids`` (N,) int64 and ``boxes`` (N, 4) float64 ``x y w h``."""

    ids: np.ndarray
    boxes: np.ndarray


def read_run_tracks(path: str | Path) -> dict[int, FrameBoxes]:
    """The ``tracks`` of each frame of a run's JSON Lines output (``results.jsonl``; header lines skipped).

    Raises:
        FormatError: a malformed record, a track without an integer id >= 0 or four finite box numbers
            with sizes >= 0, an id twice in a frame, or no record with a ``tracks`` key at all (then the
            file has no boxes to match: it is not a run's output).
    """
    p = Path(path)
    if p.suffix.lower() == ".csv":
        raise FormatError(p, "a CSV pairwise file has no boxes; box matching needs a run's results.jsonl")
    out: dict[int, FrameBoxes] = {}
    seen = False
    for lineno, text in iter_lines(p, EXPECTED):
        if not text.strip():
            continue
        rec = f"line {lineno}"
        obj = parse_json(p, text, rec)
        if not isinstance(obj, dict) or "frame" not in obj or "tracks" not in obj:
            continue  # a header, or a frame without people listed (pairwise files have no tracks)
        seen = True
        frame = obj["frame"]
        if type(frame) is not int:
            raise FormatError(p, f"frame: expected an integer, got {short(frame)}", rec)
        tracks = obj["tracks"]
        if not isinstance(tracks, list):
            raise FormatError(p, f"tracks: expected a list, got {short(tracks)}", rec)
        ids, boxes = [], []
        for j, t in enumerate(tracks):
            where = f"{rec}, tracks[{j}]"
            tid = t.get("id") if isinstance(t, dict) else None
            box = t.get("box") if isinstance(t, dict) else None
            if type(tid) is not int or tid < 0:
                raise FormatError(p, f"id: expected a track id >= 0, got {short(tid)}", where)
            if not (isinstance(box, list) and len(box) == 4 and all(map(is_number, box))):
                raise FormatError(p, f"box: expected 4 finite numbers x y w h, got {short(box)}", where)
            if box[2] < 0 or box[3] < 0:
                raise FormatError(p, f"box: expected width and height >= 0, got {short(box)}", where)
            ids.append(tid)
            boxes.append(box)
        if len(set(ids)) != len(ids):
            raise FormatError(p, "tracks: expected each id once per frame", rec)
        if frame in out:
            raise FormatError(p, f"frame {frame} given twice; expected one record per frame", rec)
        out[frame] = FrameBoxes(np.asarray(ids, np.int64), np.asarray(boxes, np.float64).reshape(-1, 4))
    if not seen:
        raise FormatError(
            p,
            "no frame record has 'tracks' (the people's boxes): box matching needs a run's results.jsonl "
            "(pairedge run writes them); fix by scoring that file, or drop --match-boxes when the ids are "
            "already the ground truth's",
        )
    return out


def read_truth_boxes(path: str | Path) -> dict[int, FrameBoxes]:
    """The true people of each frame of a MOT ground-truth file (every row, whatever its ``conf``), keyed by
    the run's frame (MOT frame - 1).

    Raises:
        FormatError: a malformed MOT file; InputError: a row without a track id (a detection file).
    """

    table = read_mot(path)
    keep = np.ones(len(table), bool)
    if (table.track_id[keep] < 0).any():
        raise InputError(
            f"{path}: rows with id -1 (a detection file?); --match-boxes needs ground truth with track ids "
            "(MOT gt.txt)"
        )
    out: dict[int, FrameBoxes] = {}
    frame, ids, boxes = table.frame[keep] - 1, table.track_id[keep], table.boxes[keep].astype(np.float64)
    order = np.argsort(frame, kind="stable")
    frames, starts = np.unique(frame[order], return_index=True)
    for f, rows in zip(frames.tolist(), np.split(order, starts[1:]), strict=True):
        out[f] = FrameBoxes(ids[rows], boxes[rows])
    return out


@dataclass(frozen=True)
class IdMapping:
    """Predicted id -> true id per frame, after box matching.

    Attributes:
        true_of: (frame, predicted id) -> the matched true id, for matched people only.
        fresh: the id offset of unmatched predicted people (above every true id): id ``fresh + pid``.
        counts: people-frames ``pred``, ``matched``, ``pred_unmatched``, ``truth``, ``truth_unmatched``.
    """

    true_of: dict[tuple[int, int], int]
    fresh: int
    counts: dict[str, int]

    def map(self, frame: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """(N,) int64 the true id of each ``(frame, id)`` or, unmatched, its fresh id."""
        return np.asarray(
            [
                self.true_of.get((f, i), self.fresh + i)
                for f, i in zip(frame.tolist(), ids.tolist(), strict=True)
            ],
            np.int64,
        )


def match_ids(
    pred: dict[int, FrameBoxes], truth: dict[int, FrameBoxes], frames: np.ndarray, min_iou: float = MIN_IOU
) -> IdMapping:
    """Match the predicted people of each of ``frames`` (F,) to the true people of the same frame."""
    true_of: dict[tuple[int, int], int] = {}
    counts = dict.fromkeys(("pred", "matched", "pred_unmatched", "truth", "truth_unmatched"), 0)
    top = max((int(t.ids.max()) for t in truth.values() if len(t.ids)), default=-1)
    empty = FrameBoxes(np.zeros(0, np.int64), np.zeros((0, 4)))
    for f in np.unique(frames).tolist():
        p, t = pred.get(f, empty), truth.get(f, empty)
        j = match_boxes(p.boxes, t.boxes, min_iou)
        hit = j >= 0
        true_of.update(zip(((f, i) for i in p.ids[hit].tolist()), t.ids[j[hit]].tolist(), strict=True))
        n = int(hit.sum())
        counts["pred"] += len(p.ids)
        counts["matched"] += n
        counts["pred_unmatched"] += len(p.ids) - n
        counts["truth"] += len(t.ids)
        counts["truth_unmatched"] += len(t.ids) - n
    return IdMapping(true_of, top + 1, counts)


def remap(pred: PairwiseFile, mapping: IdMapping) -> PairwiseFile:
    """``pred`` with every person's id replaced by its true id (or fresh id) in its frame."""
    t = pred.pairs
    a, b = mapping.map(t.frame, t.id_a), mapping.map(t.frame, t.id_b)
    pairs = PairTable(t.frame, np.minimum(a, b), np.maximum(a, b), t.label, t.p_interact, t.probs, t.line)
    groups = pred.groups
    if groups is not None:
        member_frame = groups.frame[groups.member_group]
        groups = Groups(
            groups.frame, groups.activity, groups.member_group, mapping.map(member_frame, groups.member_id)
        )
    return PairwiseFile(pred.path, pred.labels, pred.frames, pairs, groups, pred.group_line)


def check_matched(mapping: IdMapping, gold: PairwiseFile, gt: str | Path, min_iou: float = MIN_IOU) -> None:
    """Refuse a box matching that matched nothing a score could use (one line saying why).

    Raises:
        InputError: the box truth has no box in any scored frame (another clip, or frames off by more than
            the MOT 1-based shift); the run's people overlap no true box at IoU >= ``min_iou``; or the true
            ids matched are none of the ids the pairwise ground truth names (the two truths number people
            differently). Scoring on would give F1 0 for a reason that is not the model's.
    """
    c = mapping.counts
    if c["truth"] == 0:
        raise InputError(
            f"--match-boxes {gt}: no true box in any of the {len(np.unique(gold.frames)):,} scored frames "
            "(MOT frame k + 1 is the run's frame k): is it the ground truth of this clip?"
        )
    if c["pred"] and not c["matched"]:
        raise InputError(
            f"--match-boxes {gt}: none of the run's {c['pred']:,} people-frames overlaps a true box at IoU "
            f">= {min_iou:g} (its {c['truth']:,} boxes): boxes of another clip, or scaled differently?"
        )
    named = {int(v) for v in np.concatenate([gold.pairs.id_a, gold.pairs.id_b]).tolist()}
    if gold.groups is not None:
        named |= {int(v) for v in gold.groups.member_id.tolist()}
    matched = set(mapping.true_of.values())
    if matched and named and not matched & named:
        raise InputError(
            f"--match-boxes {gt}: the true ids the run's people matched ({_some(matched)}) are none of the "
            f"ids the pairwise ground truth names ({_some(named)}): the two truths number people differently"
        )


def _some(ids: set[int], shown: int = 6) -> str:
    """``"1, 2, 3, ... (40 ids)"``: the smallest ``shown`` of a set of ids."""
    first = ", ".join(str(i) for i in sorted(ids)[:shown])
    return first if len(ids) <= shown else f"{first}, ... ({len(ids)} ids)"


def matching_summary(
    mapping: IdMapping, gt: str | Path, min_iou: float = MIN_IOU
) -> tuple[dict[str, Any], str]:
    """Details (JSON) and a one-line note saying how many people-frames matched."""
    c = mapping.counts
    note = (
        f"box matching against {gt} (Hungarian, IoU >= {min_iou:g}): {c['matched']} of {c['pred']} predicted "
        f"people-frames matched a true person; {c['pred_unmatched']} unmatched (their pairs are false "
        f"positives); {c['truth_unmatched']} of {c['truth']} true people-frames unmatched (their pairs are "
        "misses)"
    )
    return {"box_matching": {"gt": str(gt), "min_iou": min_iou, **c}}, note
