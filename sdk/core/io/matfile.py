"""Reading MATLAB v5 files with scipy, bounded before scipy sees them, with an optional crash probe in a
child process.

Before scipy reads a file, :func:`check_mat_file` checks what the file declares (SPEC 9: work and memory
bounded by the input): a regular file (a FIFO or a device is refused unopened) of at most
``pairedge.core.limits.MAX_MAT_BYTES``, a v5 header, compressed variables that inflate to at most
``MAX_MAT_BYTES`` in all (inflated in bounded steps, never whole past the ceiling), every element's declared
size within its container, nesting of at most :data:`MAX_DEPTH` arrays, at most ``MAX_RECORDS`` arrays,
and cell / struct arrays whose declared dimensions match the elements they hold (scipy allocates an object
array of the declared size before reading them: a 100-byte file could otherwise claim 10^9 cells). scipy
then parses the checked bytes, not the path again.

``scipy.io.loadmat`` can crash the whole interpreter (segmentation fault) on some corrupted files; a
two-byte edit of a valid file is enough with scipy 1.17. A crash cannot be caught in Python, so with
``isolate=True`` :class:`MatLoader` first parses the files in a separate Python process
(``sys.executable -c ...``) and loads only those that survived in this process; a file that crashed the
probe becomes a :class:`FormatError` naming it. Nothing is transferred back from the child (no pickles): it
only reports how far it got. :meth:`MatLoader.check` probes many files with one process start.
"""

from __future__ import annotations

import io
import math
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pairedge.core import limits
from pairedge.core.errors import FormatError
from pairedge.core.optional import require

PURPOSE = "reading MATLAB .mat files"
EXPECTED = "a MATLAB v5 .mat file"
#: Deepest nesting of arrays (cells / structs inside cells / structs) accepted; CAD's anno nests 3.
MAX_DEPTH = 32
HEADER_BYTES = 128
MI_INT8, MI_INT32, MI_UINT32, MI_MATRIX, MI_COMPRESSED = 1, 5, 6, 14, 15
CELL, STRUCT, OBJECT = 1, 2, 3
PROBE_TIMEOUT_S = 120.0
_OPTIONS = {"squeeze_me": False, "struct_as_record": True}
_PROBE = (
    "import sys, scipy.io\n"
    "for i, p in enumerate(sys.argv[1:]):\n"
    "    try:\n"
    f"        scipy.io.loadmat(p, **{_OPTIONS!r})\n"
    "    except Exception:\n"
    "        pass\n"
    "    print(i, flush=True)\n"
)


@dataclass
class _Census:
    """What a file's elements declare, summed while they are walked."""

    path: Path
    endian: str
    inflated: int = 0
    arrays: int = 0

    def fail(self, problem: str, record: str | None = None) -> FormatError:
        return FormatError(self.path, f"{problem}; expected {EXPECTED}", record)


def check_mat_file(path: str | Path) -> bytes:
    """The bytes of a MATLAB v5 file whose declared sizes are within the ceilings (module docstring).

    Raises:
        FormatError: not a regular file, above ``MAX_MAT_BYTES`` (on disk or inflated), not a v5 file, or an
            element, nesting, array count or cell / struct size beyond what the file holds or the ceilings.
    """
    p = Path(path)
    data = limits.read_bytes(p, EXPECTED, limits.MAX_MAT_BYTES)
    mark = data[126:HEADER_BYTES]
    if len(data) < HEADER_BYTES or mark not in (b"IM", b"MI"):
        v73 = " (a v7.3 file is HDF5: save it with -v7)" if data.startswith(b"MATLAB 7.3") else ""
        raise FormatError(
            p, f"no MATLAB v5 header (128 bytes ending in 'IM' or 'MI'){v73}; expected {EXPECTED}"
        )
    census = _Census(p, "<" if mark == b"IM" else ">")
    view = memoryview(data)
    offset = HEADER_BYTES
    while offset + 8 <= len(data):  # top-level variables: not padded, compressed or not
        kind, size, start = _tag(census, view, offset, len(data))
        if kind == MI_MATRIX:
            _array(census, view[start : start + size], depth=1)
        elif kind == MI_COMPRESSED:  # one whole element (tag and data) once inflated
            for inner, body in _parts(census, memoryview(_inflate(census, view[start : start + size]))):
                if inner == MI_MATRIX:
                    _array(census, body, depth=1)
        offset = start + size
    return data


