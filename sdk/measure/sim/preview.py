"""Preview images: a frame with its truth boxes, track ids and pair links coloured by label (the colours of
:mod:`pairedge.core.palette`, which the annotated video of ``pairedge run`` uses too)."""

from __future__ import annotations

import cv2
import numpy as np
from pairedge.core import palette
from pairedge.core.labels import SIM7
from pairedge.measure.sim.scene import SimFrame

#: The SIM7 labels whose links are drawn (``no_interaction`` is not), coloured from
#: :mod:`pairedge.core.palette`.
DRAWN_LABELS: tuple[str, ...] = tuple(name for name in SIM7.classes if name != "no_interaction")


def id_colour(track_id: int) -> tuple[int, int, int]:
    """A stable, distinct BGR colour per track id (:func:`pairedge.core.palette.track_colour`, as in the
    annotated video)."""
    return palette.track_colour(track_id)


def _segments(a: np.ndarray, b: np.ndarray, width: int | None) -> list[tuple[np.ndarray, np.ndarray]]:
    """The straight segment a-b, or, on a panorama, the two halves of the shorter way round the seam."""
    if width is None or abs(b[0] - a[0]) <= width / 2:
        return [(a, b)]
    shift = np.array([width, 0.0]) * np.sign(b[0] - a[0])
    return [(a, b - shift), (a + shift, b)]


def draw_preview(frame: SimFrame, wrap: bool = False) -> np.ndarray:
    """The frame image with boxes, ids and pair links (coloured by SIM7 label) and a legend.

    Args:
        frame: a simulated frame.
        wrap: the image is a 360-degree panorama (boxes and links wrap around the seam).

    Returns:
        (H, W, 3) uint8 BGR (a new image).
    """
    img = frame.image.copy()
    width = img.shape[1] if wrap else None
    centre = {
        int(t): frame.truth.boxes[k, :2] + frame.truth.boxes[k, 2:] * [0.5, 0.35]
        for k, t in enumerate(frame.truth.track_ids.tolist())
    }
    counts: dict[str, int] = {}
    for (a, b), label in zip(frame.pairs.tolist(), frame.pair_labels.tolist(), strict=True):
        name = SIM7.classes[label]
        if name not in DRAWN_LABELS:
            continue
        counts[name] = counts.get(name, 0) + 1
        thick = 2 if name.endswith("_together") else 1
        for p, q in _segments(centre[a], centre[b], width):
            pa, pb = tuple(np.round(p).astype(int).tolist()), tuple(np.round(q).astype(int).tolist())
            cv2.line(img, pa, pb, palette.label_colour(name), thick, cv2.LINE_AA)
    for k, tid in enumerate(frame.truth.track_ids.tolist()):
        x, y, w, h = (int(v) for v in frame.truth.boxes[k])
        colour = id_colour(tid)
        for dx in (0, -img.shape[1]) if wrap and x + w > img.shape[1] else (0,):
            cv2.rectangle(img, (x + dx, y), (x + dx + w - 1, y + h - 1), colour, 1)
            palette.draw_label(img, str(tid), (x + dx + 2, y - 3), colour, 0.35)
    _legend(img, counts, frame)
    return img


def _legend(img: np.ndarray, counts: dict[str, int], frame: SimFrame) -> None:
    """Frame, time, people and the labels present (with their pair counts), bottom-left, each line on a
    filled box of its label's colour (:func:`pairedge.core.palette.draw_label`)."""
    lines = [(f"frame {frame.index}  t={frame.timestamp:.2f}s  people {len(frame.truth)}", (40, 40, 40))]
    lines += [
        (f"{name.replace('_', ' ')}: {counts[name]}", palette.label_colour(name))
        for name in DRAWN_LABELS
        if counts.get(name)
    ]
    scale = 0.32 if img.shape[1] < 600 else 0.4
    step = cv2.getTextSize("Ag", palette.FONT, scale, 1)[0][1] + 8
    bottom = img.shape[0] - 6  # bottom-left corner: usually ground, rarely people
    for k, (text, colour) in enumerate(lines):
        palette.draw_label(img, text, (5, bottom - step * (len(lines) - 1 - k)), colour, scale)
