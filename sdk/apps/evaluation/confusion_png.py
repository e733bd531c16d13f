"""The confusion matrix of ``pairedge eval`` as a PNG heat-map, drawn with OpenCV + numpy (core dependencies).

Rows are the truth, columns the prediction. Each cell shows its count and its share of the row (the
row-normalised confusion, i.e. per-class recall on the diagonal) and is shaded from white (0) to dark blue
(1), linearly, so a larger share is always a darker cell. Row totals (and the true pairs left without a
prediction, if any) stand right of the grid. Class names are drawn in full where they fit and shortened in
the middle (``walk..ether``) where they do not; column names are turned 90 degrees when any is wider than a
cell. OpenCV's Hershey fonts draw printable ASCII only, so accents are dropped and other characters become
``?``. The drawing is deterministic: the same matrix, names and title give the same bytes.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from pairedge.core.errors import InputError

FONT = cv2.FONT_HERSHEY_SIMPLEX
SCALE = 0.45  # cell text, class names, axis names
TITLE_SCALE = 0.55
PAD = 12
LABEL_MAX_PX = 170  # widest class name (row names, and column names when turned) before it is shortened
TITLE_MAX_PX = 900
MIN_WIDTH = 320  # a 2-class matrix still makes a picture of sensible size
LIGHT = np.array((255, 251, 247), np.float64)  # BGR of share 0 (matplotlib's "Blues" ends)
DARK = np.array((107, 48, 8), np.float64)  # BGR of share 1
INK = (32, 32, 32)
GRID = (200, 200, 200)
WHITE = (255, 255, 255)


@dataclass(frozen=True)
class ConfusionImage:
    """A drawn confusion matrix and where its cells are.

    Attributes:
        image: (H, W, 3) uint8 BGR. origin: (x, y) of the grid's top-left pixel. cell: (width, height).
    """

    image: np.ndarray
    origin: tuple[int, int]
    cell: tuple[int, int]

    def cell_box(self, truth: int, pred: int) -> tuple[int, int, int, int]:
        """``(x0, y0, x1, y1)`` (exclusive ends) of the cell of row ``truth``, column ``pred``."""
        x0 = self.origin[0] + pred * self.cell[0]
        y0 = self.origin[1] + truth * self.cell[1]
        return x0, y0, x0 + self.cell[0], y0 + self.cell[1]


def ascii_text(text: object) -> str:
    """``text`` in what a Hershey font can draw: accents dropped, other non-ASCII as ``?``, one-line."""
    out = []
    for ch in unicodedata.normalize("NFKD", str(text)):
        if unicodedata.combining(ch):
            continue
        out.append(" " if ch.isspace() else ch if " " <= ch <= "~" else "?")
    return " ".join("".join(out).split()) or "?"


def _size(text: str, scale: float = SCALE) -> tuple[int, int, int]:
    (w, h), base = cv2.getTextSize(text, FONT, scale, 1)
    return w, h, base


def fit(text: str, max_px: int, scale: float = SCALE) -> str:
    """``text`` (ASCII) shortened in the middle with ``..`` until it is at most ``max_px`` wide."""
    if _size(text, scale)[0] <= max_px:
        return text
    for keep in range(len(text) - 1, 0, -1):
        tail = keep // 3
        short = text[: keep - tail] + ".." + (text[-tail:] if tail else "")
        if _size(short, scale)[0] <= max_px:
            return short
    return ".."


def _centred(
    img: np.ndarray, text: str, cx: int, cy: int, colour: tuple[int, int, int], scale: float = SCALE
) -> None:
    w, h, _ = _size(text, scale)
    cv2.putText(img, text, (cx - w // 2, cy + h // 2), FONT, scale, colour, 1, cv2.LINE_AA)


def _turned(text: str, scale: float = SCALE) -> np.ndarray:
    """``text`` on a white patch, turned 90 degrees counter-clockwise (read from bottom to top)."""
    w, h, base = _size(text, scale)
    patch = np.full((h + base + 4, w + 4, 3), 255, np.uint8)
    cv2.putText(patch, text, (2, h + 2), FONT, scale, INK, 1, cv2.LINE_AA)
    return cv2.rotate(patch, cv2.ROTATE_90_COUNTERCLOCKWISE)


def _paste(img: np.ndarray, patch: np.ndarray, x: int, y: int) -> None:
    """Copy ``patch`` with its top-left at (x, y), clipped to ``img``."""
    h = min(patch.shape[0], img.shape[0] - y)
    w = min(patch.shape[1], img.shape[1] - x)
    if h > 0 and w > 0 and x >= 0 and y >= 0:
        img[y : y + h, x : x + w] = patch[:h, :w]


def shade(share: float) -> tuple[int, int, int]:
    """BGR colour of a row share in [0, 1]: every channel falls linearly from white-ish to dark blue."""
    s = float(np.clip(share, 0.0, 1.0)) if np.isfinite(share) else 0.0
    b, g, r = (int(v) for v in np.round(LIGHT + (DARK - LIGHT) * s))
    return b, g, r


def render(
    confusion: np.ndarray,
    labels: Sequence[str],
    *,
    title: str = "",
    missing: np.ndarray | None = None,
) -> ConfusionImage:
    """Draw a (C, C) confusion matrix (rows = truth) with its class names.

    Args:
        confusion: (C, C) counts, rows = truth, columns = prediction.
        labels: the C class names.
        title: one line above the grid (shortened to fit).
        missing: (C,) true pairs without a prediction; a "missed" column when any is non-zero.
    """
    conf = np.asarray(confusion, np.float64)
    c = len(labels)
    if conf.shape != (c, c):
        raise InputError(f"confusion matrix must be ({c}, {c}) for {c} labels, got shape {conf.shape}")
    miss = None if missing is None else np.asarray(missing, np.float64).reshape(-1)
    if miss is not None and miss.shape != (c,):
        raise InputError(f"missing must have {c} entries, got shape {miss.shape}")
    conf = np.nan_to_num(conf, nan=0.0, posinf=0.0, neginf=0.0)
    totals = conf.sum(axis=1)
    shares = np.where(totals[:, None] > 0, conf / np.maximum(totals, 1e-300)[:, None], 0.0)
    counts = [[str(int(round(v))) for v in row] for row in conf]
    names = [ascii_text(n) for n in labels]

    _, line_h, line_b = _size("Ag")
    line = line_h + line_b
    cell_w = max([64, _size("0.00")[0] + 16, *(_size(t)[0] + 14 for row in counts for t in row)])
    cell_h = 2 * line + 18
    extra = [("n", [str(int(round(v))) for v in totals])]
    if miss is not None and np.any(miss):
        extra.append(("missed", [str(int(round(v))) for v in np.nan_to_num(miss)]))
    extra_w = [max([_size(h)[0], *(_size(t)[0] for t in col)]) + 16 for h, col in extra]

    rows = [fit(n, LABEL_MAX_PX) for n in names]
    label_w = max([_size(n)[0] for n in rows], default=0) + 10
    upright = all(_size(n)[0] <= cell_w - 8 for n in names)
    cols = names if upright else [fit(n, LABEL_MAX_PX) for n in names]
    header_h = line + 8 if upright else max([_size(n)[0] for n in cols], default=0) + 10

    axis_w = line + 8  # "truth", turned, left of the row names
    grid_w, grid_h = c * cell_w, c * cell_h
    title_text = ascii_text(title) if title else ""
    title_h = _size("Ag", TITLE_SCALE)[1] + _size("Ag", TITLE_SCALE)[2] + 12 if title_text else 0
    body_w = max(PAD + axis_w + label_w + grid_w + sum(extra_w) + PAD, MIN_WIDTH)
    if title_text:
        body_w = max(body_w, min(_size(title_text, TITLE_SCALE)[0] + 2 * PAD, TITLE_MAX_PX))
        title_text = fit(title_text, body_w - 2 * PAD, TITLE_SCALE)
    x0 = PAD + axis_w + label_w
    y0 = PAD + title_h + line + 8 + header_h  # title, "prediction", column names
    width, height = body_w, y0 + grid_h + PAD
    img = np.full((height, width, 3), 255, np.uint8)

    if title_text:
        _, th, _ = _size(title_text, TITLE_SCALE)
        cv2.putText(img, title_text, (PAD, PAD + th), FONT, TITLE_SCALE, INK, 1, cv2.LINE_AA)
    _centred(img, "prediction", x0 + grid_w // 2, PAD + title_h + line // 2, INK)
    truth = _turned("truth")
    _paste(img, truth, PAD, y0 + max(grid_h - truth.shape[0], 0) // 2)

    for j, name in enumerate(cols):
        cx = x0 + j * cell_w + cell_w // 2
        if upright:
            _centred(img, name, cx, y0 - 4 - header_h // 2, INK)
        else:
            patch = _turned(name)
            _paste(img, patch, cx - patch.shape[1] // 2, y0 - 4 - patch.shape[0])
    for i in range(c):
        top = y0 + i * cell_h
        w, h, _ = _size(rows[i])
        cv2.putText(img, rows[i], (x0 - 8 - w, top + cell_h // 2 + h // 2), FONT, SCALE, INK, 1, cv2.LINE_AA)
        for j in range(c):
            left = x0 + j * cell_w
            share = float(shares[i, j])
            cv2.rectangle(img, (left, top), (left + cell_w - 1, top + cell_h - 1), shade(share), cv2.FILLED)
            colour = WHITE if share > 0.5 else INK
            cy = top + cell_h // 2
            _centred(img, counts[i][j], left + cell_w // 2, cy - line // 2 - 2, colour)
            _centred(
                img, f"{share:.2f}" if totals[i] > 0 else "-", left + cell_w // 2, cy + line // 2 + 2, colour
            )
    for k in range(c + 1):  # grid lines on the cell edges
        cv2.line(img, (x0 + k * cell_w, y0), (x0 + k * cell_w, y0 + grid_h), GRID, 1)
        cv2.line(img, (x0, y0 + k * cell_h), (x0 + grid_w, y0 + k * cell_h), GRID, 1)

    left = x0 + grid_w
    for (head, col), w in zip(extra, extra_w, strict=True):
        _centred(img, head, left + w // 2, y0 - 4 - line // 2, INK)
        for i, t in enumerate(col):
            _centred(img, t, left + w // 2, y0 + i * cell_h + cell_h // 2, INK)
        left += w
    return ConfusionImage(img, (x0, y0), (cell_w, cell_h))


def write_png(image: np.ndarray, path: str | Path) -> Path:
    """Encode ``image`` as PNG and write it; an unwritable path raises ``OSError`` like any file write."""
    out = Path(path)
    ok, buf = cv2.imencode(".png", image, [cv2.IMWRITE_PNG_COMPRESSION, 6])
    if not ok:
        raise OSError(f"{out}: OpenCV could not encode the image as PNG")
    out.write_bytes(buf.tobytes())
    return out
