"""Buffy / CALVIN stickmen text files: 6 sticks ``x1 y1 x2 y2`` per person.

Two layouts are read, both as the CALVIN MATLAB reader (``ReadStickmenAnnotationTxtMulti``) reads them:

* **bare**: only stick lines, 6 consecutive lines per person (torso, left upper arm, right upper arm,
  left lower arm, right lower arm, head; "left" / "right" as they appear in the image);
* **official** (Buffy, ETHZ PASCAL, We Are Family, Synchronic Activities): each image starts with a header
  line ``<frame_nr or filename> [Nstickmen [Nparts]]`` (Nstickmen defaults to 1, Nparts must be 6),
  followed by ``Nstickmen * 6`` stick lines.

A line with exactly 4 fields is a stick; a line with 1 to 3 fields is a header. Blank lines and lines
starting with ``#`` are skipped. An occluded part is ``NaN NaN NaN NaN`` (the CALVIN convention,
``me_isEmptyStick``); a stick with only some NaN coordinates, or an infinite one, is an error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.textio import read_lines, short

#: Buffy part order; index = row of a person's (6, 4) stick array.
PARTS: tuple[str, ...] = (
    "torso",
    "left_upper_arm",
    "right_upper_arm",
    "left_lower_arm",
    "right_lower_arm",
    "head",
)
N_PARTS = len(PARTS)


@dataclass(frozen=True, eq=False)
class StickmenImage:
    """The stickmen of one image.

    Attributes:
        name: the header's frame number or filename (``""`` for a bare file).
        sticks: (P, 6, 4) float64, ``[x1, y1, x2, y2]`` per part in :data:`PARTS` order; NaN rows = occluded.
        windows: optional (P, 4) float64 detection windows ``[min_x, min_y, max_x, max_y]`` (the CALVIN
            ``.det`` field) of estimated stickmen; a NaN row (or None for all) = derive from torso + head.
    """

    name: str
    sticks: np.ndarray
    windows: np.ndarray | None = None


def read_stickmen(path: str | Path) -> np.ndarray:
    """Read every person of a stickmen file (bare or official layout), in file order.

    Returns:
        (P, 6, 4) float64; an occluded part is a row of four NaN.

    Raises:
        FormatError: naming the file and line (wrong number of sticks, a non-number, partial NaN, inf).
    """
    images = read_stickmen_images(path)
    if not images:
        return np.zeros((0, N_PARTS, 4), dtype=np.float64)
    return np.concatenate([im.sticks for im in images], axis=0)


def read_stickmen_images(path: str | Path) -> list[StickmenImage]:
    """Read a stickmen file keeping its images apart.

    A bare file (no header line) is one image named ``""`` holding every person. In the official layout
    each header starts a new image; names must be unique. Bounded before parsing: a regular file of at most
    ``pairedge.core.limits.MAX_TEXT_BYTES``, lines of at most ``MAX_LINE_BYTES``, at most ``MAX_RECORDS``
    lines.
    """
    path = Path(path)
    lines = [
        (number, line.split())
        for number, line in enumerate(read_lines(path, "a stickmen text file"), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        return []
    if len(lines[0][1]) == 4:
        if any(len(fields) != 4 for _, fields in lines):
            bad = next(n for n, f in lines if len(f) != 4)
            raise FormatError(path, "a header line inside a file that starts without one", f"line {bad}")
        return [StickmenImage("", _parse_people(path, lines))]
    return _read_official(path, lines)


def _read_official(path: Path, lines: list[tuple[int, list[str]]]) -> list[StickmenImage]:
    images: list[StickmenImage] = []
    seen: set[str] = set()
    i = 0
    while i < len(lines):
        number, header = lines[i]
        if len(header) not in (1, 2, 3):
            raise FormatError(
                path,
                f"expected a header '<name> [Nstickmen [Nparts]]', got {len(header)} fields",
                f"line {number}",
            )
        name = header[0]
        if name in seen:
            raise FormatError(
                path, f"duplicate image {short(name)}; each image must appear once", f"line {number}"
            )
        seen.add(name)
        count = _header_int(path, number, header, 1, default=1)
        parts = _header_int(path, number, header, 2, default=N_PARTS)
        if parts != N_PARTS:
            raise FormatError(path, f"expected {N_PARTS} parts per stickman, got {parts}", f"line {number}")
        body = lines[i + 1 : i + 1 + count * N_PARTS]
        got = next((k for k, (_, fields) in enumerate(body) if len(fields) != 4), len(body))
        if got < count * N_PARTS:
            raise FormatError(
                path,
                f"image {short(name)} declares {count} stickmen = {count * N_PARTS} stick lines, got {got}",
                f"line {number}",
            )
        images.append(StickmenImage(name, _parse_people(path, body)))
        i += 1 + count * N_PARTS
    return images


def _header_int(path: Path, number: int, header: list[str], index: int, *, default: int) -> int:
    if len(header) <= index:
        return default
    try:
        value = int(header[index])
    except ValueError:
        raise FormatError(
            path, f"expected an integer count in the header, got {short(header[index])}", f"line {number}"
        ) from None
    if value < 0:
        raise FormatError(path, f"expected a count >= 0 in the header, got {value}", f"line {number}")
    return value


def _parse_people(path: Path, lines: list[tuple[int, list[str]]]) -> np.ndarray:
    """Stick lines (each 4 fields) -> (P, 6, 4) float64, validated."""
    if len(lines) % N_PARTS:
        start = lines[(len(lines) // N_PARTS) * N_PARTS][0]
        raise FormatError(
            path,
            f"expected {N_PARTS} stick lines per person, got {len(lines) % N_PARTS} for the last person "
            f"({len(lines)} stick lines in all)",
            f"line {start}",
        )
    values = np.empty((len(lines), 4), dtype=np.float64)
    for row, (number, fields) in enumerate(lines):
        try:
            values[row] = [float(f) for f in fields]
        except ValueError:
            raise FormatError(
                path, f"expected 4 numbers 'x1 y1 x2 y2', got {short(' '.join(fields))}", f"line {number}"
            ) from None
    problem = stick_problems(values)
    if problem is not None:
        row, what = problem
        raise FormatError(path, what, f"line {lines[row][0]}")
    return values.reshape(-1, N_PARTS, 4)


def stick_problems(sticks: np.ndarray) -> tuple[int, str] | None:
    """First invalid stick of ``sticks`` ((..., 4) float), as (flat row index, problem), or None.

    Valid: four finite numbers, or four NaN (occluded part).
    """
    flat = np.asarray(sticks, dtype=np.float64).reshape(-1, 4)
    nan_count = np.isnan(flat).sum(axis=1)
    bad = ((nan_count > 0) & (nan_count < 4)) | np.isinf(flat).any(axis=1)
    if not bad.any():
        return None
    row = int(np.flatnonzero(bad)[0])
    return row, (
        f"expected 4 finite coordinates or 'NaN NaN NaN NaN' (occluded part), got {flat[row].tolist()}"
    )


def _format_stick(stick: np.ndarray) -> str:
    return " ".join("NaN" if math.isnan(v) else repr(float(v)) for v in stick)


def _check_sticks(sticks: np.ndarray) -> np.ndarray:
    arr = np.asarray(sticks, dtype=np.float64)
    if arr.ndim == 2 and arr.shape == (N_PARTS, 4):
        arr = arr[None]
    if arr.ndim != 3 or arr.shape[1:] != (N_PARTS, 4):
        raise InputError(f"expected sticks of shape (P, {N_PARTS}, 4), got {arr.shape}")
    problem = stick_problems(arr)
    if problem is not None:
        row, what = problem
        raise InputError(f"person {row // N_PARTS}, part {PARTS[row % N_PARTS]}: {what}")
    return arr


def write_stickmen(path: str | Path, sticks: np.ndarray, *, name: str | None = None) -> None:
    """Write one image's stickmen.

    Args:
        path: output text file (overwritten).
        sticks: (P, 6, 4) or (6, 4) float, ``[x1, y1, x2, y2]`` per part in :data:`PARTS` order;
            a row of four NaN marks an occluded part.
        name: when given, the official layout: a header ``<name> P 6`` first; otherwise the bare layout.

    Raises:
        InputError: wrong shape, partial NaN or inf.
    """
    arr = _check_sticks(sticks)
    body = [_format_stick(s) for s in arr.reshape(-1, 4)]
    header = [] if name is None else [_header(name, len(arr))]
    Path(path).write_text("\n".join(header + body) + "\n")


def write_stickmen_images(path: str | Path, images: Sequence[StickmenImage | tuple[str, np.ndarray]]) -> None:
    """Write many images in the official layout (``<name> Nstickmen 6`` + stick lines per image).

    Args:
        images: ``StickmenImage`` or ``(name, sticks (P, 6, 4))`` pairs; names unique, without spaces.
    """
    out: list[str] = []
    seen: set[str] = set()
    for item in images:
        name, sticks = (item.name, item.sticks) if isinstance(item, StickmenImage) else item
        if name in seen:
            raise InputError(f"duplicate image name {name!r}; each image must appear once")
        seen.add(name)
        arr = _check_sticks(sticks)
        out.append(_header(name, len(arr)))
        out.extend(_format_stick(s) for s in arr.reshape(-1, 4))
    Path(path).write_text("\n".join(out) + ("\n" if out else ""))


def _header(name: str, count: int) -> str:
    if not name or len(name.split()) != 1 or name.startswith("#"):
        raise InputError(f"expected an image name without spaces (not starting with '#'), got {name!r}")
    return f"{name} {count} {N_PARTS}"
