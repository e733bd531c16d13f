"""Reader of the pairwise protocol's files: JSON Lines (the runtime's output schema) or a simple CSV.

JSON Lines, one object per frame (see docs/formats.md, section "pairwise")::

    {"labels": ["walking_together", "standing_together", "sitting_together"]}      <- optional header
    {"frame": 12, "interactions": [{"ids": [3, 7], "label": "walking_together", "p_interact": 0.93,
                                    "probs": [0.9, 0.05, 0.05]}],
                  "groups": [{"members": [3, 7, 9], "activity": "walking_together"}]}

The header may name a known label set instead: ``{"label_set": "paper3"}``. Unknown keys are ignored, so the
streaming runtime's output (with timings and diagnostics) can be scored directly. CSV: rows
``frame,id_a,id_b,label[,p_interact]`` with an optional ``frame,...`` header row; ``#`` lines are comments.

Normalisation and checks: a pair is unordered, so ``ids`` ``[7, 3]`` is stored as ``(3, 7)``; the same pair
twice in a frame (in either order), a pair of a person with itself, a negative track id, a frame given twice,
a person in two groups of one frame, NaN or out-of-range ``p_interact``, a ``probs`` list of the wrong length
and unknown label names are :class:`~pairedge.core.errors.FormatError` naming the file and the line.
"""

from __future__ import annotations

import csv
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.textio import is_number, iter_lines, parse_json, short
from pairedge.core.labels import get_label_set
from pairedge.measure.metrics.pairwise.groups import Groups
from pairedge.measure.metrics.pairwise.keys import first_duplicate, row_keys

_MAX_INT = 2**62


@dataclass(frozen=True, eq=False)
class PairTable:
    """The interactions of a file, one row per pair.

    Attributes:
        frame, id_a, id_b: (M,) int64, with ``id_a < id_b``.
        label: (M,) int64 class id, -1 when the record has no label.
        p_interact: (M,) float64 in [0, 1]; 1 when the record does not give it.
        probs: (M, C) float64 class probabilities (NaN rows where a record has none), or None when no
            record has them.
        line: (M,) int64 line number of each pair in its file (1-based).
    """

    frame: np.ndarray
    id_a: np.ndarray
    id_b: np.ndarray
    label: np.ndarray
    p_interact: np.ndarray
    probs: np.ndarray | None
    line: np.ndarray

    def rows(self) -> np.ndarray:
        """(M, 3) int64 rows ``(frame, id_a, id_b)``."""
        return np.stack([self.frame, self.id_a, self.id_b], axis=1).reshape(-1, 3)

    def subset(self, keep: np.ndarray) -> PairTable:
        """Rows selected by a boolean mask."""
        probs = None if self.probs is None else self.probs[keep]
        return PairTable(
            self.frame[keep],
            self.id_a[keep],
            self.id_b[keep],
            self.label[keep],
            self.p_interact[keep],
            probs,
            self.line[keep],
        )


@dataclass(frozen=True, eq=False)
class PairwiseFile:
    """A parsed prediction or ground-truth file.

    Attributes:
        path: the file, for messages.
        labels: (C,) class names the label ids refer to.
        frames: (F,) int64 distinct frames the file covers (frame lines, or CSV rows' frames).
        pairs: the interactions.
        groups: the groups, or None when no record of the file has a ``groups`` key (CSV never has).
        group_line: (G,) int64 line number of each group.
    """

    path: str
    labels: tuple[str, ...]
    frames: np.ndarray
    pairs: PairTable
    groups: Groups | None
    group_line: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def read_label_header(path: str | Path) -> tuple[str, ...] | None:
    """The label names declared by a JSON Lines header (first non-blank line), or None if there is none."""
    p = Path(path)
    if p.suffix.lower() == ".csv":
        return None
    for lineno, text in _lines(p):
        obj = _parse_json(p, lineno, text)
        return _header_labels(p, lineno, obj) if _is_header(obj) else None
    return None


