"""JRDB social / activity annotations (``labels_2d_activity_social_stitched/<scene>.json``).

Structure::

    {"labels": {"000000.jpg": [
        {"label_id": "pedestrian:6", "box": [x, y, w, h],
         "attributes": {"occlusion": "Fully_visible", ...},
         "action_label": {"sitting": 1, "talking to someone": 1},
         "social_group": {"cluster_ID": 7, "cluster_stat": 1},
         "social_activity": {"sitting": 1},
         "H-interaction": [{"pair": "pedestrian:7", "box_pair": [...], "inter_labels": {"sitting together":
         1}}]},
        ...]}}

The numbers after label names are annotation levels, kept as given. The frame number is the integer in the
image key (``"000123.jpg"`` -> 123). ``H-interaction`` may list a pair on one or both of its people; the
reader merges both directions into one unordered pair ``(id_a < id_b)`` (label levels: the larger wins).
Optional per person (pairedge extension): ``"orientation"`` = body orientation in radians in the image plane
(0 = facing image right, pi/2 = facing the camera; see :mod:`pairedge.core.features.orientation`) and
``"orientation_conf"`` in [0, 1] (default 1); absent = unknown. Unknown keys are ignored. Stitched 360-degree
images are 3760 pixels wide and a box may extend past the right edge (``x + w > 3760``: it wraps around).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.textio import FLOAT32_MAX, INT64_MAX, check_records, read_json, short
from pairedge.core.labels import LabelSet
from pairedge.core.types import Detections

_ID = re.compile(r"^\s*[A-Za-z_ ]+:\s*(\d+)\s*$")
_FRAME = re.compile(r"(\d+)")


@dataclass(frozen=True, eq=False)
class JrdbFrame:
    """The annotations of one image. Per-person tuples and arrays follow the rows of ``people``.

    Attributes:
        frame: frame number (the integer in ``image``). image: the key, e.g. ``"000123.jpg"``.
        people: boxes x y w h (float32), track ids from ``pedestrian:N``, scores 1.
        occlusion: the ``attributes.occlusion`` string per person ("" when absent).
        attributes: the whole ``attributes`` object per person, as read (JSON values).
        actions: ``action_label`` per person, name -> level.
        social_activity: ``social_activity`` per person, name -> level.
        group_ids: (N,) int64 ``social_group.cluster_ID`` (-1 when absent).
        pairs: (M, 2) int64 interacting pairs, id_a < id_b, sorted.
        pair_labels: per pair, ``inter_labels`` name -> level.
    """

    frame: int
    image: str
    people: Detections
    occlusion: tuple[str, ...]
    attributes: tuple[dict[str, Any], ...]
    actions: tuple[dict[str, float], ...]
    social_activity: tuple[dict[str, float], ...]
    group_ids: np.ndarray
    pairs: np.ndarray
    pair_labels: tuple[dict[str, float], ...]

    def groups(self) -> dict[int, np.ndarray]:
        """cluster_ID -> sorted member ids, for clusters of at least two people in this frame."""
        out: dict[int, np.ndarray] = {}
        for cid in np.unique(self.group_ids[self.group_ids >= 0]).tolist():
            members = np.sort(self.people.track_ids[self.group_ids == cid])
            if len(members) >= 2:
                out[int(cid)] = members
        return out

    def primary_labels(self) -> list[str]:
        """The highest-level label name of each pair (ties: first listed)."""
        return [max(d.items(), key=lambda kv: kv[1])[0] if d else "" for d in self.pair_labels]

    def label_ids(self, labels: LabelSet) -> np.ndarray:
        """(M,) int64 index of each pair's primary label in ``labels`` (spaces read as underscores), -1 if
        absent."""
        index = {name: i for i, name in enumerate(labels.classes)}
        return np.array([index.get(n.replace(" ", "_"), -1) for n in self.primary_labels()], np.int64)


def _person_id(path: Path, where: str, value: Any) -> int:
    m = _ID.match(value) if isinstance(value, str) and len(value) < 200 else None
    if m is None or len(m.group(1)) > 18:
        raise FormatError(
            path, f"expected a label id like 'pedestrian:12' (id < 10**18), got {short(value)}", where
        )
    return int(m.group(1))


def _levels(path: Path, where: str, value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FormatError(
            path, f"expected an object of label name -> level, got {type(value).__name__}", where
        )
    out: dict[str, float] = {}
    for name, level in value.items():
        try:
            number = float(level)
        except (TypeError, ValueError, OverflowError):
            number = math.nan
        if isinstance(level, bool) or not math.isfinite(number):
            raise FormatError(
                path, f"expected a finite numeric level for {short(name)}, got {short(level)}", where
            )
        out[str(name)] = number
    return out


def _box(path: Path, where: str, value: Any) -> list[float]:
    ok = isinstance(value, list) and len(value) == 4
    ok = ok and all(not isinstance(v, bool) and isinstance(v, int | float) for v in value)
    box = [float(v) if abs(v) <= FLOAT32_MAX else math.inf for v in value] if ok else []
    if not ok or not np.isfinite(box).all() or box[2] < 0 or box[3] < 0:
        raise FormatError(
            path,
            f"expected box [x, y, w, h] of 4 finite numbers (|value| < 3.4e38, the float32 range) "
            f"with w, h >= 0, got {short(value)}",
            where,
        )
    return box


def _orientation(path: Path, where: str, person: dict[str, Any]) -> tuple[float, float]:
    """Optional ``"orientation"`` (radians in the image plane, see :mod:`pairedge.core.features.orientation`)
    and ``"orientation_conf"`` (0-1, default 1) of a person: ``(angle, confidence)``, ``(nan, 0)`` when
    absent."""
    angle, conf = person.get("orientation"), person.get("orientation_conf", 1.0)
    if angle is None:
        return math.nan, 0.0
    for name, value in (("orientation", angle), ("orientation_conf", conf)):
        # abs() first: math.isfinite raises OverflowError for an integer beyond the float range
        if isinstance(value, bool) or not isinstance(value, int | float) or not abs(value) <= FLOAT32_MAX:
            raise FormatError(
                path, f"expected {name} to be a finite number, got {short(value)}", f"{where}.{name}"
            )
    if abs(angle) > 2 * math.pi or not 0 <= conf <= 1:
        raise FormatError(
            path,
            f"expected orientation in radians within +-2 pi (degrees? use radians) and orientation_conf in "
            f"[0, 1], got {short(angle)} and {short(conf)}",
            f"{where}.orientation",
        )
    return float(angle), float(conf)


def _parse_frame(path: Path, key: str, people: Any) -> JrdbFrame:
    m = _FRAME.search(key)
    if m is None or len(m.group(1).lstrip("0")) > 18:
        raise FormatError(
            path,
            f"expected an image key with a frame number (< 10**18) like '000123.jpg', got {short(key)}",
            short(key),
        )
    if not isinstance(people, list):
        raise FormatError(path, f"expected a list of people, got {type(people).__name__}", short(key))
    ids, boxes, occ, attrs, acts, social, groups = [], [], [], [], [], [], []
    orient: list[tuple[float, float]] = []
    pair_levels: dict[tuple[int, int], dict[str, float]] = {}
    for k, person in enumerate(people):
        where = f"labels[{short(key)}][{k}]"
        if not isinstance(person, dict):
            raise FormatError(path, f"expected an object per person, got {type(person).__name__}", where)
        pid = _person_id(path, where + ".label_id", person.get("label_id"))
        if pid in ids:
            raise FormatError(path, f"label id pedestrian:{pid} appears twice in one image", where)
        ids.append(pid)
        boxes.append(_box(path, where + ".box", person.get("box")))
        orient.append(_orientation(path, where, person))
        attributes = person.get("attributes") or {}
        attributes = attributes if isinstance(attributes, dict) else {}
        occ.append(str(attributes.get("occlusion", "")))
        attrs.append(dict(attributes))
        acts.append(_levels(path, where + ".action_label", person.get("action_label")))
        social.append(_levels(path, where + ".social_activity", person.get("social_activity")))
        group = person.get("social_group") or {}
        cid = group.get("cluster_ID", -1) if isinstance(group, dict) else -1
        integral = isinstance(cid, int) or (isinstance(cid, float) and cid.is_integer())
        if isinstance(cid, bool) or not integral or not -1 <= cid <= INT64_MAX:
            raise FormatError(
                path,
                f"expected an integer cluster_ID (-1 or >= 0), got {short(cid)}",
                where + ".social_group",
            )
        groups.append(int(cid))
        inter = person.get("H-interaction") or []
        if not isinstance(inter, list):
            raise FormatError(path, "expected H-interaction to be a list", where)
        for j, item in enumerate(inter):
            iw = f"{where}.H-interaction[{j}]"
            if not isinstance(item, dict):
                raise FormatError(path, f"expected an object, got {type(item).__name__}", iw)
            other = _person_id(path, iw + ".pair", item.get("pair"))
            if other == pid:
                raise FormatError(path, f"a person interacts with itself (pedestrian:{pid})", iw)
            merged = pair_levels.setdefault((min(pid, other), max(pid, other)), {})
            for name, level in _levels(path, iw + ".inter_labels", item.get("inter_labels")).items():
                merged[name] = max(level, merged.get(name, level))
    keys = sorted(pair_levels)
    return JrdbFrame(
        frame=int(m.group(1)),
        image=key,
        people=Detections.from_arrays(
            np.asarray(boxes, np.float32).reshape(-1, 4),
            ids,
            None,
            *(
                np.asarray(orient, np.float64).reshape(-1, 2).T
                if any(c > 0 for _, c in orient)
                else (None, None)
            ),
        ),
        occlusion=tuple(occ),
        attributes=tuple(attrs),
        actions=tuple(acts),
        social_activity=tuple(social),
        group_ids=np.asarray(groups, np.int64),
        pairs=np.asarray(keys, np.int64).reshape(-1, 2),
        pair_labels=tuple(pair_levels[k] for k in keys),
    )


def read_jrdb(path: str | Path) -> list[JrdbFrame]:
    """Read a JRDB social / activity JSON file; frames sorted by frame number.

    Bounded before parsing (:func:`pairedge.core.io.textio.read_json`): a regular file of at most
    ``pairedge.core.limits.MAX_TEXT_BYTES`` with at most ``MAX_JSON_VALUES`` values and ``MAX_RECORDS``
    images.

    Raises:
        FormatError: unreadable JSON, a ceiling exceeded, or a record that does not follow the structure
            (names the image key and the person).
    """
    p = Path(path)
    data = read_json(p, "JRDB social / activity JSON")
    labels = data.get("labels") if isinstance(data, dict) else None
    if not isinstance(labels, dict):
        raise FormatError(p, 'expected a top-level object with a "labels" object (image -> people)')
    check_records(p, len(labels), "images")
    frames = [_parse_frame(p, str(key), people) for key, people in labels.items()]
    numbers = [f.frame for f in frames]
    if len(set(numbers)) != len(numbers):
        dup = next(n for n in numbers if numbers.count(n) > 1)
        raise FormatError(p, f"two image keys give the same frame number {dup}")
    return sorted(frames, key=lambda f: f.frame)


def _num(v: float) -> float | int:
    return int(v) if float(v).is_integer() else round(float(v), 3)


def _attributes(f: JrdbFrame, k: int) -> dict[str, Any]:
    out = dict(f.attributes[k]) if k < len(f.attributes) else {}
    if f.occlusion[k] or "occlusion" in out:
        out["occlusion"] = f.occlusion[k]
    return out


def frame_to_json(f: JrdbFrame) -> list[dict[str, Any]]:
    """The list of person objects of one image (H-interaction written on both people of a pair)."""
    partners: dict[int, list[tuple[int, dict[str, float]]]] = {}
    for (a, b), levels in zip(f.pairs.tolist(), f.pair_labels, strict=True):
        partners.setdefault(a, []).append((b, levels))
        partners.setdefault(b, []).append((a, levels))
    box_of = {int(t): f.people.boxes[k] for k, t in enumerate(f.people.track_ids.tolist())}
    out = []
    for k, tid in enumerate(f.people.track_ids.tolist()):
        box = [_num(v) for v in f.people.boxes[k].tolist()]
        inter = []
        for other, levels in partners.get(tid, []):
            item: dict[str, Any] = {"pair": f"pedestrian:{other}"}
            if other in box_of:
                item["box_pair"] = [_num(v) for v in box_of[other].tolist()]
            item["inter_labels"] = {n: _num(v) for n, v in levels.items()}
            inter.append(item)
        out.append(
            {
                "label_id": f"pedestrian:{tid}",
                "file_id": f.image,
                "box": box,
                "attributes": _attributes(f, k),
                "action_label": {n: _num(v) for n, v in f.actions[k].items()},
                "social_group": {"cluster_ID": int(f.group_ids[k]), "cluster_stat": 1},
                "social_activity": {n: _num(v) for n, v in f.social_activity[k].items()},
                "H-interaction": inter,
                **_orientation_json(f.people, k),
            }
        )
    return out


def _orientation_json(people: Detections, k: int) -> dict[str, float]:
    """The optional orientation fields of person ``k`` (none when unknown)."""
    if people.orientation is None or not np.isfinite(people.orientation[k]):
        return {}
    conf = 1.0 if people.orientation_conf is None else float(people.orientation_conf[k])
    return {"orientation": float(people.orientation[k]), "orientation_conf": conf} if conf > 0 else {}


def write_jrdb(path: str | Path, frames: Iterable[JrdbFrame]) -> None:
    """Write frames as a JRDB social / activity JSON file (keys are the frames' ``image`` names).

    Raises:
        InputError: two frames with the same image key.
    """
    labels: dict[str, Any] = {}
    for f in frames:
        if f.image in labels:
            raise InputError(f"write_jrdb: image key {f.image!r} appears twice")
        labels[f.image] = frame_to_json(f)
    Path(path).write_text(json.dumps({"labels": labels}, separators=(",", ":")))
