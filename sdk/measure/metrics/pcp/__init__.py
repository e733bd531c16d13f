"""PCP (Percentage of Correctly estimated body Parts), scored as the official code does.

* ``loose`` -- the official protocol of Buffy, ETHZ PASCAL, We Are Family and Synchronic Activities
  Stickmen (CALVIN MATLAB ``BatchEval`` / ``EvalStickmenMulti`` / ``DirectEvalSegms``): detection stage on
  upper-body windows, then the averaged parallel / perpendicular endpoint criterion.
* ``strict`` -- LSP and IIP (Pishchulin et al. 2012): both endpoints within ``t * L``, no detection stage.

Inputs are lists of :class:`~pairedge.core.io.stickmen.StickmenImage` (ground truth and estimates, matched by
image name), or files via :func:`score_files` (stickmen text or the JSON layout of ``docs/formats.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.stickmen import N_PARTS, PARTS, StickmenImage, stick_problems
from pairedge.core.io.stickmen_json import read_stickmen_file
from pairedge.measure.metrics.pcp.core import (
    loose_correct,
    match_first,
    occluded,
    overlapping_windows,
    stickman_windows,
    strict_correct,
)
from pairedge.measure.metrics.result import ScoreReport, Table

MODES = ("loose", "strict")


@dataclass(frozen=True)
class _Flat:
    """Ground truth and estimates flattened over images (image = index into ``names``)."""

    names: tuple[str, ...]
    gt: np.ndarray  # (G, 6, 4)
    gt_image: np.ndarray  # (G,)
    est: np.ndarray  # (E, 6, 4)
    est_image: np.ndarray  # (E,)
    est_windows: np.ndarray  # (E, 4), NaN rows where not given
    est_start: np.ndarray  # (n_images,) index of each image's first estimate


def _as_sticks(im: StickmenImage, label: str) -> np.ndarray:
    arr = np.asarray(im.sticks, dtype=np.float64)
    if arr.shape == (N_PARTS, 4):
        arr = arr[None]
    if arr.ndim != 3 or arr.shape[1:] != (N_PARTS, 4):
        raise FormatError(
            label, f"expected sticks of shape (P, {N_PARTS}, 4), got {arr.shape}", f"image {im.name!r}"
        )
    return arr


def _as_windows(im: StickmenImage, count: int, label: str) -> np.ndarray:
    arr = np.asarray(im.windows, dtype=np.float64)
    if arr.shape != (count, 4):
        raise FormatError(
            label, f"expected windows of shape ({count}, 4), got {arr.shape}", f"image {im.name!r}"
        )
    return arr


def _check_values(sticks: np.ndarray, image: np.ndarray, names: tuple[str, ...], label: str) -> None:
    """Partial-NaN or infinite sticks (vectorised over all images) -> FormatError naming the image."""
    problem = stick_problems(sticks)
    if problem is None:
        return
    row, what = problem
    raise FormatError(
        label, f"part {PARTS[row % N_PARTS]}: {what}", f"image {names[image[row // N_PARTS]]!r}"
    )


def _flatten(
    pred: Sequence[StickmenImage], gold: Sequence[StickmenImage], pred_label: str, gold_label: str
) -> _Flat:
    names = tuple(im.name for im in gold)
    index = {name: k for k, name in enumerate(names)}
    if len(index) != len(names):
        raise FormatError(gold_label, "image names must be unique")
    gt_parts = [_as_sticks(im, gold_label) for im in gold]
    if not sum(map(len, gt_parts)):
        raise FormatError(
            gold_label,
            f"no ground-truth stickman in its {len(names)} images: nothing to score (PCP would be "
            "undefined); expected at least one annotated person",
        )
    by_image: dict[int, StickmenImage] = {}
    for im in pred:
        if im.name not in index:
            raise FormatError(
                pred_label, f"image {im.name!r} is not in the ground truth; expected one of its images"
            )
        if index[im.name] in by_image:
            raise FormatError(pred_label, f"image {im.name!r} appears twice")
        by_image[index[im.name]] = im
    order = sorted(by_image)  # estimates grouped by ground-truth image order
    est_parts = [_as_sticks(by_image[k], pred_label) for k in order]
    counts = np.zeros(len(names), dtype=np.int64)
    counts[order] = [len(s) for s in est_parts]
    gt, est = _cat(gt_parts), _cat(est_parts)
    gt_image = np.repeat(np.arange(len(names)), [len(s) for s in gt_parts])
    est_image = np.repeat(np.arange(len(names)), counts)
    _check_values(gt, gt_image, names, gold_label)
    _check_values(est, est_image, names, pred_label)
    start = np.cumsum(counts) - counts
    windows = np.full((len(est), 4), np.nan)
    for k in order:
        im = by_image[k]
        if im.windows is not None:
            windows[start[k] : start[k] + counts[k]] = _as_windows(im, int(counts[k]), pred_label)
    return _Flat(names, gt, gt_image, est, est_image, windows, start)


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros((0, N_PARTS, 4))


def pcp_loose(
    pred: Sequence[StickmenImage],
    gold: Sequence[StickmenImage],
    *,
    threshold: float = 0.5,
    pred_label: str = "<pred>",
    gold_label: str = "<gold>",
) -> ScoreReport:
    """Loose PCP with the official detection stage.

    A ground-truth person is evaluated only if one estimated stickman of its image has a detection window
    with IoU > 0.5 with the window derived from the ground-truth torso and head; the first such estimate
    (input order) is scored. Estimated windows come from ``StickmenImage.windows`` or, where absent /
    NaN, are derived the same way. Two estimated windows of one image overlapping with IoU > 0.5 are an
    error, as in the official code.

    Returns:
        summary ``detection_rate``, ``pcp`` (over detected people), ``total_pcp`` (= pcp x detection rate);
        a per-part table; details with counts.
    """
    flat = _flatten(pred, gold, pred_label, gold_label)
    windows = flat.est_windows.copy()
    derive = np.isnan(windows).all(axis=1)
    windows[derive] = stickman_windows(flat.est[derive])
    clash = overlapping_windows(windows, flat.est_image)
    if clash is not None:
        i, j = clash
        image = int(flat.est_image[i])
        li, lj = i - int(flat.est_start[image]), j - int(flat.est_start[image])
        raise FormatError(
            pred_label,
            f"estimated stickmen {li} and {lj} have detection windows overlapping with IoU > 0.5; the "
            "official protocol forbids this: keep one of them (e.g. by non-maximum suppression)",
            f"image {flat.names[image]!r}",
        )
    gt_windows = stickman_windows(flat.gt)
    match = match_first(gt_windows, flat.gt_image, windows, flat.est_image)
    detected = match >= 0
    parts = loose_correct(flat.est[match[detected]], flat.gt[detected], threshold)
    n_gt, n_det = len(flat.gt), int(detected.sum())
    notes = []
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = n_det / n_gt  # n_gt > 0: _flatten refuses a ground truth without people
        pcp = float(parts.sum() / (n_det * N_PARTS)) if n_det else float("nan")
        per_part = parts.sum(axis=0) / n_det if n_det else np.full(N_PARTS, np.nan)
    if n_det == 0:
        notes.append(
            "no ground-truth person detected: PCP over detected people is 0/0 (NaN), as in the official code"
        )
    no_window = int(np.isnan(gt_windows).any(axis=1).sum())
    if no_window:
        notes.append(
            f"{no_window} ground-truth people have an occluded torso or head: no window, never detected"
        )
    total = pcp * rate
    rows = tuple((PARTS[p], float(per_part[p]), float(per_part[p] * rate)) for p in range(N_PARTS))
    return ScoreReport(
        protocol="pcp",
        summary={"detection_rate": float(rate), "pcp": pcp, "total_pcp": float(total)},
        tables=(
            Table(f"PCP per part (loose, t={threshold:g})", ("part", "pcp_detected", "pcp_total"), rows),
        ),
        details={
            "mode": "loose",
            "threshold": threshold,
            "n_images": len(flat.names),
            "n_gt": n_gt,
            "n_detected": n_det,
            "n_estimated": len(flat.est),
            "correct_parts": int(parts.sum()),
            "per_part": {PARTS[p]: float(per_part[p]) for p in range(N_PARTS)},
        },
        notes=tuple(notes),
    )


def pcp_strict(
    pred: Sequence[StickmenImage],
    gold: Sequence[StickmenImage],
    *,
    threshold: float = 0.5,
    pred_label: str = "<pred>",
    gold_label: str = "<gold>",
) -> ScoreReport:
    """Strict PCP (LSP / IIP): the k-th estimated stickman of an image is scored against the k-th
    ground-truth stickman; both endpoints within ``t * L`` (``<=``); a missing estimate (absent person or
    NaN stick) is wrong. No detection stage; estimated windows are ignored.

    Raises:
        FormatError: an image with more estimates than ground-truth people, or an occluded (NaN)
            ground-truth part (strict PCP needs every part annotated).
    """
    flat = _flatten(pred, gold, pred_label, gold_label)
    gt_counts = np.bincount(flat.gt_image, minlength=len(flat.names))
    est_counts = np.bincount(flat.est_image, minlength=len(flat.names))
    extra = np.flatnonzero(est_counts > gt_counts)
    if len(extra):
        k = int(extra[0])
        raise FormatError(
            pred_label,
            f"{est_counts[k]} estimated stickmen for {gt_counts[k]} ground-truth people; strict PCP pairs "
            "them by position, so give at most one estimate per ground-truth person",
            f"image {flat.names[k]!r}",
        )
    gt_start = np.cumsum(gt_counts) - gt_counts
    hidden = occluded(flat.gt)
    if hidden.any():
        person, part = (int(v) for v in np.argwhere(hidden)[0])
        image = int(flat.gt_image[person])
        raise FormatError(
            gold_label,
            f"part {PARTS[part]} of ground-truth person {person - int(gt_start[image])} is occluded (NaN); "
            "strict PCP needs every ground-truth part annotated",
            f"image {flat.names[image]!r}",
        )
    est = np.full_like(flat.gt, np.nan)
    position = np.arange(len(flat.est)) - flat.est_start[flat.est_image]
    est[gt_start[flat.est_image] + position] = flat.est
    parts = strict_correct(est, flat.gt, threshold)
    n_gt = len(flat.gt)
    with np.errstate(invalid="ignore", divide="ignore"):
        pcp = float(parts.sum() / (n_gt * N_PARTS))  # n_gt > 0 (see _flatten)
        per_part = parts.sum(axis=0) / n_gt
    notes = ()
    return ScoreReport(
        protocol="pcp",
        summary={"pcp": pcp},
        tables=(
            Table(
                f"PCP per part (strict, t={threshold:g})",
                ("part", "pcp"),
                tuple((PARTS[p], float(per_part[p])) for p in range(N_PARTS)),
            ),
        ),
        details={
            "mode": "strict",
            "threshold": threshold,
            "n_images": len(flat.names),
            "n_gt": n_gt,
            "n_estimated": len(flat.est),
            "correct_parts": int(parts.sum()),
            "per_part": {PARTS[p]: float(per_part[p]) for p in range(N_PARTS)},
        },
        notes=notes,
    )


def score_images(
    pred: Sequence[StickmenImage],
    gold: Sequence[StickmenImage],
    *,
    mode: str = "loose",
    threshold: float = 0.5,
    pred_label: str = "<pred>",
    gold_label: str = "<gold>",
) -> ScoreReport:
    """Score in-memory images with ``mode`` ``"loose"`` (default, official Buffy) or ``"strict"``.

    Raises:
        FormatError: a ground truth without any stickman (nothing to score) or malformed images.
        InputError: an unknown mode or a threshold that is not a finite number > 0.
    """
    if mode not in MODES:
        raise InputError(f"unknown PCP mode {mode!r}; expected one of {list(MODES)}")
    if not (np.isfinite(threshold) and threshold > 0):
        raise InputError(f"expected a PCP threshold > 0, got {threshold}")
    if mode == "loose":
        return pcp_loose(pred, gold, threshold=threshold, pred_label=pred_label, gold_label=gold_label)
    return pcp_strict(pred, gold, threshold=threshold, pred_label=pred_label, gold_label=gold_label)


def score_files(pred: Path, gold: Path, *, mode: str = "loose", threshold: float = 0.5) -> ScoreReport:
    """Score a prediction file against a ground-truth file.

    Each file is stickmen JSON (``.json``) or stickmen text (bare: one image; official: images by header
    name); see ``docs/formats.md``. Images are matched by name; a ground-truth image missing from the
    predictions has no estimates. Windows in the ground truth are ignored (derived, as officially).
    """
    gold_images = read_stickmen_file(gold)
    pred_images = read_stickmen_file(pred)
    report = score_images(
        pred_images, gold_images, mode=mode, threshold=threshold, pred_label=str(pred), gold_label=str(gold)
    )
    details = {**report.details, "pred": str(pred), "gold": str(gold)}
    return ScoreReport(report.protocol, report.summary, report.tables, details, report.notes)
