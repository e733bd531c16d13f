"""MOT Challenge text files: ``frame,id,left,top,width,height,conf,...`` one box per line.

Frames are 1-based. Ground-truth files (``gt/gt.txt``) carry track ids and a ``conf`` / "consider" flag;
detection files (``det/det.txt``) carry id -1 and the detector score. Columns after ``conf`` (MOT15:
``x, y, z`` world coordinates; MOT16+: class and visibility) are kept as ``extra``. A file with 6 columns
gets ``conf`` = 1.

Malformed input (a non-numeric or complex field, fewer than 6 columns, frame < 1 or not an integer, a
non-integer id, frame or id beyond 2**53 (not exact in float64), NaN / inf or a number beyond the float64
range, a box or conf value beyond the float32 range, a negative width or height) raises
:class:`~pairedge.core.errors.FormatError` naming the file, the line and the true reason. A UTF-8 byte-order
mark is skipped; ``\r\n`` and ``\r`` line ends are accepted.

Ceilings (:mod:`pairedge.core.limits`), checked before parsing: a regular file (a FIFO or a device is refused
without being opened) of at most ``MAX_TEXT_BYTES``, read in chunks, with no line longer than
``MAX_LINE_BYTES``.

The file is parsed in blocks of whole lines with numpy's C reader (``np.loadtxt``); a block it cannot parse
(ragged columns, trailing commas, mixed separators, a bad field) is re-parsed line by line, which also finds
the exact line and field of an error. Resident memory stays near the output arrays plus the raw bytes
(about 3x the file size; ``benchmarks/bench_soak.py --mot-mb`` measures it).
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pairedge.core import limits
from pairedge.core.errors import FormatError, InputError
from pairedge.core.types import Detections


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
            out[f] = Detections(
                self.boxes[rows], self.track_id[rows], self.scores[rows], *self.orientation(rows)
            )
        return out

    def orientation(self, rows: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Optional body orientation of ``rows`` (pairedge extension): column 11 = radians in the image plane
        (see :mod:`pairedge.core.features.orientation`), column 12 = its confidence in [0, 1] (0 = unknown; 1
        when the column is missing). ``(None, None)`` when the file has no column 11. Invalid values are
        dropped and reported by the runtime's input validation."""
        if self.extra.ndim != 2 or self.extra.shape[1] < 4:
            return None, None
        angle = self.extra[rows, 3]
        conf = self.extra[rows, 4] if self.extra.shape[1] >= 5 else np.ones(len(angle))
        conf = np.where(np.isnan(angle), 0.0, np.where(np.isnan(conf), 1.0, conf))
        angle = np.where(conf > 0, angle, np.nan)
        return angle.astype(np.float32), conf.astype(np.float32)


#: Bytes per parse block (whole lines); bounds the temporaries of one ``np.loadtxt`` call.
BLOCK_BYTES = 1 << 20
#: Largest integer a float64 holds exactly: frame numbers and ids beyond it cannot be read faithfully.
MAX_EXACT_INT = 2**53
FLOAT32_MAX = float(np.finfo(np.float32).max)
_SKIP_LINE = re.compile(rb"^[ \t\f\v]*(?:#[^\n]*)?$", re.M)


EXPECTED = "a MOT Challenge text file (frame,id,left,top,width,height,...)"


def _read_bytes(path: Path) -> bytes:
    """The file's bytes with a UTF-8 byte-order mark removed and line ends normalised to ``\\n``.

    Bounded before parsing: a regular file (a FIFO or device is refused unopened) of at most
    ``pairedge.core.limits.MAX_TEXT_BYTES``, read in chunks, and no line longer than ``MAX_LINE_BYTES``.
    """
    data = limits.read_bytes(path, EXPECTED, limits.MAX_TEXT_BYTES)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    limits.check_lines(path, data, EXPECTED)
    return data


def _blocks(data: bytes) -> Iterator[tuple[bytes, int]]:
    """``(block, first line number)``: runs of whole lines (no final ``\\n``) of about ``BLOCK_BYTES``."""
    size = len(data) - 1 if data.endswith(b"\n") else len(data)
    start, line = 0, 1
    while start < size:
        end = size
        if size - start > BLOCK_BYTES:
            end = data.rfind(b"\n", start, start + BLOCK_BYTES)
            if end < 0:  # one line longer than a block
                end = data.find(b"\n", start + BLOCK_BYTES, size)
            end = size if end < 0 else end
        block = data[start:end]
        yield block, line
        line += block.count(b"\n") + 1
        start = end + 1


def _decode(path: Path, block: bytes, first_line: int) -> str:
    try:
        return block.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + block.count(b"\n", 0, exc.start)
        raise FormatError(path, f"expected UTF-8 text, got undecodable bytes ({exc.reason})", line) from None


