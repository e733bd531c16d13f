"""Stickmen of many images as one JSON file (the ``pcp`` protocol's input format).

::

    {"images": [
        {"name": "000063",
         "stickmen": [[[x1, y1, x2, y2], ... 6 sticks ...], ...],
         "windows": [[min_x, min_y, max_x, max_y] or null, ...]}     # optional, estimates only
    ]}

Sticks follow the Buffy part order (torso, left upper arm, right upper arm, left lower arm, right lower
arm, head). An occluded part is ``null`` or ``[null, null, null, null]`` (``NaN`` tokens are accepted too).
Image names are unique. ``windows``, when given, has one entry per stickman (``null`` = derive it from
torso and head as the official code does).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.stickmen import N_PARTS, StickmenImage, read_stickmen_images, stick_problems
from pairedge.core.io.textio import check_records, read_json, short


def read_stickmen_json(path: str | Path) -> list[StickmenImage]:
    """Read the JSON layout above.

    Bounded before parsing (:func:`pairedge.core.io.textio.read_json`): a regular file of at most
    ``pairedge.core.limits.MAX_TEXT_BYTES`` with at most ``MAX_JSON_VALUES`` values and ``MAX_RECORDS``
    images.

    Raises:
        FormatError: naming the file, the image (``images[k]``) and the problem.
    """
    path = Path(path)
    obj = read_json(path, "stickmen JSON")
    if not isinstance(obj, dict) or not isinstance(obj.get("images"), list):
        raise FormatError(path, "expected an object with an 'images' list")
    check_records(path, len(obj["images"]), "images")
    images: list[StickmenImage] = []
    seen: set[str] = set()
    for k, item in enumerate(obj["images"]):
        record = f"images[{k}]"
        try:
            image = _parse_image(item)
        except _Bad as exc:
            raise FormatError(path, str(exc), record) from None
        if image.name in seen:
            raise FormatError(path, f"duplicate image name {short(image.name)}", record)
        seen.add(image.name)
        images.append(image)
    return images


class _Bad(Exception):
    """A problem inside one image record."""


def _parse_image(item: Any) -> StickmenImage:
    if not isinstance(item, dict):
        raise _Bad(f"expected an object, got {type(item).__name__}")
    name = item.get("name")
    if not isinstance(name, str | int) or isinstance(name, bool):
        raise _Bad(f"expected a string 'name', got {short(name)}")
    people = item.get("stickmen", [])
    if not isinstance(people, list):
        raise _Bad(f"expected 'stickmen' as a list, got {type(people).__name__}")
    sticks = np.empty((len(people), N_PARTS, 4), dtype=np.float64)
    for p, person in enumerate(people):
        if not isinstance(person, list) or len(person) != N_PARTS:
            got = f"{len(person)} sticks" if isinstance(person, list) else short(person)
            raise _Bad(f"stickmen[{p}]: expected {N_PARTS} sticks, got {got}")
        for s, stick in enumerate(person):
            sticks[p, s] = _number_row(stick, f"stickmen[{p}][{s}]")
    problem = stick_problems(sticks)
    if problem is not None:
        row, what = problem
        raise _Bad(f"stickmen[{row // N_PARTS}][{row % N_PARTS}]: {what}")
    windows = None
    if item.get("windows") is not None:
        windows = _windows(item["windows"], len(people))
    return StickmenImage(str(name), sticks, windows)


def _number_row(value: Any, where: str) -> list[float]:
    if value is None:
        return [math.nan] * 4
    if not isinstance(value, list) or len(value) != 4:
        raise _Bad(f"{where}: expected [x1, y1, x2, y2] or null, got {short(value)}")
    out = []
    for v in value:
        if v is None:
            out.append(math.nan)
        elif isinstance(v, bool) or not isinstance(v, int | float):
            raise _Bad(f"{where}: expected numbers, got {short(v)}")
        elif isinstance(v, int) and abs(v) > 1.7976931348623157e308:
            raise _Bad(f"{where}: {short(v, 40)} is beyond the float64 range; expected a coordinate")
        else:
            out.append(float(v))
    return out


def _windows(value: Any, count: int) -> np.ndarray:
    if not isinstance(value, list) or len(value) != count:
        got = f"{len(value)} windows" if isinstance(value, list) else short(value)
        raise _Bad(f"expected 'windows' with one entry per stickman ({count}), got {got}")
    out = np.array([_number_row(w, f"windows[{k}]") for k, w in enumerate(value)], dtype=np.float64)
    out = out.reshape(count, 4)
    given = ~np.isnan(out).all(axis=1)
    bad = given & (~np.isfinite(out).all(axis=1) | (out[:, 2] < out[:, 0]) | (out[:, 3] < out[:, 1]))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise _Bad(
            f"windows[{k}]: expected finite [min_x, min_y, max_x, max_y] with max >= min, got "
            f"{out[k].tolist()}"
        )
    return out


def write_stickmen_json(path: str | Path, images: Sequence[StickmenImage]) -> None:
    """Write images in the JSON layout (occluded sticks as ``null``); names must be unique."""
    out = []
    seen: set[str] = set()
    for im in images:
        if im.name in seen:
            raise InputError(f"duplicate image name {im.name!r}; each image must appear once")
        seen.add(im.name)
        sticks = np.asarray(im.sticks, dtype=np.float64).reshape(-1, N_PARTS, 4)
        item: dict[str, Any] = {"name": im.name, "stickmen": [[_row(s) for s in p] for p in sticks]}
        if im.windows is not None:
            item["windows"] = [_row(w) for w in np.asarray(im.windows, dtype=np.float64).reshape(-1, 4)]
        out.append(item)
    Path(path).write_text(json.dumps({"images": out}) + "\n")


def _row(values: np.ndarray) -> list[float] | None:
    if np.isnan(values).all():
        return None
    return [float(v) for v in values]


def read_stickmen_file(path: str | Path) -> list[StickmenImage]:
    """Read a ``.json`` file with :func:`read_stickmen_json`, anything else as stickmen text."""
    if Path(path).suffix.lower() == ".json":
        return read_stickmen_json(path)
    return read_stickmen_images(path)