def _tag(census: _Census, view: memoryview, offset: int, end: int) -> tuple[int, int, int]:
    """``(data type, byte count, data offset)`` of the element tag at ``offset``; its data must end by
    ``end`` (the container's end)."""
    if offset + 8 > end:
        raise census.fail(f"an element tag cut off at byte {offset}")
    word, size = struct.unpack_from(census.endian + "II", view, offset)
    if word >> 16:  # the small data element format: type and size in one word, data in the next four bytes
        kind, size, start = word & 0xFFFF, word >> 16, offset + 4
        if size > 4:
            raise census.fail(f"a small data element of {size} bytes (at most 4)", f"byte {offset}")
        return kind, size, start
    if offset + 8 + size > end:
        raise census.fail(
            f"an element declaring {limits.describe_size(size)}, beyond the end of its container "
            f"({end - offset - 8} bytes left): truncated or corrupt",
            f"byte {offset}",
        )
    return word, size, offset + 8


def _parts(census: _Census, view: memoryview) -> list[tuple[int, memoryview]]:
    """``(data type, data)`` of the consecutive elements of ``view`` (each padded to 8 bytes)."""
    parts, offset = [], 0
    while offset < len(view):
        kind, size, start = _tag(census, view, offset, len(view))
        parts.append((kind, view[start : start + size]))
        offset = offset + 8 if start == offset + 4 else start + -(-size // 8) * 8
    return parts


def _inflate(census: _Census, body: memoryview) -> bytes:
    """A compressed variable inflated to at most the ceiling's remaining room plus one byte (what lies
    beyond is never produced); refused when it needs more."""
    room = limits.MAX_MAT_BYTES - census.inflated
    try:
        out = zlib.decompressobj().decompress(body, room + 1)
    except zlib.error as exc:
        raise census.fail(f"a compressed variable that does not inflate ({exc})") from None
    census.inflated += len(out)
    if len(out) > room:
        raise census.fail(
            "compressed variables that inflate to more than the "
            f"{limits.describe_size(limits.MAX_MAT_BYTES)} ceiling (pairedge.core.limits.MAX_MAT_BYTES); is "
            "it the right file?"
        )
    return out


def _array(census: _Census, view: memoryview, depth: int) -> None:
    """Check one array (the data of an ``miMATRIX`` element) and, recursively, the arrays it holds."""
    census.arrays += 1
    if census.arrays > limits.MAX_RECORDS:
        raise census.fail(
            f"more than {limits.MAX_RECORDS:,} arrays (the ceiling pairedge.core.limits.MAX_RECORDS)"
        )
    if depth > MAX_DEPTH:
        raise census.fail(f"arrays nested deeper than {MAX_DEPTH} levels")
    if len(view) == 0:  # an empty array (MATLAB writes [] in a cell so)
        return
    parts = _parts(census, view)
    if len(parts) < 2 or len(parts[0][1]) < 4 or len(parts[1][1]) % 4:
        raise census.fail("an array without its flags and dimensions")
    cls = struct.unpack_from(census.endian + "I", parts[0][1])[0] & 0xFF
    dims = struct.unpack_from(census.endian + f"{len(parts[1][1]) // 4}i", parts[1][1])
    if any(d < 0 for d in dims):
        raise census.fail(f"an array of negative dimensions {list(dims)}")
    children = [body for kind, body in parts if kind == MI_MATRIX]
    if cls in (CELL, STRUCT, OBJECT):
        _check_container(census, cls, math.prod(dims), parts, len(children))
    for body in children:
        _array(census, body, depth + 1)


def _check_container(
    census: _Census, cls: int, count: int, parts: list[tuple[int, memoryview]], held: int
) -> None:
    """A cell / struct / object array declaring ``count`` elements must hold them: scipy allocates
    ``count`` objects before it reads them. A struct's fields come from its field-name length and names
    (sub-elements 4 and 5; 5 and 6 for an object, after its class name)."""
    fields = 1
    if cls != CELL:
        k = 3 if cls == STRUCT else 4
        if len(parts) < k + 2 or len(parts[k][1]) < 4:
            raise census.fail("a struct without its field names")
        width = struct.unpack_from(census.endian + "i", parts[k][1])[0]
        fields = len(parts[k + 1][1]) // width if width > 0 else 0
    if count > limits.MAX_RECORDS or count * fields != held:
        what = "cells" if cls == CELL else f"structs of {fields} fields"
        raise census.fail(
            f"an array declaring {count:,} {what} ({count * fields:,} arrays) that holds {held:,} "
            f"(at most {limits.MAX_RECORDS:,} elements: pairedge.core.limits.MAX_RECORDS)"
        )


def crashing_files(paths: Iterable[Path], timeout: float = PROBE_TIMEOUT_S) -> set[Path]:
    """The files on which ``scipy.io.loadmat`` kills the process, found in child processes.

    Runs one child for all files; when it dies on a file, that file is recorded and a new child continues
    with the rest. A child that exceeds ``timeout`` seconds marks the file it was reading as crashing.
    """
    remaining = [Path(p) for p in paths]
    crashed: set[Path] = set()
    while remaining:
        try:
            run = subprocess.run(
                [sys.executable, "-c", _PROBE, *map(str, remaining)],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            stdout, ok = run.stdout, run.returncode == 0
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout or b""
            stdout, ok = out.decode() if isinstance(out, bytes) else out, False
        done = len(stdout.split())
        if ok and done == len(remaining):
            break
        crashed.add(remaining[done])
        remaining = remaining[done + 1 :]
    return crashed


class MatLoader:
    """Loads ``.mat`` files into dicts of numpy arrays (structs as numpy records).

    Args:
        isolate: probe each file in a child process first (see the module docstring).
        purpose: what the files are for, used in the message when scipy is missing.
    """

    def __init__(self, isolate: bool = True, purpose: str = PURPOSE) -> None:
        self._sio = require("scipy.io", extra="data", purpose=purpose)
        self.isolate = isolate
        self._safe: set[Path] = set()
        self._crashed: set[Path] = set()
        self._refused: dict[Path, FormatError] = {}

    def check(self, paths: Iterable[str | Path]) -> None:
        """Probe several files with one child process (isolated mode; a no-op otherwise). Files that
        :func:`check_mat_file` refuses are never given to the probe (their error comes from :meth:`load`)."""
        if not self.isolate:
            return
        todo = []
        for p in (Path(p).resolve() for p in paths):
            if p in self._safe or p in self._crashed or p in self._refused:
                continue
            try:
                check_mat_file(p)
            except FormatError as exc:
                self._refused[p] = exc
                continue
            todo.append(p)
        if todo:
            bad = crashing_files(todo)
            self._crashed |= bad
            self._safe |= set(todo) - bad

    def load(self, path: str | Path) -> dict[str, Any]:
        """The variables of a MATLAB file.

        Raises:
            FormatError: file missing, refused by :func:`check_mat_file`, not a readable MATLAB file, or
                scipy crashed on it (isolated mode).
        """
        path = Path(path)
        data = check_mat_file(path)  # the ceilings, before the probe and scipy see the file
        self.check([path])
        if path.resolve() in self._crashed:
            raise FormatError(
                path,
                "expected a MATLAB v5 .mat file; the MATLAB reader (scipy) crashed on it, the file is "
                "corrupt",
            )
        try:
            return self._sio.loadmat(io.BytesIO(data), **_OPTIONS)
        except Exception as exc:  # scipy raises assorted errors on corrupt or truncated files
            raise FormatError(path, f"expected a MATLAB v5 .mat file, could not read it: {exc}") from None
