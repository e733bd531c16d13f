"""A frame into a detector's input the way the detector's own project does it, and boxes back to the frame.

Three resizes (:class:`~pairedge.runtime.detectors.layouts.Preprocess` says which a layout takes), each with
its project's arithmetic, so boxes land where that project's own code would put them:

- ``letterbox-center`` (Ultralytics ``LetterBox``, YOLOv5 ``letterbox``): gain ``r = min(H / h, W / w)``, the
  frame resized to ``(round(w r), round(h r))`` with bilinear interpolation, padding ``d = (W - round(w r)) /
  2`` split as ``round(d - 0.1)`` on the left and ``round(d + 0.1)`` on the right (likewise top / bottom),
  grey 114.
- ``letterbox-top-left`` (YOLOX ``preproc``): the same gain, the frame resized to ``(int(w r), int(h r))``
  (truncated) and placed at the top-left of a canvas of 114.
- ``stretch`` (RT-DETR / D-FINE deploy scripts, Ultralytics' RT-DETR ``scale_fill``): the frame resized to
  ``(W, H)``, aspect ratio not kept, no padding.

Boxes go back with :meth:`Letterbox.undo`: ``(box - pad) / gain`` per axis (one gain for both axes in the
letterbox modes, as ``scale_boxes`` and YOLOX's ``/ ratio`` do).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from pairedge.core.errors import InputError

RESIZES = ("letterbox-center", "letterbox-top-left", "stretch")


@dataclass(frozen=True)
class Letterbox:
    """How a frame was fitted into the network input.

    Attributes:
        scale_x, scale_y: network pixels per frame pixel along x and y (equal in the letterbox modes).
        pad_x, pad_y: pixels of padding left of and above the resized frame.
    """

    scale_x: float
    scale_y: float
    pad_x: int
    pad_y: int

    def undo(self, xyxy: np.ndarray) -> np.ndarray:
        """(N, 4) float32 ``x1 y1 x2 y2`` in network-input pixels -> the same in frame pixels."""
        offset = np.array([self.pad_x, self.pad_y, self.pad_x, self.pad_y], np.float32)
        scale = np.array([self.scale_x, self.scale_y, self.scale_x, self.scale_y], np.float32)
        return ((np.asarray(xyxy, np.float32) - offset) / scale).astype(np.float32)


def _round_half_even(value: float) -> int:
    return int(round(value))  # Python's round, as the projects' own code uses it


def letterbox(
    image: np.ndarray, size: tuple[int, int], resize: str = "letterbox-center", pad: int = 114
) -> tuple[np.ndarray, Letterbox]:
    """Fit ``image`` into the network input (see the module docstring for each mode's arithmetic).

    Args:
        image: (h, w, 3) uint8.
        size: (H, W) of the network input.
        resize: one of :data:`RESIZES`.
        pad: the padding grey.

    Returns:
        ``(canvas (H, W, 3) uint8, Letterbox)``.
    """
    h, w = image.shape[:2]
    out_h, out_w = size
    if resize == "stretch":
        canvas = (
            image
            if (h, w) == (out_h, out_w)
            else cv2.resize(image, (out_w, out_h), interpolation=cv2.INTER_LINEAR)
        )
        return np.ascontiguousarray(canvas), Letterbox(out_w / w, out_h / h, 0, 0)
    if resize not in RESIZES:
        raise InputError(f"resize: expected one of {', '.join(RESIZES)}, got {resize!r}")
    r = min(out_h / h, out_w / w)
    if resize == "letterbox-top-left":
        new_w, new_h = int(w * r), int(h * r)
    else:
        new_w, new_h = _round_half_even(w * r), _round_half_even(h * r)
    new_w, new_h = min(max(new_w, 1), out_w), min(max(new_h, 1), out_h)
    resized = (
        image
        if (new_w, new_h) == (w, h)
        else cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    )
    if resize == "letterbox-top-left":
        left = top = 0
    else:
        left = _round_half_even((out_w - new_w) / 2 - 0.1)
        top = _round_half_even((out_h - new_h) / 2 - 0.1)
    canvas = np.full((out_h, out_w, 3), pad, np.uint8)
    canvas[top : top + new_h, left : left + new_w] = resized
    return canvas, Letterbox(r, r, left, top)


def to_blob(canvas: np.ndarray, rgb: bool, unit_scale: bool, out: np.ndarray | None = None) -> np.ndarray:
    """(H, W, 3) uint8 BGR -> (1, 3, H, W) float32 in the layout's colour order and scale (into ``out`` when
    given, an array of that shape, e.g. a pinned host buffer)."""
    x = canvas[..., ::-1] if rgb else canvas
    blob = out if out is not None else np.empty((1, 3, *canvas.shape[:2]), np.float32)
    blob[0] = x.transpose(2, 0, 1)
    if unit_scale:
        blob *= np.float32(1 / 255)
    return blob