def read_pairwise_file(path: str | Path, labels: Sequence[str]) -> PairwiseFile:
    """Parse a JSON Lines (``.jsonl`` / ``.json`` / anything not ``.csv``) or CSV pairwise file.

    Args:
        path: the file.
        labels: the class names label strings are resolved against (from a header or the caller).

    Raises:
        FormatError: the file does not follow the format (names the file, line and problem).
    """
    p = Path(path)
    names = tuple(labels)
    parsed = _Parsed(p, {name: i for i, name in enumerate(names)})
    if p.suffix.lower() == ".csv":
        _read_csv(p, parsed)
    else:
        _read_jsonl(p, parsed, names)
    return parsed.finish(names)


class _Parsed:
    """Accumulates records while a file is read, then checks and packs them into arrays.

    Records go into typed ``array`` columns (8 bytes a value), not Python tuples (about 200 bytes a pair),
    so memory stays within a few times the file's size whatever its shape.
    """

    def __init__(self, path: Path, index: dict[str, int]) -> None:
        self.path, self.index = path, index
        self.frames, self.frame_lines = array("q"), array("q")
        # pair columns: frame, id_a, id_b, label, line (int64) and p_interact (float64)
        self.pair_int = tuple(array("q") for _ in range(5))
        self.pair_p = array("d")
        self.prob_rows, self.prob_values = array("q"), array("d")  # pairs with probs, their C values each
        self.group_int = tuple(array("q") for _ in range(3))  # frame, activity, line
        self.member_sizes, self.member_ids = array("q"), array("q")
        self.has_groups = False

    @property
    def n_pairs(self) -> int:
        return len(self.pair_p)

    def label_id(self, value: Any, record: str) -> int:
        if value is None or value == "":
            return -1
        if not isinstance(value, str):
            raise FormatError(self.path, f"label: expected a class name (string), got {short(value)}", record)
        try:
            return self.index[value]
        except KeyError:
            raise FormatError(
                self.path, f"unknown label {short(value)}; expected one of {list(self.index)}", record
            ) from None

    def add_pair(
        self,
        frame: int,
        ids: tuple[int, int],
        label: int,
        p: float,
        line: int,
        rec: str,
        probs: list[float] | None = None,
    ) -> None:
        a, b = ids
        if a < 0 or b < 0:
            raise FormatError(
                self.path, f"ids: expected track ids >= 0 (pairs need identities), got {[a, b]}", rec
            )
        if a == b:
            raise FormatError(self.path, f"ids: a pair needs two different people, got {[a, b]}", rec)
        if probs is not None:
            self.prob_rows.append(self.n_pairs)
            self.prob_values.extend(probs)
        for column, value in zip(self.pair_int, (frame, min(a, b), max(a, b), label, line), strict=True):
            column.append(value)
        self.pair_p.append(p)

    def add_group(self, frame: int, activity: int, line: int, members: list[int]) -> None:
        for column, value in zip(self.group_int, (frame, activity, line), strict=True):
            column.append(value)
        self.member_sizes.append(len(members))
        self.member_ids.extend(members)

    def finish(self, names: tuple[str, ...]) -> PairwiseFile:
        frames = np.asarray(self.frames, np.int64)
        dup = first_duplicate(frames)
        if dup is not None:
            raise FormatError(
                self.path,
                f"frame {int(frames[dup[1]])} already given on line {self.frame_lines[dup[0]]}; "
                "expected one record per frame",
                f"line {self.frame_lines[dup[1]]}",
            )
        f, a, b, lab, ln = (
            np.frombuffer(c, np.int64) if len(c) else np.zeros(0, np.int64) for c in self.pair_int
        )
        p = np.frombuffer(self.pair_p, np.float64) if self.n_pairs else np.zeros(0)
        table = PairTable(f, a, b, lab, p, self._probs(names), ln)
        self._check_unique_pairs(table)
        groups, group_line = self._groups()
        covered = np.unique(frames if len(frames) else table.frame)  # CSV: the frames of its rows
        return PairwiseFile(str(self.path), names, covered, table, groups, group_line)

    def _probs(self, names: tuple[str, ...]) -> np.ndarray | None:
        if not self.prob_rows:
            return None
        out = np.full((self.n_pairs, len(names)), np.nan)
        out[np.frombuffer(self.prob_rows, np.int64)] = np.frombuffer(self.prob_values, np.float64).reshape(
            -1, len(names)
        )
        return out

    def _check_unique_pairs(self, table: PairTable) -> None:
        dup = first_duplicate(row_keys(table.rows())[0])
        if dup is not None:
            i, j = dup
            raise FormatError(
                self.path,
                f"duplicate pair {[int(table.id_a[j]), int(table.id_b[j])]} in frame "
                f"{int(table.frame[j])} (first on line {int(table.line[i])}); expected each unordered pair "
                "once per frame",
                f"line {int(table.line[j])}",
            )

    def _groups(self) -> tuple[Groups | None, np.ndarray]:
        if not self.has_groups:
            return None, np.zeros(0, np.int64)
        g = np.asarray([np.asarray(c, np.int64) for c in self.group_int], np.int64).T.reshape(-1, 3)
        sizes = np.asarray(self.member_sizes, np.int64)
        ids = np.asarray(self.member_ids, np.int64)
        m = np.stack([np.repeat(np.arange(len(sizes)), sizes), ids], axis=1)
        groups = Groups(frame=g[:, 0], activity=g[:, 1], member_group=m[:, 0], member_id=m[:, 1])
        dup = first_duplicate(row_keys(groups.member_rows())[0])
        if dup is not None:
            i, j = dup
            raise FormatError(
                self.path,
                f"person {int(m[j, 1])} appears twice in the groups of frame {int(g[m[j, 0], 0])} (first on "
                f"line {int(g[m[i, 0], 2])}); expected a person in at most one group per frame",
                f"line {int(g[m[j, 0], 2])}",
            )
        return groups, g[:, 2]


