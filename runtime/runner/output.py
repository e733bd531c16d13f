"""Writers of pipeline results: JSON Lines (one object per frame) and an annotated video.

JSON Lines: an optional header line ``{"labels": [...], ...}``, then per frame
``{"frame", "timestamp", "interactions": [{"ids", "label", "p_interact", "probs"}], "groups": [{"members",
"activity", "vote_share"}], "tracks", "timings_ms", "diagnostics"}`` — the schema the pairwise scorer reads
(``docs/formats.md``); ``activity`` is null for a group without one. The record of a frame where an automatic
operating point changed also carries ``"operating_point": {"name", "p_interact", "confirm_s"}``.

Video: boxes and ids coloured per track, a line between the centres of every interacting pair coloured by
its label (thicker when more confident), and the convex hull of every group outlined in the colour of its
activity with the activity and vote share written above it. Colours come from :mod:`pairedge.core.palette`
(the simulator preview uses the same table) and every text is drawn on a filled box of its colour.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import cv2
import numpy as np
from pairedge.core import palette
from pairedge.core.errors import BackendError, InputError
from pairedge.runtime.types import FrameResult

#: Deprecated alias: colours by class index now come from :func:`pairedge.core.palette.label_colours` (by
#: name).
LABEL_COLOURS = palette.EXTRA_COLOURS
_FOURCC = {".mp4": "mp4v", ".avi": "MJPG", ".mkv": "MJPG"}
#: Font scale of the labels drawn on the video.
_TEXT_SCALE = 0.45


def track_colour(track_id: int) -> tuple[int, int, int]:
    """A stable, well-spread BGR colour for a track id (:func:`pairedge.core.palette.track_colour`)."""
    return palette.track_colour(track_id)


def label_colour(label_id: int, labels: Sequence[str] = ()) -> tuple[int, int, int]:
    """The BGR colour of class ``label_id`` of ``labels`` (:func:`pairedge.core.palette.label_colour`: by
    name, then by index; grey for -1)."""
    k = int(label_id)
    return palette.label_colour(labels[k] if 0 <= k < len(labels) else None, k)


class JsonlWriter:
    """Writes one JSON object per frame.

    Args:
        path: output file (parent folders are created).
        labels: stage-2 class names for the header line; None writes no header.
        header: extra header fields (model description, source video, ...).
    """

    def __init__(
        self, path: str | Path, labels: Sequence[str] | None = None, header: Mapping[str, Any] | None = None
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO | None = self.path.open("w", encoding="utf-8")
        if labels is not None:
            self._line({"labels": list(labels), **(header or {})})

    def _line(self, obj: Mapping[str, Any]) -> None:
        if self._file is None:
            raise InputError(f"{self.path}: writer is closed")
        self._file.write(json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n")

    def write(self, result: FrameResult, extra: Mapping[str, Any] | None = None) -> None:
        """Append the record of one frame, with ``extra`` keys (e.g. an ``"operating_point"`` switch)."""
        record = result.to_json_dict()
        if extra:
            record.update(extra)
        self._line(record)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def annotate(canvas: np.ndarray, result: FrameResult) -> np.ndarray:
    """Draw ``result`` onto ``canvas`` ((H, W, 3) uint8 BGR) in place; returns it.

    Colours come from :mod:`pairedge.core.palette` (the simulator preview uses the same table); every text
    sits on a filled box of its colour (:func:`pairedge.core.palette.draw_label`), legible on bright and dark
    scenes.
    """
    boxes = np.asarray(result.boxes, np.float64)
    centres = {int(t): (b[:2] + b[2:] / 2) for t, b in zip(result.track_ids.tolist(), boxes, strict=True)}
    for group in result.groups:
        _draw_group(canvas, group.members, group.activity, group.activity_id, group.vote_share, result)
    for r in np.flatnonzero(result.interacting).tolist():
        a, b = (int(v) for v in result.pairs[r])
        if a in centres and b in centres:
            thickness = 1 + int(round(3 * float(result.p_interact[r])))
            pa, pb = centres[a].astype(int), centres[b].astype(int)
            colour = label_colour(int(result.label_ids[r]), result.labels)
            cv2.line(canvas, tuple(pa), tuple(pb), colour, thickness, cv2.LINE_AA)
    coasted = result.coasted_mask.tolist()
    for t, b, c in zip(result.track_ids.tolist(), boxes.astype(int), coasted, strict=True):
        colour = track_colour(t)  # a coasted person (predicted box, no detection) gets a thin frame
        cv2.rectangle(canvas, (b[0], b[1]), (b[0] + b[2], b[1] + b[3]), colour, 1 if c else 2)
        palette.draw_label(canvas, str(t), (b[0] + 3, b[1] + 14), colour, 0.4)
    _draw_legend(canvas, result.labels)
    return canvas


def _draw_group(
    canvas: np.ndarray,
    members: tuple[int, ...],
    activity: str | None,
    activity_id: int,
    share: float,
    result: FrameResult,
) -> None:
    """The convex hull of a group's boxes in its activity's colour, the activity and vote share above it."""
    rows = np.flatnonzero(np.isin(result.track_ids, members))
    if len(rows) < 2:
        return
    b = result.boxes[rows].astype(np.float32)
    corners = np.concatenate(
        [b[:, :2], b[:, :2] + b[:, 2:], b[:, :2] + b[:, 2:] * [1, 0], b[:, :2] + b[:, 2:] * [0, 1]]
    )
    hull = cv2.convexHull(corners.astype(np.int32))
    colour = palette.label_colour(activity, activity_id)
    cv2.polylines(canvas, [hull], True, colour, 2, cv2.LINE_AA)
    x, y = int(hull[:, 0, 0].min()), int(hull[:, 0, 1].min())
    text = f"{activity} {share:.0%}" if activity is not None else "group"
    palette.draw_label(canvas, text, (x, y - 6), colour, _TEXT_SCALE)


def _draw_legend(canvas: np.ndarray, labels: Sequence[str]) -> None:
    """Each label's name on a box of its colour, bottom-left (usually ground, rarely people), as in the
    simulator preview."""
    step = cv2.getTextSize("Ag", palette.FONT, _TEXT_SCALE, 1)[0][1] + 8
    bottom = canvas.shape[0] - 6
    for k, name in enumerate(labels):
        y = bottom - step * (len(labels) - 1 - k)
        palette.draw_label(canvas, name, (6, y), label_colour(k, labels), _TEXT_SCALE)


def _drawable(image: np.ndarray | None) -> bool:
    """True for an (H, W) or (H, W, 3) uint8 array."""
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8:
        return False
    return image.ndim == 2 or (image.ndim == 3 and image.shape[2] == 3)


class AnnotatedVideoWriter:
    """Writes annotated frames to a video (``.mp4`` with mp4v, ``.avi`` / ``.mkv`` with MJPG).

    The video size is fixed by the first frame; a later frame of another size is resized to it. The
    drawing canvas is one buffer reused for every frame.

    Args:
        path: output video file.
        fps: frames per second of the output.
    """

    def __init__(self, path: str | Path, fps: float = 30.0) -> None:
        self.path = Path(path)
        if self.path.suffix.lower() not in _FOURCC:
            raise InputError(f"{path}: expected a .mp4, .avi or .mkv video path, got {self.path.suffix!r}")
        if not fps > 0:
            raise InputError(f"fps: expected a positive number, got {fps}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fps = float(fps)
        self._writer: Any = None
        self._canvas: np.ndarray | None = None
        self.frames = 0

    def write(self, image: np.ndarray | None, result: FrameResult) -> None:
        """Annotate ``image`` ((H, W, 3) BGR or (H, W) gray uint8; None: a grey canvas) and append it."""
        if self._canvas is None:
            self._open(image)
        assert self._canvas is not None
        h, w = self._canvas.shape[:2]
        if not _drawable(image):
            self._canvas.fill(64)
        else:
            assert image is not None
            src = cv2.cvtColor(image, cv2.COLOR_GRAY2BGR) if image.ndim == 2 else image
            if src.shape[:2] != (h, w):
                src = cv2.resize(src, (w, h))
            np.copyto(self._canvas, src)
        self._writer.write(annotate(self._canvas, result))
        self.frames += 1

    def _open(self, image: np.ndarray | None) -> None:
        if image is not None and isinstance(image, np.ndarray) and image.ndim in (2, 3):
            h, w = image.shape[:2]
        else:
            h, w = 480, 640
        self._canvas = np.zeros((h, w, 3), np.uint8)
        fourcc = cv2.VideoWriter.fourcc(*_FOURCC[self.path.suffix.lower()])
        self._writer = cv2.VideoWriter(str(self.path), fourcc, self.fps, (w, h))
        if not self._writer.isOpened():
            raise BackendError(
                f"{self.path}: OpenCV cannot write this video format here; try a .avi path (MJPG)"
            )

    def close(self) -> None:
        if self._writer is not None:
            self._writer.release()
            self._writer = None

    def __enter__(self) -> AnnotatedVideoWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
