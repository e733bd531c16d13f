"""Safe reading of text and JSON input files: every failure is a :class:`FormatError` naming the file.

What the readers share: a file that cannot be read (missing, a folder, no permission, not UTF-8), a UTF-8
byte-order mark (accepted and skipped), JSON that is invalid, nested deeper than the parser allows or holds
an integer with more digits than Python converts (``sys.get_int_max_str_digits()``), numbers beyond the
float64 or int64 range, and values too long to quote whole in a message.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.errors import FormatError

#: The int64 range every integer id and frame number must fit.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: The largest float32 magnitude: boxes are stored as float32, larger values would become inf.
FLOAT32_MAX = float(np.finfo(np.float32).max)


def read_text(path: str | Path, expected: str) -> str:
    """The whole file as text (UTF-8, a leading byte-order mark dropped).

    Args:
        path: the file.
        expected: what the file should be, for the message (``"JSON Lines"``, ``"a stickmen text file"``).

    Raises:
        FormatError: the file cannot be read (missing, a folder, permission) or is not UTF-8.
    """
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(
            p, f"not UTF-8 text (byte {exc.start}: {exc.reason}); expected {expected}"
        ) from None
    except OSError as exc:
        raise FormatError(p, f"cannot read the file ({exc.strerror or exc}); expected {expected}") from None


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
