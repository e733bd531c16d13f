"""MOT Challenge text files: ``frame,id,left,top,width,height,conf,...`` one box per line.

Frames are 1-based. Ground-truth files (``gt/gt.txt``) carry track ids and a ``conf`` / "consider" flag;
detection files (``det/det.txt``) carry id -1 and the detector score. Columns after ``conf`` (MOT15:
``x, y, z`` world coordinates; MOT16+: class and visibility) are kept as ``extra``. A file with 6 columns
gets ``conf`` = 1.

Malformed input (a non-numeric field, fewer than 6 columns, frame < 1 or not an integer, a non-integer id,
NaN / inf, a negative width or height) raises :class:`~pairedge.errors.FormatError` naming the file and line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pairedge.errors import FormatError, InputError
from pairedge.types import Detections


@dataclass(frozen=True, eq=False)
class MotTable:
    """All boxes of a MOT file, one row per line, in file order.

    Attributes:
        path: the file, for messages.
        frame: (N,) int64, 1-based.
        track_id: (N,) int64, -1 in detection files.
        boxes: (N, 4) float32 ``left top width height`` in pixels.
        scores: (N,) float32 the ``conf`` column.
        extra: (N, K) float64 columns after ``conf`` (NaN where a shorter line lacks them).
        line: (N,) int64 1-based line number of each row.
    """

    path: str
    frame: np.ndarray
    track_id: np.ndarray
    boxes: np.ndarray
    scores: np.ndarray
    extra: np.ndarray
    line: np.ndarray

    def __len__(self) -> int:
        return len(self.frame)

    def frames(self) -> np.ndarray:
        """(F,) int64 sorted distinct frames."""
        return np.unique(self.frame)

    def ids(self) -> np.ndarray:
        """(T,) int64 sorted distinct track ids (excluding -1)."""
        ids = np.unique(self.track_id)
        return ids[ids >= 0]

    def by_frame(self) -> dict[int, Detections]:
        """Detections per 1-based frame (rows in file order within a frame)."""
        if len(self.frame) == 0:
            return {}
        order = np.argsort(self.frame, kind="stable")
        frames, starts = np.unique(self.frame[order], return_index=True)
        ends = np.append(starts[1:], len(order))
        out: dict[int, Detections] = {}
        for f, a, b in zip(frames.tolist(), starts.tolist(), ends.tolist(), strict=True):
            rows = order[a:b]
            out[f] = Detections(self.boxes[rows], self.track_id[rows], self.scores[rows])
        return out


def _split_lines(path: Path) -> tuple[list[str], np.ndarray]:
    try:
        text = path.read_text()
    except UnicodeDecodeError as exc:
        raise FormatError(path, f"expected a text file, got undecodable bytes ({exc})") from None
    except OSError as exc:
        raise FormatError(path, f"cannot read the file ({exc.strerror or exc})") from None
    lines, numbers = [], []
    for k, raw in enumerate(text.splitlines(), start=1):
        s = raw.strip()
        if s and not s.startswith("#"):
            lines.append(s)
            numbers.append(k)
    return lines, np.asarray(numbers, np.int64)


def _parse_rows(path: Path, lines: list[str], numbers: np.ndarray) -> np.ndarray:
    """(N, C) float64 table, NaN-padded for short lines; malformed fields raise FormatError."""
    rows: list[list[float]] = []
    width = 0
    for text, lineno in zip(lines, numbers.tolist(), strict=True):
        fields = [f.strip() for f in text.replace(" ", "").split(",")] if "," in text else text.split()
        if fields and fields[-1] == "":
            fields = fields[:-1]  # a trailing comma
        if len(fields) < 6:
            raise FormatError(
                path,
                f"expected at least 6 comma-separated values "
                f"(frame,id,left,top,width,height[,conf,...]), got {len(fields)}: {text!r}",
                lineno,
            )
        try:
            values = [float(f) for f in fields]
        except ValueError:
            bad = next(f for f in fields if not _is_float(f))
            raise FormatError(path, f"expected numbers, got {bad!r} in {text!r}", lineno) from None
        rows.append(values)
        width = max(width, len(values))
    table = np.full((len(rows), max(width, 7)), np.nan)
    present = np.zeros(table.shape, bool)
    for k, values in enumerate(rows):
        table[k, : len(values)] = values
        present[k, : len(values)] = True
    bad = (present & ~np.isfinite(table)).any(1)
    if bad.any():
        k = int(np.argmax(bad))
        raise FormatError(path, f"expected finite numbers, got NaN or inf in {lines[k]!r}", int(numbers[k]))
    return table


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check(path: Path, table: np.ndarray, numbers: np.ndarray) -> None:
    """Vectorised validity checks; the first bad row raises FormatError with its line number."""
    core = table[:, :6]
    problems = [
        (core[:, 0] != np.floor(core[:, 0]), "expected an integer frame number"),
        (core[:, 0] < 1, "expected a 1-based frame number (>= 1); MOT files count frames from 1"),
        (core[:, 1] != np.floor(core[:, 1]), "expected an integer track id (-1 for detections)"),
        (core[:, 1] < -1, "expected a track id >= -1"),
        ((core[:, 4] < 0) | (core[:, 5] < 0), "expected a non-negative width and height"),
    ]
    for bad, message in problems:
        bad = np.asarray(bad, bool)
        if bad.any():
            k = int(np.argmax(bad))
            raise FormatError(path, f"{message}: {table[k, :6].tolist()}", int(numbers[k]))


def read_mot(path: str | Path) -> MotTable:
    """Read a MOT Challenge ``gt.txt`` or ``det.txt`` file.

    Args:
        path: the text file.

    Returns:
        the boxes as a :class:`MotTable` (use :meth:`MotTable.by_frame` for per-frame
        :class:`~pairedge.types.Detections`).

    Raises:
        FormatError: the file cannot be read or a line is malformed (names the line).
    """
    p = Path(path)
    lines, numbers = _split_lines(p)
    table = _parse_rows(p, lines, numbers) if lines else np.zeros((0, 7))
    _check(p, table, numbers)
    conf = np.where(np.isnan(table[:, 6]), 1.0, table[:, 6])
    return MotTable(
        path=str(p), frame=table[:, 0].astype(np.int64), track_id=table[:, 1].astype(np.int64),
        boxes=table[:, 2:6].astype(np.float32).reshape(-1, 4), scores=conf.astype(np.float32),
        extra=table[:, 7:].copy(), line=numbers,
    )  # fmt: skip


def _fmt(value: float) -> str:
    if math.isfinite(value) and value == int(value):
        return str(int(value))
    return f"{value:.3f}".rstrip("0").rstrip(".")


def write_mot(
    path: str | Path,
    frame: np.ndarray,
    track_id: np.ndarray,
    boxes: np.ndarray,
    scores: np.ndarray | None = None,
    extra: np.ndarray | None = None,
) -> None:
    """Write boxes as a MOT Challenge file (``frame,id,left,top,w,h,conf,x,y,z``).

    Args:
        frame: (N,) 1-based frame numbers. track_id: (N,) ids (-1 for detections).
        boxes: (N, 4) left top width height. scores: (N,) conf column (default 1).
        extra: (N, K) columns after conf (default three columns of -1, as MOT15 2D files).

    Raises:
        InputError: mismatched lengths, frame < 1, NaN / inf or negative sizes.
    """
    f = np.asarray(frame, np.int64).reshape(-1)
    n = len(f)
    ids = np.asarray(track_id, np.int64).reshape(-1)
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    sc = np.ones(n) if scores is None else np.asarray(scores, np.float64).reshape(-1)
    ex = np.full((n, 3), -1.0) if extra is None else np.asarray(extra, np.float64).reshape(n, -1)
    if not (len(ids) == len(b) == len(sc) == len(ex) == n):
        raise InputError(
            f"write_mot: expected equal lengths, got frame {n}, id {len(ids)}, boxes {len(b)}, "
            f"scores {len(sc)}, extra {len(ex)}"
        )
    if n and (f.min() < 1 or not np.isfinite(b).all() or not np.isfinite(sc).all() or (b[:, 2:] < 0).any()):
        raise InputError("write_mot: expected frames >= 1 (1-based), finite boxes and scores, sizes >= 0")
    rows = np.column_stack([f, ids, b, sc, ex])
    text = "\n".join(",".join(_fmt(v) for v in row) for row in rows.tolist())
    Path(path).write_text(text + ("\n" if n else ""))