EXPECTED = "a JSON Lines or CSV pairwise file"


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, text)`` of the non-blank lines, streamed within the ceilings of
    :func:`pairedge.core.io.textio.iter_lines` (the file's size, one line's length)."""
    for lineno, text in iter_lines(path, EXPECTED):
        if text.strip():
            yield lineno, text


def _parse_json(path: Path, lineno: int, text: str) -> Any:
    return parse_json(path, text, f"line {lineno}")


def _is_header(obj: Any) -> bool:
    return isinstance(obj, dict) and "frame" not in obj and ("labels" in obj or "label_set" in obj)


def _header_labels(path: Path, lineno: int, obj: dict[str, Any]) -> tuple[str, ...]:
    rec = f"line {lineno}"
    if "labels" in obj:
        names = obj["labels"]
        if (
            not isinstance(names, list)
            or not names
            or not all(isinstance(n, str) and n for n in names)
            or len(set(names)) != len(names)
        ):
            raise FormatError(
                path, f"labels: expected a list of unique non-empty class names, got {short(names)}", rec
            )
        return tuple(names)
    try:
        return get_label_set(str(obj["label_set"])).classes
    except InputError as exc:
        raise FormatError(path, str(exc), rec) from None


def _read_jsonl(path: Path, parsed: _Parsed, names: tuple[str, ...]) -> None:
    first = True
    for lineno, text in _lines(path):
        obj = _parse_json(path, lineno, text)
        if first and _is_header(obj):
            first = False
            declared = _header_labels(path, lineno, obj)
            if declared != names:
                raise FormatError(
                    path,
                    f"header declares labels {list(declared)} but the other file uses {list(names)}; "
                    "expected the same label set in prediction and ground truth",
                    f"line {lineno}",
                )
            continue
        first = False
        _read_frame_record(path, parsed, lineno, obj, len(names))


def _read_frame_record(path: Path, parsed: _Parsed, lineno: int, obj: Any, c: int) -> None:
    rec = f"line {lineno}"
    if not isinstance(obj, dict) or "frame" not in obj:
        raise FormatError(path, "expected a frame object with a 'frame' key (or a labels header first)", rec)
    frame = _int(path, obj["frame"], "frame", rec)
    parsed.frames.append(frame)
    parsed.frame_lines.append(lineno)
    for j, item in enumerate(_list(path, obj.get("interactions", []), "interactions", rec)):
        where = f"{rec}, interactions[{j}]"
        if not isinstance(item, dict):
            raise FormatError(path, f"expected an interaction object, got {short(item)}", where)
        ids = item.get("ids")
        if not isinstance(ids, list) or len(ids) != 2:
            raise FormatError(path, f"ids: expected a list of two track ids, got {short(ids)}", where)
        a, b = ids
        if not (_is_id(a) and _is_id(b)):  # slow path only to build the message
            for value in ids:
                _int(path, value, "ids", where)
            raise FormatError(path, f"ids: expected track ids >= 0 (pairs need identities), got {ids}", where)
        pair = (a, b)
        label = parsed.label_id(item.get("label"), where)
        p = _prob(path, item.get("p_interact", 1.0), where)
        probs = _probs(path, item["probs"], c, where) if item.get("probs") is not None else None
        parsed.add_pair(frame, pair, label, p, lineno, where, probs)
    if "groups" in obj:
        parsed.has_groups = True
        for j, group in enumerate(_list(path, obj["groups"], "groups", rec)):
            _read_group(path, parsed, frame, lineno, group, f"{rec}, groups[{j}]")


def _read_group(path: Path, parsed: _Parsed, frame: int, lineno: int, group: Any, where: str) -> None:
    if not isinstance(group, dict):
        raise FormatError(path, f"expected a group object, got {short(group)}", where)
    members = _list(path, group.get("members"), "members", where)
    if not members:
        raise FormatError(path, "members: expected at least one track id, got []", where)
    if not all(map(_is_id, members)):  # slow path only to build the message
        ids = [_int(path, m, "members", where) for m in members]
        raise FormatError(path, f"members: expected track ids >= 0, got {short(ids)}", where)
    activity = parsed.label_id(group.get("activity"), where)
    parsed.add_group(frame, activity, lineno, members)


def _read_csv(path: Path, parsed: _Parsed) -> None:
    rows = ((n, t) for n, t in _lines(path) if not t.lstrip().startswith("#"))
    for lineno, text in rows:
        rec = f"line {lineno}"
        try:  # strict: an unterminated quote (or text after a closing quote) is an error
            fields = [f.strip() for f in next(csv.reader([text], strict=True))]
        except csv.Error as exc:
            raise FormatError(
                path,
                f"malformed CSV ({exc}); expected frame,id_a,id_b,label[,p_interact] with balanced "
                'quotes ("...")',
                rec,
            ) from None
        if fields and fields[0].lower() == "frame":
            continue  # header row
        if len(fields) not in (4, 5):
            raise FormatError(
                path, f"expected 4 or 5 fields frame,id_a,id_b,label[,p_interact], got {len(fields)}", rec
            )
        frame, a, b = (
            _csv_int(path, v, name, rec)
            for v, name in zip(fields[:3], ("frame", "id_a", "id_b"), strict=True)
        )
        label = parsed.label_id(fields[3], rec)
        p = _prob(path, _csv_float(path, fields[4], rec), rec) if len(fields) == 5 and fields[4] else 1.0
        parsed.add_pair(frame, (a, b), label, p, lineno, rec)


def _is_id(value: Any) -> bool:
    """True for a JSON integer (not a bool) in [0, 2**62)."""
    return type(value) is int and 0 <= value < _MAX_INT


def _int(path: Path, value: Any, what: str, rec: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) >= _MAX_INT:
        raise FormatError(path, f"{what}: expected an integer (|value| < 2**62), got {short(value)}", rec)
    return value


def _list(path: Path, value: Any, what: str, rec: str) -> list[Any]:
    if not isinstance(value, list):
        raise FormatError(path, f"{what}: expected a list, got {short(value)}", rec)
    return value


def _prob(path: Path, value: Any, rec: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise FormatError(path, f"p_interact: expected a probability in [0, 1], got {short(value)}", rec)
    return float(value)  # NaN fails the range test above


def _probs(path: Path, value: Any, c: int, rec: str) -> list[float]:
    ok = isinstance(value, list) and len(value) == c
    ok = ok and all(map(is_number, value))
    if not ok:
        raise FormatError(
            path,
            f"probs: expected {c} finite numbers (one per class, within the float64 range), got "
            f"{short(value)}",
            rec,
        )
    return [float(v) for v in value]


def _csv_int(path: Path, text: str, what: str, rec: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise FormatError(path, f"{what}: expected an integer, got {short(text)}", rec) from None
    return _int(path, value, what, rec)


def _csv_float(path: Path, text: str, rec: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise FormatError(path, f"p_interact: expected a number, got {short(text)}", rec) from None
