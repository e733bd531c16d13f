"""Input sanitising for the stream: malformed frames and detections are dropped and reported, never raised.

Frames: (H, W) or (H, W, 1) gray, or (H, W, 3) BGR, uint8, at least ``min_image_side`` pixels on a side and
at most :data:`pairedge.core.limits.MAX_FRAME_PIXELS` pixels (:data:`~pairedge.core.limits.MAX_FRAME_SIDE` a
side), judged on the declared shape before anything is copied; anything else (wrong dtype, shape, BGRA, empty,
too large, not an array) drops the image for this frame: the flow is skipped and the stream restarts its flow
at the next good frame. Per-frame work is so bounded in pixels as :func:`cap_people` bounds it in people.

Detections, row by row (vectorised): non-finite box or score; width or height below ``min_box_side``;
huge boxes (larger than ``max_box_factor`` times the image); boxes entirely outside the image; ids below -1
or at / above 2**31; repeated track ids (the first row is kept); boxes or scores beyond the float32 range.
Detections that are not a :class:`~pairedge.core.types.Detections`-like object with consistent real-valued
array shapes (including objects whose attribute access raises anything) are dropped as a whole, with the
reason.

Then :func:`cap_people` keeps at most ``max_people`` detections (the most confident, ties to the larger box),
which bounds the work of every later stage. :func:`image_size_problem` checks a caller's ``(W, H)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pairedge.core import limits
from pairedge.core.types import ORIENTATION_LIMIT, Detections
from pairedge.runtime.config import ValidationConfig

ID_LIMIT = 1 << 31
#: Largest float32: boxes and scores beyond it would overflow to inf when stored as float32.
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: Largest image side accepted in ``image_size`` (pixels).
MAX_IMAGE_SIDE = 1 << 20


def image_size_problem(image_size: Any) -> tuple[int, int] | str:
    """``(W, H)`` as ints, or why ``image_size`` is unusable (two whole numbers in [1, 2**20] expected)."""
    try:
        w, h = image_size
        values = (float(w), float(h))
    except Exception as exc:  # noqa: BLE001 - any failure of a caller's object is a reported bad input
        return f"image_size {shorten(image_size)} unusable ({type(exc).__name__}); expected (W, H) integers"
    if not all(v.is_integer() and 1 <= v <= MAX_IMAGE_SIDE for v in values):
        return f"image_size {shorten(image_size)}: expected (W, H) whole numbers in [1, {MAX_IMAGE_SIDE}]"
    return int(values[0]), int(values[1])


def shorten(value: Any, limit: int = 60, *, text: bool = False) -> str:
    """``repr(value)`` (``str`` when ``text``) cut to ``limit`` characters; never raises (for messages about
    a caller's objects, whose ``repr`` may raise or be huge)."""
    try:
        out = str(value) if text else repr(value)
    except Exception:  # noqa: BLE001 - a repr that raises, or an int too long to print
        out = f"<{type(value).__name__}>"
    return out if len(out) <= limit else out[: limit - 3] + "..."


def validate_frame(frame: Any, config: ValidationConfig) -> tuple[np.ndarray | None, str | None]:
    """Return ``(image, None)`` for a usable frame, else ``(None, reason)``.

    The returned image is (H, W) uint8 gray or (H, W, 3) uint8 BGR, C-contiguous (a view when possible).
    """
    if frame is None:
        return None, "no frame given"
    if not isinstance(frame, np.ndarray):
        return None, f"expected a numpy image, got {type(frame).__name__}"
    if frame.dtype != np.uint8:
        return None, f"expected a uint8 image, got {frame.dtype} (convert with cv2.convertScaleAbs or astype)"
    if frame.ndim == 3 and frame.shape[2] == 1:
        frame = frame[:, :, 0]
    if not (frame.ndim == 2 or (frame.ndim == 3 and frame.shape[2] == 3)):
        return None, f"expected an (H, W) gray or (H, W, 3) BGR image, got shape {frame.shape}"
    if min(frame.shape[:2]) < config.min_image_side:
        return None, f"expected an image at least {config.min_image_side} px on a side, got {frame.shape[:2]}"
    too_large = frame_size_problem(int(frame.shape[1]), int(frame.shape[0]))
    if too_large is not None:
        return None, too_large
    return np.ascontiguousarray(frame), None


def frame_size_problem(width: int, height: int) -> str | None:
    """Why a ``width x height`` frame is above the pixel ceiling (read at call time from
    :mod:`pairedge.core.limits`, where a user may raise it), or None."""
    side, pixels = limits.MAX_FRAME_SIDE, limits.MAX_FRAME_PIXELS
    if width <= side and height <= side and width * height <= pixels:
        return None
    which = "MAX_FRAME_SIDE" if max(width, height) > side else "MAX_FRAME_PIXELS"
    return (
        f"an image of {width} x {height} px ({width * height / 1e6:.1f} MP), above the ceiling of "
        f"{pixels / 1e6:g} MP and {side} px a side (pairedge.core.limits.{which}); resize the frames"
    )


def _as_arrays(detections: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | str:
    """(boxes (N,4) float64, ids (N,) int64, scores (N,) float64) or the reason they are unusable."""
    if detections is None:
        return np.zeros((0, 4)), np.zeros(0, np.int64), np.zeros(0)
    try:
        raw = [np.asarray(detections.boxes), np.asarray(detections.track_ids), np.asarray(detections.scores)]
        complex_ = [
            n for n, a in zip(("boxes", "track_ids", "scores"), raw, strict=True) if a.dtype.kind == "c"
        ]
        if complex_:
            return f"detections: expected real numbers, got complex {', '.join(complex_)}"
        boxes, ids_raw, scores = (np.asarray(a, dtype=np.float64) for a in raw)
        if boxes.size == 0 and ids_raw.size == 0 and scores.size == 0:  # e.g. empty lists: no detections
            boxes = boxes.reshape(0, 4)
            ids_raw, scores = ids_raw.reshape(0), scores.reshape(0)
    except Exception as exc:  # noqa: BLE001 - a caller's object may raise anything; drop and report it
        return (
            f"detections unusable ({type(exc).__name__}: {shorten(str(exc), 100)}); expected "
            "pairedge.core.types.Detections"
        )
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        return f"detections: expected boxes of shape (N, 4), got {boxes.shape}"
    n = len(boxes)
    if ids_raw.shape != (n,) or scores.shape != (n,):
        return f"detections: expected ({n},) ids and scores, got {ids_raw.shape} and {scores.shape}"
    with np.errstate(invalid="ignore"):
        bad_id = (
            ~np.isfinite(ids_raw) | (ids_raw != np.round(ids_raw)) | (ids_raw < -1) | (ids_raw >= ID_LIMIT)
        )
    ids = np.where(bad_id, -2, ids_raw).astype(np.int64)
    return boxes, ids, scores


def validate_detections(
    detections: Any, image_size: tuple[int, int] | None, config: ValidationConfig
) -> tuple[Detections, dict[str, int]]:
    """Drop malformed rows.

    Args:
        detections: a :class:`Detections` (or an object with ``boxes``, ``track_ids``, ``scores``), or None.
        image_size: ``(W, H)`` of the frame, or None when no image is known (no bounds checks then).
        config: thresholds.

    Returns:
        The kept rows (float32 boxes, int64 ids, float32 scores; ids may be -1) and reason -> count dropped.
    """
    clean = _clean_fast(detections, image_size, config)
    if clean is not None:
        if getattr(detections, "orientation", None) is None:
            return clean, {}
        ori, conf, ori_dropped = _orientation(detections, len(clean))
        return Detections(clean.boxes, clean.track_ids, clean.scores, ori, conf), ori_dropped
    arrays = _as_arrays(detections)
    if isinstance(arrays, str):
        return Detections.empty(), {arrays: 1}
    boxes, ids, scores = arrays
    reasons: list[tuple[str, np.ndarray]] = []
    finite = np.isfinite(boxes).all(axis=1) & np.isfinite(scores)
    reasons.append(("non-finite box or score", ~finite))
    in_range = (np.abs(np.where(finite[:, None], boxes, 0.0)) <= FLOAT32_MAX).all(axis=1)
    in_range &= np.abs(np.where(finite, scores, 0.0)) <= FLOAT32_MAX
    reasons.append(("box or score beyond the float32 range", finite & ~in_range))
    finite &= in_range
    b = np.where(finite[:, None], boxes, 0.0)
    reasons.append(
        (
            "box smaller than min_box_side",
            finite & ((b[:, 2] < config.min_box_side) | (b[:, 3] < config.min_box_side)),
        )
    )
    if image_size is not None:
        w, h = image_size
        huge = (b[:, 2] > config.max_box_factor * w) | (b[:, 3] > config.max_box_factor * h)
        outside = (b[:, 0] + b[:, 2] <= 0) | (b[:, 1] + b[:, 3] <= 0) | (b[:, 0] >= w) | (b[:, 1] >= h)
        reasons.append(("huge box", finite & huge))
        reasons.append(("box outside the image", finite & outside))
    reasons.append(("invalid track id", ids == -2))
    drop = np.zeros(len(boxes), bool)
    dropped: dict[str, int] = {}
    for reason, mask in reasons:
        new = mask & ~drop
        if new.any():
            dropped[reason] = int(new.sum())
        drop |= mask
    keep = np.flatnonzero(~drop)
    dup = _duplicates(ids[keep])
    if dup.any():
        dropped["duplicate track id"] = int(dup.sum())
        keep = keep[~dup]
    ori, conf, ori_reasons = _orientation(detections, len(boxes), keep)
    dropped.update(ori_reasons)
    clean = Detections(boxes[keep].astype(np.float32), ids[keep], scores[keep].astype(np.float32), ori, conf)
    return clean, dropped


def _orientation(
    detections: Any, n: int, keep: np.ndarray | None = None
) -> tuple[np.ndarray | None, np.ndarray | None, dict[str, int]]:
    """The optional orientations of the kept rows: ``(angles (K,) float32 wrapped to [-pi, pi), NaN =
    unknown; confidences (K,) float32; reason -> count)``. Unusable values make that person's orientation
    unknown (the box is kept) and are reported; NaN with confidence 0 (or no confidence) is simply unknown."""
    rows = np.arange(n) if keep is None else keep
    try:  # a caller's object may raise anything on attribute access or conversion
        raw = getattr(detections, "orientation", None)
        if raw is None:
            return None, None, {}
        raw_conf = getattr(detections, "orientation_conf", None)
        given = [np.asarray(raw)] + ([] if raw_conf is None else [np.asarray(raw_conf)])
        if any(x.dtype.kind == "c" for x in given):
            raise TypeError("complex values")
        a = np.asarray(given[0], dtype=np.float64).reshape(-1)
        c = np.ones_like(a) if raw_conf is None else np.asarray(given[1], dtype=np.float64).reshape(-1)
    except Exception as exc:  # noqa: BLE001 - reported; the boxes are kept
        reason = f"orientation ignored: not numbers ({type(exc).__name__}); boxes kept without it"
        return None, None, {reason: len(rows)}
    if a.shape != (n,) or c.shape != (n,):
        reason = f"orientation ignored: expected ({n},) angles and confidences, got {a.shape} and {c.shape}"
        return None, None, {reason: len(rows)}
    a, c = a[rows], c[rows]
    finite = np.isfinite(a)
    bad = np.isinf(a) | (finite & (np.abs(np.nan_to_num(a)) > ORIENTATION_LIMIT))
    bad |= ~np.isfinite(c) | (c < 0) | (c > 1)
    if raw_conf is not None:
        bad |= np.isnan(a) & (np.nan_to_num(c) > 0)  # a confidence for an angle that is NaN
    ok = finite & ~bad & (c > 0)
    angle = np.where(ok, (np.nan_to_num(a) + np.pi) % (2 * np.pi) - np.pi, np.nan).astype(np.float32)
    conf = np.where(ok, c, 0.0).astype(np.float32)
    reasons = {}
    if bad.any():
        reasons[
            "orientation ignored: NaN with a confidence, beyond +-2 pi (degrees?), inf, or confidence "
            "outside [0, 1]; box kept without it"
        ] = int(bad.sum())
    return angle, conf, reasons


def _clean_fast(
    detections: Any, image_size: tuple[int, int] | None, config: ValidationConfig
) -> Detections | None:
    """Copies of well-typed :class:`Detections` with nothing to drop (the usual frame), else None.

    Same rules as the full check in a few vectorised passes (any non-finite box goes to the full check).
    """
    if type(detections) is not Detections or image_size is None:  # subclasses may override attributes
        return None
    b, ids, sc = detections.boxes, detections.track_ids, detections.scores
    typed = (
        isinstance(b, np.ndarray)
        and b.dtype == np.float32
        and b.ndim == 2
        and b.shape[1] == 4
        and isinstance(ids, np.ndarray)
        and ids.dtype == np.int64
        and ids.shape == (len(b),)
        and isinstance(sc, np.ndarray)
        and sc.dtype == np.float32
        and sc.shape == (len(b),)
    )
    if not typed or len(b) == 0 or not np.isfinite(b).all():
        return None
    w, h = float(image_size[0]), float(image_size[1])
    x, y, bw, bh = b.astype(np.float64).T
    lo, f = config.min_box_side, config.max_box_factor
    ok = (bw >= lo) & (bh >= lo) & (bw <= f * w) & (bh <= f * h)
    ok &= (x + bw > 0) & (y + bh > 0) & (x < w) & (y < h)
    if not (ok.all() and np.isfinite(sc).all() and ids.min() >= -1 and ids.max() < ID_LIMIT):
        return None
    known = np.sort(ids[ids >= 0])
    if len(known) > 1 and bool((known[1:] == known[:-1]).any()):
        return None
    return Detections(b.copy(), ids.copy(), sc.copy())


def _duplicates(ids: np.ndarray) -> np.ndarray:
    """(N,) bool: rows whose id (>= 0) already occurred in an earlier row."""
    out = np.zeros(len(ids), bool)
    valid = np.flatnonzero(ids >= 0)
    if len(valid) < 2:
        return out
    _, first = np.unique(ids[valid], return_index=True)
    out[valid] = True
    out[valid[first]] = False
    return out


def cap_people(detections: Detections, max_people: int | None) -> tuple[Detections, int]:
    """Keep at most ``max_people`` detections: the highest scores, ties to the larger box area (nearer).

    Args:
        detections: validated detections (N rows).
        max_people: the cap, or None for none.

    Returns:
        The kept rows in their original order, and how many were dropped. O(N log N) for N > cap.
    """
    n = len(detections)
    if max_people is None or n <= max_people:
        return detections, 0
    area = detections.boxes[:, 2].astype(np.float64) * detections.boxes[:, 3]
    order = np.lexsort((np.arange(n), -area, -detections.scores.astype(np.float64)))
    keep = np.sort(order[:max_people])
    return detections.subset(keep), n - max_people
