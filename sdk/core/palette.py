"""One colour palette for every picture pairedge draws, and labels that stay legible on any scene.

The annotated video of ``pairedge run`` / ``pairedge demo`` (:mod:`pairedge.runtime.runner.output`) and the
simulator preview (:mod:`pairedge.measure.sim.preview`) take their colours from here, so a label has the same
colour in both:

* :data:`LABEL_COLOURS`: BGR colour of each known interaction label, by name (the SIM7 labels, which include
  the paper's three "together" classes); a model label not in the table gets :data:`EXTRA_COLOURS` by its
  class index (:func:`label_colour`).
* :func:`track_colour`: a stable, well-spread colour per track id.
* :data:`NO_ACTIVITY`: the grey of a group without an activity.

Text is drawn by :func:`draw_label`: on a filled rectangle of its own colour with black or white text,
whichever contrasts more (:func:`text_colour`), so it reads on bright and dark frames alike.
"""

from __future__ import annotations

import colorsys
from collections.abc import Sequence

import cv2
import numpy as np

#: A colour as OpenCV draws it: (blue, green, red), 0-255.
BGR = tuple[int, int, int]

#: BGR colour of each known label, by name.
LABEL_COLOURS: dict[str, BGR] = {
    "walking_together": (40, 200, 40),
    "standing_together": (255, 140, 0),
    "sitting_together": (210, 40, 210),
    "approaching": (0, 150, 255),
    "leaving": (40, 40, 230),
    "passing_by": (0, 230, 230),
    "no_interaction": (160, 160, 160),
}
#: Colours of labels not in :data:`LABEL_COLOURS`, by class index (cycled).
EXTRA_COLOURS: tuple[BGR, ...] = (
    (60, 180, 75),
    (48, 130, 245),
    (200, 130, 0),
    (75, 25, 230),
    (180, 30, 145),
    (25, 225, 255),
    (240, 240, 70),
    (128, 128, 128),
)
#: A group whose members have no labelled link (its activity is None).
NO_ACTIVITY: BGR = (200, 200, 200)
#: The font of every label.
FONT = cv2.FONT_HERSHEY_SIMPLEX


def label_colour(name: str | None, index: int = -1) -> BGR:
    """The colour of a label: by name from :data:`LABEL_COLOURS`, else by ``index`` from
    :data:`EXTRA_COLOURS`; :data:`NO_ACTIVITY` for None or a negative index of an unknown name."""
    if name is not None and name in LABEL_COLOURS:
        return LABEL_COLOURS[name]
    if name is None or index < 0:
        return NO_ACTIVITY
    return EXTRA_COLOURS[int(index) % len(EXTRA_COLOURS)]


def label_colours(labels: Sequence[str]) -> tuple[BGR, ...]:
    """The colour of each of a model's labels, in class order (for drawers that index by class id)."""
    return tuple(label_colour(name, k) for k, name in enumerate(labels))


def track_colour(track_id: int) -> BGR:
    """A stable, well-spread BGR colour for a track id (hue steps of 94 degrees, saturated, bright)."""
    hue = ((int(track_id) * 47) % 180) / 180.0
    r, g, b = colorsys.hsv_to_rgb(hue, 200 / 255, 235 / 255)
    return round(b * 255), round(g * 255), round(r * 255)


def text_colour(background: BGR) -> BGR:
    """Black or white, whichever contrasts more with ``background`` (Rec. 601 luma)."""
    b, g, r = background
    return (0, 0, 0) if 0.299 * r + 0.587 * g + 0.114 * b >= 128 else (255, 255, 255)


def draw_label(
    image: np.ndarray, text: str, origin: tuple[int, int], colour: BGR, scale: float = 0.45
) -> tuple[int, int, int, int]:
    """Draw ``text`` with its baseline-left corner at ``origin`` on a filled box of ``colour``, in place.

    Args:
        image: (H, W, 3) uint8 BGR.
        text: what to write (ASCII; OpenCV's fonts have no other glyphs).
        origin: ``(x, y)`` of the text's baseline start, pixels; the box is kept inside the image.
        colour: the box colour; the text is black or white (:func:`text_colour`).
        scale: font scale.

    Returns:
        The box drawn, ``(x0, y0, x1, y1)`` pixels (inclusive corners).
    """
    (tw, th), base = cv2.getTextSize(text, FONT, scale, 1)
    h, w = image.shape[:2]
    x = min(max(int(origin[0]), 2), max(w - tw - 2, 2))
    y = min(max(int(origin[1]), th + 2), max(h - base - 2, th + 2))
    box = (x - 2, y - th - 2, x + tw + 1, y + base)
    cv2.rectangle(image, box[:2], box[2:], colour, cv2.FILLED)
    cv2.putText(image, text, (x, y), FONT, scale, text_colour(colour), 1, cv2.LINE_AA)
    return box
