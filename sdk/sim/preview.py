"""Preview images: a frame with its truth boxes, track ids and pair links coloured by label."""

from __future__ import annotations

import cv2
import numpy as np
from pairedge.labels import SIM7
from pairedge.sim.scene import SimFrame

#: BGR colour of each SIM7 label's link (``no_interaction`` is not drawn).
LINK_COLOURS: dict[str, tuple[int, int, int]] = {
    "walking_together": (40, 200, 40),
    "standing_together": (255, 140, 0),
    "sitting_together": (210, 40, 210),
    "approaching": (0, 150, 255),
    "leaving": (40, 40, 230),
    "passing_by": (0, 230, 230),
}


def id_colour(track_id: int) -> tuple[int, int, int]:
    """A stable, distinct BGR colour per track id."""
    hue = (track_id * 47) % 180
    hsv = np.array([[[hue, 200, 255]]], np.uint8)
    b, g, r = cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)[0, 0]
    return int(b), int(g), int(r)


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
    centre = {int(t): frame.truth.boxes[k, :2] + frame.truth.boxes[k, 2:] * [0.5, 0.35]
              for k, t in enumerate(frame.truth.track_ids.tolist())}  # fmt: skip
    counts: dict[str, int] = {}
    for (a, b), label in zip(frame.pairs.tolist(), frame.pair_labels.tolist(), strict=True):
        name = SIM7.classes[label]
        if name not in LINK_COLOURS:
            continue
        counts[name] = counts.get(name, 0) + 1
        thick = 2 if name.endswith("_together") else 1
        for p, q in _segments(centre[a], centre[b], width):
            pa, pb = tuple(np.round(p).astype(int).tolist()), tuple(np.round(q).astype(int).tolist())
            cv2.line(img, pa, pb, LINK_COLOURS[name], thick, cv2.LINE_AA)
    for k, tid in enumerate(frame.truth.track_ids.tolist()):
        x, y, w, h = (int(v) for v in frame.truth.boxes[k])
        colour = id_colour(tid)
        for dx in (0, -img.shape[1]) if wrap and x + w > img.shape[1] else (0,):
            cv2.rectangle(img, (x + dx, y), (x + dx + w - 1, y + h - 1), colour, 1)
            cv2.putText(
                img, str(tid), (x + dx, max(y - 3, 10)), cv2.FONT_HERSHEY_SIMPLEX, 0.4, colour, 1, cv2.LINE_AA
            )
    _legend(img, counts, frame)
    return img


def _legend(img: np.ndarray, counts: dict[str, int], frame: SimFrame) -> None:
    """Frame, time, people and the labels present (with their pair counts), bottom-left, semi-dark."""
    lines = [(f"frame {frame.index}  t={frame.timestamp:.2f}s  people {len(frame.truth)}", (255, 255, 255))]
    lines += [(f"{name.replace('_', ' ')}: {counts[name]}", colour)
              for name, colour in LINK_COLOURS.items() if counts.get(name)]  # fmt: skip
    small = img.shape[1] < 600
    scale, step, width = (0.32, 11, 170) if small else (0.4, 14, 230)
    height = step * len(lines) + 6
    top = max(img.shape[0] - height, 0)  # bottom-left corner: usually ground, rarely people
    box = img[top:, :width]
    box[:] = (box * 0.35).astype(np.uint8)
    for k, (text, colour) in enumerate(lines):
        y = top + step + step * k - 2
        cv2.putText(img, text, (5, y), cv2.FONT_HERSHEY_SIMPLEX, scale, colour, 1, cv2.LINE_AA)
