"""Safe reading of text and JSON input files: every failure is a :class:`FormatError` naming the file.

What the readers share: the ceilings of :mod:`pairedge.core.limits`, checked before the work (a regular file
of at most ``MAX_TEXT_BYTES`` read in chunks, lines of at most ``MAX_LINE_BYTES``, at most ``MAX_JSON_VALUES``
values in a JSON document, at most ``MAX_RECORDS`` records kept), a file that cannot be read (missing, a
folder, a FIFO or a device, no permission, not UTF-8), a UTF-8 byte-order mark (accepted and skipped), JSON
that is invalid, nested deeper than the parser allows or holds an integer with more digits than Python
converts (``sys.get_int_max_str_digits()``), numbers beyond the float64 or int64 range, and values too long
to quote whole in a message.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from pairedge.core import limits
from pairedge.core.errors import FormatError

#: The int64 range every integer id and frame number must fit.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: The largest float32 magnitude: boxes are stored as float32, larger values would become inf.
FLOAT32_MAX = float(np.finfo(np.float32).max)


def read_text(path: str | Path, expected: str, *, lines: bool = False) -> str:
    """The whole file as text (UTF-8, a leading byte-order mark dropped), bounded before it is read.

    The file must be a regular file (a FIFO or a device is refused without being opened) of at most
    ``pairedge.core.limits.MAX_TEXT_BYTES``; it is read in chunks. With ``lines=True`` (a line-based format)
    ``\r\n`` and ``\r`` line ends become ``\n`` and a line longer than ``pairedge.core.limits.MAX_LINE_BYTES``
    is refused before anything is parsed.

    Args:
        path: the file.
        expected: what the file should be, for the message (``"JSON Lines"``, ``"a stickmen text file"``).
        lines: normalise line ends and check the length of every line.

    Raises:
        FormatError: the file cannot be read (missing, a folder / FIFO / device, permission), is above a
            ceiling or is not UTF-8.
    """
    data = limits.read_bytes(path, expected, limits.MAX_TEXT_BYTES)
    if lines:
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        limits.check_lines(path, data, expected)
    return limits.decode_utf8(path, data, expected)


def read_lines(path: str | Path, expected: str) -> list[str]:
    """The lines of a line-based text file (split on ``\n`` only, after ``\r\n`` / ``\r`` became ``\n``;
    a final newline leaves an empty last line), every ceiling checked before the lines are built: see
    :func:`read_text` (``lines=True``) and at most ``pairedge.core.limits.MAX_RECORDS`` lines.

    Raises:
        FormatError: see :func:`read_text`; also too many lines.
    """
    text = read_text(path, expected, lines=True)
    check_records(path, text.count("\n") + (0 if text.endswith("\n") else 1), "lines")
    return text.split("\n")


def iter_lines(path: str | Path, expected: str) -> Iterator[tuple[int, str]]:
    """Stream ``(line number, text)`` of a text file, one line at a time (``\\n``, ``\\r\\n`` or ``\\r``
    line ends, removed; a UTF-8 byte-order mark dropped), for readers that keep little per line.

    Bounded: a regular file (a FIFO or a device is refused unopened) of at most
    ``pairedge.core.limits.MAX_TEXT_BYTES``, read in chunks; a line longer than ``MAX_LINE_BYTES`` is refused
    as soon as one chunk past the ceiling is seen, not read whole.

    Raises:
        FormatError: see :func:`read_text`, naming the line of an overlong or undecodable line.
    """
    p = Path(path)
    limits.regular_file(p, expected, limits.MAX_TEXT_BYTES)
    lineno = 0
    try:
        with p.open("rb") as fh:
            for raw in _raw_lines(p, fh, expected):
                lineno += 1
                if len(raw) > limits.MAX_LINE_BYTES:
                    raise FormatError(
                        p,
                        f"a line of more than {limits.describe_size(limits.MAX_LINE_BYTES)}, the ceiling "
                        f"for one line of {expected} (pairedge.core.limits.MAX_LINE_BYTES); is it the right "
                        "file?",
                        f"line {lineno}",
                    )
                yield lineno, _decode_line(p, raw, lineno, expected)
    except OSError as exc:
        raise FormatError(p, f"cannot read the file ({exc.strerror or exc}); expected {expected}") from None


def _raw_lines(path: Path, fh: BinaryIO, expected: str) -> Iterator[bytes]:
    """The lines of a binary file without their ends, read in chunks of ``pairedge.core.limits.READ_CHUNK``.

    A line still open after a chunk is yielded as soon as it is longer than ``MAX_LINE_BYTES``, for the
    caller to refuse (it must stop there: the line would come again, longer).
    """
    rest, total = b"", 0
    while True:
        block = fh.read(limits.READ_CHUNK)
        total += len(block)
        if total > limits.MAX_TEXT_BYTES:
            raise FormatError(path, f"grew past the ceiling for {expected} while it was read")
        data, held = rest + block, b""
        if b"\r" in data:
            if block and data.endswith(b"\r"):  # maybe the first half of a \r\n split across chunks
                data, held = data[:-1], b"\r"
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = data.split(b"\n")
        rest = lines.pop() + held if block else b""
        yield from lines
        if len(rest) > limits.MAX_LINE_BYTES:
            yield rest
        if not block:
            return


def _decode_line(path: Path, raw: bytes, lineno: int, expected: str) -> str:
    try:
        return raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(
            path, f"not UTF-8 text ({exc.reason}); expected {expected}", f"line {lineno}"
        ) from None


def json_value_bound(text: str | bytes) -> int:
    """An upper bound on the number of JSON values (keys included) of ``text``, without parsing it.

    Every value but the outermost follows a comma or an opening bracket (an array element, an object key)
    or a colon (an object member's value). Such characters inside strings only make the bound larger.
    """
    if isinstance(text, str):
        return 1 + sum(text.count(c) for c in ",:[{")
    return 1 + sum(text.count(c) for c in (b",", b":", b"[", b"{"))


def read_json(path: str | Path, expected: str, limit: int | None = None) -> Any:
    """A whole JSON document, every ceiling checked before ``json.loads``.

    Bounded: a regular file of at most ``limit`` bytes (default ``pairedge.core.limits.MAX_TEXT_BYTES``), read
    in chunks, holding at most ``pairedge.core.limits.MAX_JSON_VALUES`` values (:func:`json_value_bound`), so
    the parsed objects stay within about 70 bytes x that ceiling whatever the file's shape.

    Raises:
        FormatError: see :func:`read_text` and :func:`parse_json`; also too many values.
    """
    data = limits.read_bytes(path, expected, limits.MAX_TEXT_BYTES if limit is None else limit)
    check_json_values(path, data, expected)
    text = limits.decode_utf8(path, data, expected)
    del data
    return parse_json(path, text)


def check_json_values(path: str | Path, text: str | bytes, expected: str) -> None:
    """Refuse a JSON document with more than ``pairedge.core.limits.MAX_JSON_VALUES`` values (an upper bound
    counted without parsing: :func:`json_value_bound`).

    Raises:
        FormatError: naming the count and the ceiling.
    """
    count = json_value_bound(text)
    if count > limits.MAX_JSON_VALUES:
        raise FormatError(
            path,
            f"up to {count:,} JSON values, more than the ceiling of {limits.MAX_JSON_VALUES:,} for "
            f"{expected} (pairedge.core.limits.MAX_JSON_VALUES); is it the right file?",
        )


def check_records(path: str | Path, count: int, what: str) -> None:
    """Refuse ``count`` records (frames, lines, images) above ``pairedge.core.limits.MAX_RECORDS``, before
    they are built as Python objects.

    Args:
        count: the number of records the file declares or an upper bound on it (e.g. its line count).
        what: what a record is, for the message (``"frame lines"``).

    Raises:
        FormatError: naming the count and the ceiling.
    """
    if count > limits.MAX_RECORDS:
        raise FormatError(
            path,
            f"{count:,} {what}, more than the ceiling of {limits.MAX_RECORDS:,} records a reader keeps "
            "in memory (pairedge.core.limits.MAX_RECORDS); split the file",
        )


def parse_json(path: str | Path, text: str, record: str | None = None) -> Any:
    """``json.loads(text)`` with every failure a :class:`FormatError` naming ``path`` and the line.

    Args:
        path: the file, for messages.
        text: the JSON text (a whole file, or one line of a JSON Lines file).
        record: where ``text`` is in the file (e.g. ``"line 7"``); default: the parser's line number.

    Raises:
        FormatError: invalid JSON, nesting deeper than the parser's recursion limit, or an integer with
            more digits than Python converts.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = record if record is not None else f"line {exc.lineno}"
        raise FormatError(path, f"invalid JSON ({exc.msg} at column {exc.colno})", where) from None
    except RecursionError:
        raise FormatError(
            path, "JSON nested too deeply for the parser; expected the documented flat layout", record
        ) from None
    except ValueError as exc:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        raise FormatError(path, f"invalid JSON value ({short(str(exc), 120)})", record) from None


def short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (safe for huge containers and numbers)."""
    if isinstance(value, list | tuple | dict) and len(value) > 16:
        kind = type(value).__name__
        return f"<{kind} of {len(value)} items>"
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int too long to print, a self-nested value
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_number(value: Any) -> bool:
    """True for a JSON number (int or float, not bool) that is finite as a float64."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, int):
        return abs(value) <= 1.7976931348623157e308
    return math.isfinite(value)


def is_int64(value: Any) -> bool:
    """True for a JSON integer (not bool) within the int64 range."""
    return type(value) is int and INT64_MIN <= value <= INT64_MAX


def printable(name: Any, limit: int = 200) -> str:
    """``name`` safe to echo on one line: control characters (newline, tab, escape, ...) written as
    ``\\n``-style escapes, cut to ``limit`` characters.

    Use it for every name that comes from a file or a log (topic names, frame ids, file names, labels) before
    it goes into a note, a table or an error line, so that a name with a newline cannot start a line of its
    own (for example one that reads ``error: ...``) and an escape sequence cannot drive the terminal. Rich
    markup is a separate matter: escape with ``rich.markup.escape`` when Rich prints the text.
    """
    text = str(name)
    if any(not ch.isprintable() for ch in text):
        text = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."
