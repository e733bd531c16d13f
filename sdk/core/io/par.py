"""JRDB-PAR style per-frame labels (panoramic activity recognition), JSON Lines, one object per frame.

Each line::

    {"frame": 12,
     "persons": [{"id": 3, "actions": [0, 5]}, {"id": 7, "action_scores": [27 raw logits]}],
     "groups": [{"members": [3, 7], "activity": [2]}, {"members": [9], "activity_scores": [32 logits]}],
     "global": [1]}                      # or "global_scores": [7 raw logits]

* ``actions`` / ``activity`` / ``global`` are label-id lists (27 individual actions, 32 social group
  labels = the 27 action ids + 5 group-only ids, 7 global activities); the ``*_scores`` keys hold raw
  logits instead (a prediction file; the protocol thresholds them). Within one frame all persons use the
  same form, and so do all groups. A missing key means "no label".
* ground-truth persons may carry ``"social": [ids]``, their own social-activity labels as JRDB-PAR
  annotates them; a group without ``activity`` then takes the labels of its lowest-index member (the
  member listed first in ``persons``), as the official evaluation does.
* groups are disjoint member sets of persons of the same frame; singletons are allowed in the file
  (JRDB-PAR clusters include them) but are not groups for the protocol.
* ``frame`` values and person ids within a frame are unique.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.textio import is_int64, is_number, parse_json, read_lines, short

N_ACTIONS = 27
N_SOCIAL = 32
N_GLOBAL = 7


@dataclass(frozen=True, eq=False)
class ParFrame:
    """Labels (ground truth) or labels / raw logits (prediction) of one key frame.

    Attributes:
        frame: frame number, unique within a file.
        person_ids: (N,) int64, unique.
        actions: (N, 27) bool multi-hot labels, or float64 raw logits (scores).
        groups: G arrays of member ids (int64), disjoint, each a subset of ``person_ids``.
        group_activity: (G, 32) bool labels or float64 logits, one row per group.
        global_activity: (7,) bool labels or float64 logits.
        person_social: (N, 32) bool per-person social labels (ground truth, optional).
    """

    frame: int
    person_ids: np.ndarray
    actions: np.ndarray
    groups: tuple[np.ndarray, ...]
    group_activity: np.ndarray
    global_activity: np.ndarray
    person_social: np.ndarray | None = None

    def __post_init__(self) -> None:
        problem = _frame_problem(self)
        if problem is not None:
            raise InputError(f"frame {self.frame}: {problem}")

    @classmethod
    def from_labels(
        cls,
        frame: int,
        persons: Sequence[tuple[int, Sequence[int]]],
        groups: Sequence[tuple[Sequence[int], Sequence[int]]] = (),
        global_labels: Sequence[int] = (),
    ) -> ParFrame:
        """Build a label frame from id lists (what the simulator writes).

        Args:
            frame: frame number.
            persons: ``(person_id, action_ids)`` per person; action ids in [0, 27).
            groups: ``(member_ids, social_ids)`` per group; social ids in [0, 32).
            global_labels: global activity ids in [0, 7).
        """
        ids = np.array([p for p, _ in persons], dtype=np.int64)
        return cls(
            frame=int(frame),
            person_ids=ids,
            actions=_multi_hot([a for _, a in persons], N_ACTIONS, "action"),
            groups=tuple(np.array(m, dtype=np.int64) for m, _ in groups),
            group_activity=_multi_hot([a for _, a in groups], N_SOCIAL, "social"),
            global_activity=_multi_hot([global_labels], N_GLOBAL, "global")[0],
        )


def _multi_hot(rows: Sequence[Sequence[int]], width: int, what: str) -> np.ndarray:
    out = np.zeros((len(rows), width), dtype=bool)
    for r, ids in enumerate(rows):
        problem = _ids_problem(ids, width, what)
        if problem is not None:
            raise InputError(problem)
        out[r, list(ids)] = True
    return out


def _ids_problem(ids: Any, width: int, what: str) -> str | None:
    if not isinstance(ids, list | tuple | np.ndarray):
        return f"expected a list of {what} label ids, got {type(ids).__name__}"
    for v in ids:
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            return f"expected integer {what} label ids, got {short(v)}"
        if not 0 <= int(v) < width:
            return f"unknown {what} label id {int(v)}; expected an id in [0, {width})"
    if len({int(v) for v in ids}) != len(ids):
        return f"duplicate {what} label ids in {list(ids)}"
    return None


def _matrix_problem(arr: np.ndarray, rows: int, width: int, what: str) -> str | None:
    if arr.shape != (rows, width):
        return f"expected {what} of shape ({rows}, {width}), got {arr.shape}"
    if arr.dtype != bool and not np.issubdtype(arr.dtype, np.floating):
        return f"expected {what} as bool labels or float logits, got dtype {arr.dtype}"
    if arr.dtype != bool and not np.isfinite(arr).all():
        return f"{what} scores must be finite numbers, got NaN or inf"
    return None


def _frame_problem(f: ParFrame) -> str | None:
    n = len(f.person_ids)
    if f.person_ids.ndim != 1 or f.person_ids.dtype.kind not in "iu":
        return f"expected person_ids of shape (N,) integers, got {f.person_ids.shape} {f.person_ids.dtype}"
    uniq, counts = np.unique(f.person_ids, return_counts=True)
    if (counts > 1).any():
        return f"duplicate person id {int(uniq[counts > 1][0])}; person ids must be unique per frame"
    checks = [
        _matrix_problem(f.actions, n, N_ACTIONS, "actions"),
        _matrix_problem(f.group_activity, len(f.groups), N_SOCIAL, "group_activity"),
        _matrix_problem(f.global_activity[None], 1, N_GLOBAL, "global_activity"),
    ]
    if f.person_social is not None:
        checks.append(_matrix_problem(f.person_social, n, N_SOCIAL, "person_social"))
    problem = next((c for c in checks if c is not None), None)
    if problem is not None:
        return problem
    return _groups_problem(f.groups, uniq)


def _groups_problem(groups: tuple[np.ndarray, ...], person_ids: np.ndarray) -> str | None:
    seen: dict[int, int] = {}
    for g, members in enumerate(groups):
        if members.ndim != 1 or len(members) == 0:
            return f"group {g}: expected a non-empty list of member ids, got {members.tolist()}"
        unknown = np.setdiff1d(members, person_ids)
        if len(unknown):
            return f"group {g}: member {int(unknown[0])} is not a person of this frame"
        for m in members.tolist():
            if m in seen:
                where = "twice in this group" if seen[m] == g else f"also in group {seen[m]}"
                return f"group {g}: person {m} is {where}; groups must be disjoint member sets"
            seen[m] = g
    return None


# ----------------------------------------------------------------------------------------------- reading


def read_par(path: str | Path) -> list[ParFrame]:
    """Read a JRDB-PAR style JSON Lines file, frames in file order.

    Bounded before parsing: a regular file of at most ``pairedge.core.limits.MAX_TEXT_BYTES``, lines of at
    most ``MAX_LINE_BYTES`` and at most ``MAX_RECORDS`` lines (a frame costs about 1 KB in memory).

    Raises:
        FormatError: naming the file, the line (and frame) and the problem: bad JSON, unknown label ids,
            duplicate frames / person ids / group members, wrong score lengths, NaN scores, ...
    """
    path = Path(path)
    lines = read_lines(path, "JRDB-PAR style JSON Lines")
    frames: list[ParFrame] = []
    seen: set[int] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        obj = parse_json(path, line, f"line {number}")
        try:
            frame = _parse_frame(obj)
        except (InputError, _Bad) as exc:
            raise FormatError(path, str(exc), f"line {number}") from None
        if frame.frame in seen:
            raise FormatError(path, f"duplicate frame {frame.frame}", f"line {number}")
        seen.add(frame.frame)
        frames.append(frame)
    return frames


class _Bad(Exception):
    """A parse problem inside one record (re-raised as FormatError with the line)."""


def _parse_frame(obj: Any) -> ParFrame:
    if not isinstance(obj, dict):
        raise _Bad(f"expected a JSON object per line, got {type(obj).__name__}")
    frame = _int64(obj.get("frame"), "an integer 'frame'")
    persons = _list_of_objects(obj, "persons")
    groups = _list_of_objects(obj, "groups")
    ids: list[int] = []
    for k, p in enumerate(persons):
        ids.append(_int64(p.get("id"), "an integer 'id'", f"frame {frame}, persons[{k}]: "))
    where = f"frame {frame}"
    actions = _rows(persons, "actions", "action_scores", N_ACTIONS, f"{where}, persons")
    social = None
    if any("social" in p for p in persons):
        social = _rows(persons, "social", None, N_SOCIAL, f"{where}, persons")
    members = []
    for k, g in enumerate(groups):
        m = g.get("members")
        if not isinstance(m, list) or not all(map(is_int64, m)):
            raise _Bad(
                f"{where}, groups[{k}]: expected 'members' as a list of integer person ids (int64), got "
                f"{short(m)}"
            )
        members.append(np.array(m, dtype=np.int64))
    activity = _rows(groups, "activity", "activity_scores", N_SOCIAL, f"{where}, groups")
    if social is not None:
        activity = _activity_from_members(groups, members, ids, social, activity, where)
    glob = _rows([obj], "global", "global_scores", N_GLOBAL, f"{where}, global")[0]
    return ParFrame(frame, np.array(ids, dtype=np.int64), actions, tuple(members), activity, glob, social)


def _int64(value: Any, what: str, where: str = "") -> int:
    if not is_int64(value):
        raise _Bad(f"{where}expected {what} (int64), got {short(value)}")
    return int(value)


def _list_of_objects(obj: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = obj.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise _Bad(f"frame {obj.get('frame')}: expected {key!r} as a list of objects, got {short(value)}")
    return value


def _rows(
    items: list[dict[str, Any]], label_key: str, score_key: str | None, width: int, where: str
) -> np.ndarray:
    """Label-id lists or raw-score lists of ``items`` -> (len, width) bool or float64 (one form per frame)."""
    has_scores = score_key is not None and any(score_key in it for it in items)
    if has_scores and any(label_key in it for it in items):
        raise _Bad(f"{where}: mixes {label_key!r} and {score_key!r}; use one form per frame")
    if not has_scores:
        out = np.zeros((len(items), width), dtype=bool)
        for k, it in enumerate(items):
            ids = it.get(label_key, [])
            problem = _ids_problem(ids, width, label_key)
            if problem is not None:
                raise _Bad(f"{where}[{k}]: {problem}")
            out[k, ids] = True
        return out
    assert score_key is not None  # has_scores implies a score key
    scores = np.empty((len(items), width), dtype=np.float64)
    for k, it in enumerate(items):
        row = it.get(score_key)
        if not isinstance(row, list) or len(row) != width:
            got = f"{len(row)} values" if isinstance(row, list) else short(row)
            raise _Bad(f"{where}[{k}]: expected {score_key!r} with {width} raw logits, got {got}")
        if any(isinstance(v, bool) or not isinstance(v, int | float) for v in row):
            raise _Bad(f"{where}[{k}]: {score_key!r} must hold numbers")
        if not all(map(is_number, row)):
            bad = next(v for v in row if not is_number(v))
            raise _Bad(
                f"{where}[{k}]: {score_key!r} holds {short(bad, 40)}; expected finite logits within the "
                "float64 range"
            )
        scores[k] = row
    return scores


def _activity_from_members(
    groups: list[dict[str, Any]],
    members: list[np.ndarray],
    ids: list[int],
    social: np.ndarray,
    activity: np.ndarray,
    where: str,
) -> np.ndarray:
    """Ground-truth group labels = the lowest-index member's social labels (explicit ones must agree)."""
    if activity.dtype != bool:
        raise _Bad(f"{where}: persons carry 'social' labels but groups carry scores; expected labels")
    position = {pid: k for k, pid in enumerate(ids)}
    out = activity.copy()
    for g, m in enumerate(members):
        if not len(m) or any(int(v) not in position for v in m):
            continue  # reported by ParFrame validation
        first = min(position[int(v)] for v in m)
        if "activity" in groups[g] and not np.array_equal(activity[g], social[first]):
            raise _Bad(
                f"{where}, groups[{g}]: 'activity' differs from the 'social' labels of its lowest-index "
                f"member {ids[first]}; the official evaluation uses the member's labels"
            )
        out[g] = social[first]
    return out


