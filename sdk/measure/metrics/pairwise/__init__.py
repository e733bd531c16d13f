"""The ``pairwise`` protocol (Liang et al. 2026; SPEC.md §7): scoring predictions against ground truth.

Which pairs count for what (both files parsed by :mod:`pairedge.measure.metrics.pairwise.files`):

- **Frames.** The ground-truth file defines the evaluated frames (its frame records; for CSV, the frames of
  its rows). Predictions for other frames are ignored and counted in ``details["pred_pairs_outside_gold"]``.
- **Interacting.** A ground-truth pair interacts when its ``p_interact`` (default 1) is >= 0.5; a predicted
  pair when its ``p_interact`` (default 1) is >= ``tau``.
- **Classification** (accuracy, MPCA, macro-F1, confusion): every interacting ground-truth pair, with the
  label of the prediction for the same ``(frame, id_a, id_b)`` whatever its ``p_interact`` (stage 2 is
  scored on the true pairs, as in the paper). A true pair with no prediction, or a prediction without a
  label, is counted wrong and reported as ``missing``. Predicted pairs that are not true pairs do not
  enter classification (they are stage-1 false positives).
- **Stage 1**: P / R / F1 of the predicted interacting set against the true interacting set.
- **Group activity**: for each true group of >= 2 people with an activity, the majority vote of the labels
  of all predicted pairs inside it (ties: larger summed ``probs`` of the voting pairs, or summed
  ``p_interact`` when the file has no ``probs``; then the lower class id); mean vote share reported.
- **Group detection**: predicted groups vs true groups at member-set IoU > 0.5, by size 1, 2, 3, 4, 5+
  (TP / FN by true size, FP by predicted size). Groups are scored exactly as listed (list singletons
  explicitly to score size 1). Skipped when the ground truth (or the prediction) has no ``groups`` at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from pairedge.core.errors import FormatError, InputError
from pairedge.core.labels import get_label_set
from pairedge.measure.metrics.box_matching import MIN_IOU
from pairedge.measure.metrics.pairwise import boxes as pb
from pairedge.measure.metrics.pairwise.classification import (
    PairwiseMetrics,
    classification_metrics,
    metrics_from_confusion,
)
from pairedge.measure.metrics.pairwise.files import (
    PairTable,
    PairwiseFile,
    read_label_header,
    read_pairwise_file,
)
from pairedge.measure.metrics.pairwise.groups import (
    DetectionScore,
    GroupActivityScore,
    GroupDetectionScore,
    Groups,
    group_activity,
    group_detection,
    pair_detection,
)
from pairedge.measure.metrics.pairwise.keys import lookup, row_keys
from pairedge.measure.metrics.pairwise.report import build_report
from pairedge.measure.metrics.result import ScoreReport

__all__ = [
    "DetectionScore",
    "GroupActivityScore",
    "GroupDetectionScore",
    "Groups",
    "PairwiseFile",
    "PairwiseMetrics",
    "classification_metrics",
    "group_activity",
    "group_detection",
    "metrics_from_confusion",
    "pair_detection",
    "read_pairwise_file",
    "resolve_labels",
    "score",
    "score_files",
]

#: A ground-truth pair interacts when its p_interact is at least this (gold files give 0 / 1, default 1).
GOLD_THRESHOLD = 0.5


def score_files(
    pred: str | Path,
    gold: str | Path,
    *,
    tau: float = 0.5,
    labels: str | Sequence[str] | None = None,
    allow_empty: bool = False,
    match_boxes: str | Path | None = None,
    match_iou: float = MIN_IOU,
) -> ScoreReport:
    """Score a prediction file against a ground-truth file (JSON Lines or CSV).

    Args:
        pred: predictions (e.g. the output of ``pairedge run``).
        gold: ground truth in the same schema.
        tau: stage-1 threshold on predicted ``p_interact``.
        labels: the label set when neither file has a header: a known name (``"paper3"``) or class names.
        allow_empty: score a ground truth without any interacting pair or group (its false positives
            still count; ``pairedge eval`` pools such sources with others) instead of refusing it.
        match_boxes: a MOT ground-truth file with the true boxes: match the prediction's people (its
            ``tracks``) to the true people per frame first (:mod:`pairedge.measure.metrics.pairwise.boxes`).
        match_iou: the IoU a predicted box needs with a true one to be that person (0.5, the MOT
            convention; a lower value shows how much of a score is box agreement rather than wrong people).

    Raises:
        FormatError: a file is malformed (names the file, line and problem).
        InputError: no label set is known, ``tau`` is not in [0, 1], or the box matching matched nothing
            usable (:func:`pairedge.measure.metrics.pairwise.boxes.check_matched`), or ``match_iou`` is not in
            (0, 1].
    """
    if isinstance(match_iou, bool) or not isinstance(match_iou, int | float) or not 0.0 < match_iou <= 1.0:
        raise InputError(f"match_iou: expected a number in (0, 1], got {match_iou!r}")
    names = resolve_labels(pred, gold, labels)
    predicted, truth = read_pairwise_file(pred, names), read_pairwise_file(gold, names)
    if match_boxes is None:
        return score(predicted, truth, tau=tau, allow_empty=allow_empty)
    from dataclasses import replace

    run_tracks, true_boxes = pb.read_run_tracks(pred), pb.read_truth_boxes(match_boxes)
    mapping = pb.match_ids(run_tracks, true_boxes, truth.frames, match_iou)
    pb.check_matched(mapping, truth, match_boxes, match_iou)
    report = score(pb.remap(predicted, mapping), truth, tau=tau, allow_empty=allow_empty)
    details, note = pb.matching_summary(mapping, match_boxes, match_iou)
    return replace(report, details={**report.details, **details}, notes=(*report.notes, note))


def resolve_labels(
    pred: str | Path, gold: str | Path, labels: str | Sequence[str] | None = None
) -> tuple[str, ...]:
    """The label set shared by both files: their headers (which must agree) or else ``labels``."""
    declared = {str(p): h for p in (gold, pred) if (h := read_label_header(p)) is not None}
    given: tuple[str, ...] | None = None
    if isinstance(labels, str):
        given = get_label_set(labels).classes
    elif labels is not None:
        given = tuple(labels)
    for path, names in declared.items():
        if given is not None and names != given:
            raise FormatError(
                path,
                f"header declares labels {list(names)}, expected {list(given)}; fix by making "
                "the headers (and --labels) name the same label set",
                "line 1",
            )
        given = names
    if given is None:
        raise InputError(
            'no label set: neither file starts with a header line such as {"labels": [...]} or '
            '{"label_set": "paper3"}; fix by adding one or passing labels (--labels on the CLI)'
        )
    return given


def score(
    pred: PairwiseFile, gold: PairwiseFile, *, tau: float = 0.5, allow_empty: bool = False
) -> ScoreReport:
    """Score parsed files (same label set) with the rules in this module's docstring.

    Raises:
        FormatError: the ground truth has no frame, or (unless ``allow_empty``) no interacting pair and no
            group (nothing to score).
        InputError: ``tau`` outside [0, 1] or different label sets.
    """
    if not isinstance(tau, int | float) or not 0.0 <= float(tau) <= 1.0:
        raise InputError(f"tau: expected a threshold in [0, 1], got {tau!r}")
    if pred.labels != gold.labels:
        raise InputError(f"label sets differ: prediction {pred.labels} vs ground truth {gold.labels}")
    _check_not_empty(gold, allow_empty)
    inside = np.isin(pred.pairs.frame, gold.frames)
    ppairs = pred.pairs.subset(inside)
    truth = gold.pairs.subset(gold.pairs.p_interact >= GOLD_THRESHOLD)
    unlabeled = np.flatnonzero(truth.label < 0)
    if len(unlabeled):
        raise FormatError(
            gold.path,
            'an interacting ground-truth pair needs a label; fix by adding "label" or '
            'setting "p_interact": 0 for a non-interacting pair',
            f"line {int(truth.line[unlabeled[0]])}",
        )
    cls = classification_metrics(truth.label, _matched_labels(ppairs, truth), len(gold.labels), gold.labels)
    stage1 = pair_detection(ppairs.rows()[ppairs.p_interact >= tau], truth.rows())
    activity = detection = None
    notes: list[str] = []
    if gold.groups is None:
        notes.append("ground truth has no groups: group activity and group detection not scored")
    else:
        activity = group_activity(
            gold.groups, ppairs.rows(), ppairs.label, len(gold.labels), _tie_weights(ppairs, len(gold.labels))
        )
        if pred.groups is None:
            notes.append("prediction has no groups: group detection not scored")
        else:
            detection = group_detection(_groups_in(pred.groups, gold.frames), gold.groups)
    if len(pred.pairs.frame) == 0 and (pred.groups is None or len(pred.groups.frame) == 0):
        notes.append(f"{pred.path} holds no predicted pair or group: every true pair counts as missed")
    counts = {
        "gold_pairs": len(gold.pairs.frame),
        "gold_interacting_pairs": len(truth.frame),
        "pred_pairs": len(pred.pairs.frame),
        "pred_pairs_outside_gold": int((~inside).sum()),
        "pred_interacting_pairs": int((ppairs.p_interact >= tau).sum()),
        "gold_frames": len(gold.frames),
    }
    return build_report(cls, stage1, activity, detection, tau=tau, counts=counts, notes=notes)


def _check_not_empty(gold: PairwiseFile, allow_empty: bool = False) -> None:
    """A ground truth without frames, or without any interacting pair or group, has nothing to score."""
    if len(gold.frames) == 0:
        raise FormatError(
            gold.path,
            "no frame to score (the file is empty or holds only a header); expected at least one "
            "frame record (JSON Lines) or pair row (CSV)",
        )
    has_pairs = bool((gold.pairs.p_interact >= GOLD_THRESHOLD).any())
    if not has_pairs and not allow_empty and (gold.groups is None or len(gold.groups.frame) == 0):
        raise FormatError(
            gold.path,
            f"no interacting pair and no group in its {len(gold.frames)} frames: nothing to score "
            "(accuracy, MPCA and F1 would be undefined); expected at least one true pair",
        )


def _matched_labels(pred: PairTable, truth: PairTable) -> np.ndarray:
    """(K,) int64: for each true pair, the predicted label of the same pair, -1 when there is none."""
    pk, tk = row_keys(pred.rows(), truth.rows())
    order = np.argsort(pk)
    return lookup(pk[order], pred.label[order], tk)


def _tie_weights(pred: PairTable, c: int) -> np.ndarray:
    """(M, C) tie-break weights: class probabilities, or p_interact on the predicted class (one-hot)."""
    if pred.probs is not None:
        return np.nan_to_num(pred.probs)
    weights = np.zeros((len(pred.label), c))
    has = pred.label >= 0
    weights[np.flatnonzero(has), pred.label[has]] = pred.p_interact[has]
    return weights


def _groups_in(groups: Groups, frames: np.ndarray) -> Groups:
    """The groups whose frame is in ``frames``, re-indexed."""
    keep = np.isin(groups.frame, frames)
    new_index = np.cumsum(keep) - 1
    mkeep = keep[groups.member_group]
    return Groups(
        frame=groups.frame[keep],
        activity=groups.activity[keep],
        member_group=new_index[groups.member_group[mkeep]],
        member_id=groups.member_id[mkeep],
    )