def _data_lines(block: bytes, first_line: int) -> tuple[list[bytes] | None, np.ndarray]:
    """Line numbers (K,) of the data lines; the lines themselves when blank or comment lines were removed."""
    if _SKIP_LINE.search(block) is None:  # the usual block: every line is data
        return None, np.arange(first_line, first_line + block.count(b"\n") + 1, dtype=np.int64)
    kept: list[bytes] = []
    numbers: list[int] = []
    for k, raw in enumerate(block.split(b"\n")):
        s = raw.strip()
        if s and not s.startswith(b"#"):
            kept.append(raw)
            numbers.append(first_line + k)
    return kept, np.asarray(numbers, np.int64)


def _parse_block(path: Path, block: bytes, first_line: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """Parse a block: (K, C) float64 table NaN-padded to at least 7 columns, (K, C) bool cells present in
    the line, (K,) line numbers and the decoded text of the K data lines (row k = line k of the text)."""
    kept, numbers = _data_lines(block, first_line)
    text = _decode(path, block if kept is None else b"\n".join(kept), first_line)
    if len(numbers) == 0:
        return np.zeros((0, 7)), np.zeros((0, 7), bool), numbers, text
    try:
        delimiter = "," if "," in text else None
        table = np.loadtxt(io.StringIO(text), delimiter=delimiter, comments=None, dtype=np.float64, ndmin=2)
    except ValueError:  # ragged columns, a trailing comma, a bad field: the line-by-line path says which
        table = np.zeros((0, 0))
    if table.shape[0] == len(numbers) and table.shape[1] >= 6:
        present = np.ones((len(table), max(table.shape[1], 7)), bool)
        if table.shape[1] < 7:
            present[:, 6] = False
            table = np.concatenate([table, np.full((len(table), 1), np.nan)], axis=1)
        return table, present, numbers, text
    lines = [s.strip() for s in text.split("\n")]

    def check(t: np.ndarray, p: np.ndarray) -> None:
        _check(path, t, p, numbers[: len(t)], text)

    table, present = _parse_rows(path, lines, numbers, check)
    return table, present, numbers, text


def _parse_rows(
    path: Path,
    lines: list[str],
    numbers: np.ndarray,
    check: Callable[[np.ndarray, np.ndarray], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(N, C) float64 table NaN-padded for short lines and (N, C) bool cells present (the slow path).

    A malformed line raises FormatError naming it; ``check`` first sees the rows before it, so an earlier
    line's problem is the one reported.
    """
    rows: list[list[float]] = []
    for text, lineno in zip(lines, numbers.tolist(), strict=True):
        fields = [f.strip() for f in text.replace(" ", "").split(",")] if "," in text else text.split()
        if fields and fields[-1] == "":
            fields = fields[:-1]  # a trailing comma
        problem = None
        if len(fields) < 6:
            problem = (
                "expected at least 6 comma-separated values (frame,id,left,top,width,height[,conf,...]), "
                f"got {len(fields)}: {_quote(text)}"
            )
        elif not all(_is_float(f) for f in fields):
            bad = next(f for f in fields if not _is_float(f))
            kind = " (a complex number; MOT values are real)" if _is_complex(bad) else ""
            problem = f"expected numbers, got {_quote(bad)}{kind} in {_quote(text)}"
        if problem is not None:
            if check is not None:
                check(*_pad(rows))
            raise FormatError(path, problem, lineno)
        rows.append([float(f) for f in fields])
    return _pad(rows)


def _pad(rows: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of different lengths as a NaN-padded (N, max(7, longest)) table and its (N, C) present mask."""
    table = np.full((len(rows), max([7, *(len(r) for r in rows)])), np.nan)
    present = np.zeros(table.shape, bool)
    for k, values in enumerate(rows):
        table[k, : len(values)] = values
        present[k, : len(values)] = True
    return table, present


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_complex(text: str) -> bool:
    try:
        complex(text)
    except ValueError:
        return False
    return True


def _quote(text: str, limit: int = 120) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _check(path: Path, table: np.ndarray, present: np.ndarray, numbers: np.ndarray, text: str) -> None:
    """Vectorised validity checks; the earliest bad line raises FormatError with its true reason.

    Args:
        table: (K, C) float64 rows. present: (K, C) bool, which cells the line had (the rest are NaN padding).
        numbers: (K,) line numbers. text: the K data lines (quoted in the message).
    """
    core = table[:, :6]
    frame, ident = core[:, 0], core[:, 1]
    with np.errstate(invalid="ignore"):
        big32 = present[:, 2:7] & (np.abs(table[:, 2:7]) > FLOAT32_MAX)
        problems = [
            (
                (present & ~np.isfinite(table)).any(1),
                "expected finite numbers, got NaN or inf (a number beyond "
                "the float64 range, about 1.8e308, also reads as inf)",
            ),
            (
                frame >= MAX_EXACT_INT,
                f"expected a frame number below 2**53 = {MAX_EXACT_INT} (larger integers "
                "are not exact in float64), got a larger one",
            ),
            (
                np.abs(ident) >= MAX_EXACT_INT,
                f"expected a track id of magnitude below 2**53 = {MAX_EXACT_INT}",
            ),
            (
                big32.any(1),
                f"expected box and conf values within the float32 range (|x| <= {FLOAT32_MAX:.4g}); "
                "converting this one would overflow to inf",
            ),
            (frame != np.floor(frame), "expected an integer frame number"),
            (frame < 1, "expected a 1-based frame number (>= 1); MOT files count frames from 1"),
            (ident != np.floor(ident), "expected an integer track id (-1 for detections)"),
            (ident < -1, "expected a track id >= -1"),
            ((core[:, 4] < 0) | (core[:, 5] < 0), "expected a non-negative width and height"),
        ]
    masks = [np.asarray(bad, bool) for bad, _ in problems]
    anybad = np.logical_or.reduce(masks)
    if not anybad.any():
        return
    k = int(np.argmax(anybad))
    message = next(m for mask, (_, m) in zip(masks, problems, strict=True) if mask[k])
    line = text.split("\n", k + 1)[k].strip()
    raise FormatError(path, f"{message}: {_quote(line)}", int(numbers[k]))


class _Columns:
    """Preallocated output columns for at most ``capacity`` rows, filled block by block."""

    def __init__(self, capacity: int) -> None:
        self.n = 0
        self.frame = np.empty(capacity, np.int64)
        self.track_id = np.empty(capacity, np.int64)
        self.boxes = np.empty((capacity, 4), np.float32)
        self.scores = np.empty(capacity, np.float32)
        self.extra = np.empty((capacity, 0), np.float64)
        self.line = np.empty(capacity, np.int64)

    def add(self, table: np.ndarray, numbers: np.ndarray) -> None:
        a, b = self.n, self.n + len(table)
        k = table.shape[1] - 7
        if k > self.extra.shape[1]:  # a wider block: grow the extra columns (NaN for earlier rows)
            grown = np.full((len(self.extra), k), np.nan)
            grown[:a, : self.extra.shape[1]] = self.extra[:a]
            self.extra = grown
        self.frame[a:b] = table[:, 0]
        self.track_id[a:b] = table[:, 1]
        self.boxes[a:b] = table[:, 2:6]
        self.scores[a:b] = np.where(np.isnan(table[:, 6]), 1.0, table[:, 6])
        self.extra[a:b] = np.nan
        self.extra[a:b, :k] = table[:, 7:]
        self.line[a:b] = numbers
        self.n = b

    def table(self, path: Path) -> MotTable:
        """The filled rows (arrays shrunk in place when blank or comment lines left capacity unused)."""
        n = self.n
        columns: list[np.ndarray] = [
            self.frame,
            self.track_id,
            self.boxes,
            self.scores,
            self.extra,
            self.line,
        ]
        for x in columns:
            if len(x) != n:
                x.resize((n, *x.shape[1:]), refcheck=False)  # realloc, no copy of the kept rows
        return MotTable(str(path), *columns)


def read_mot(path: str | Path) -> MotTable:
    """Read a MOT Challenge ``gt.txt`` or ``det.txt`` file.

    Args:
        path: the text file.

    Returns:
        the boxes as a :class:`MotTable` (use :meth:`MotTable.by_frame` for per-frame
        :class:`~pairedge.core.types.Detections`).

    Raises:
        FormatError: the file cannot be read, is above a ceiling (see the module docstring), or a line is
            malformed (names the line and the reason).
    """
    p = Path(path)
    data = _read_bytes(p)
    out = _Columns(data.count(b"\n") + (0 if data.endswith(b"\n") else 1))
    for block, first_line in _blocks(data):
        table, present, numbers, text = _parse_block(p, block, first_line)
        _check(p, table, present, numbers, text)
        out.add(table, numbers)
    return out.table(p)


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
        InputError: mismatched lengths, complex values, frame < 1, NaN / inf or negative sizes.
    """
    columns = {"frame": frame, "track_id": track_id, "boxes": boxes, "scores": scores, "extra": extra}
    complex_ = [name for name, value in columns.items() if value is not None and np.iscomplexobj(value)]
    if complex_:
        raise InputError(f"write_mot: expected real numbers, got complex values in {', '.join(complex_)}")
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