# ----------------------------------------------------------------------------------------------- writing


def _ids_or_scores(row: np.ndarray, label_key: str, score_key: str) -> dict[str, Any]:
    if row.dtype == bool:
        return {label_key: np.flatnonzero(row).tolist()}
    return {score_key: [float(v) for v in row]}


def frame_to_json(frame: ParFrame) -> dict[str, Any]:
    """The JSON object of one frame (label ids for bool arrays, ``*_scores`` for float arrays)."""
    persons = []
    for k, pid in enumerate(frame.person_ids.tolist()):
        person: dict[str, Any] = {"id": pid, **_ids_or_scores(frame.actions[k], "actions", "action_scores")}
        if frame.person_social is not None:
            person["social"] = np.flatnonzero(frame.person_social[k]).tolist()
        persons.append(person)
    groups = [
        {"members": m.tolist(), **_ids_or_scores(frame.group_activity[g], "activity", "activity_scores")}
        for g, m in enumerate(frame.groups)
    ]
    return {
        "frame": frame.frame,
        "persons": persons,
        "groups": groups,
        **_ids_or_scores(frame.global_activity, "global", "global_scores"),
    }


def write_par(path: str | Path, frames: Iterable[ParFrame]) -> None:
    """Write frames as JSON Lines (see the module docstring); frame numbers must be unique.

    Args:
        path: output file (overwritten).
        frames: :class:`ParFrame` objects, e.g. from :meth:`ParFrame.from_labels`.

    Raises:
        InputError: a duplicate frame number.
    """
    lines: list[str] = []
    seen: set[int] = set()
    for f in frames:
        if f.frame in seen:
            raise InputError(f"duplicate frame {f.frame}; frame numbers must be unique in a PAR file")
        seen.add(f.frame)
        lines.append(json.dumps(frame_to_json(f), separators=(",", ":")))
    Path(path).write_text("\n".join(lines) + ("\n" if lines else ""))
