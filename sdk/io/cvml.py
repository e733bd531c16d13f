"""PETS / CVML ground-truth XML: ``<dataset><frame number=N><objectlist><object id=K><box xc yc w h/>``.

Boxes are given by their centre ``xc, yc`` and size ``w, h``; pairedge converts them to the top-left
``x = xc - w/2, y = yc - h/2``. Frame numbers are taken as written (for A. Milan's PETS 2009 S2.L1 file they
are the 0-based video frame indices). Other children of ``object`` (orientation, appearance, ...) are
ignored.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pairedge.errors import FormatError
from pairedge.io.textio import FLOAT32_MAX, is_int64, short
from pairedge.types import Detections


@dataclass(frozen=True, eq=False)
class CvmlTracks:
    """All boxes of a CVML file, sorted by frame then track id.

    Attributes:
        path: source file.
        frame_numbers: (F,) int64 every frame listed in the file (also frames without objects), increasing.
        frames: (N,) int64 frame number of each box.
        track_ids: (N,) int64 object id of each box.
        boxes: (N, 4) float32 ``x y w h`` (top-left origin).
    """

    path: Path
    frame_numbers: np.ndarray
    frames: np.ndarray
    track_ids: np.ndarray
    boxes: np.ndarray

    @property
    def identities(self) -> np.ndarray:
        """(K,) int64 distinct track ids."""
        return np.unique(self.track_ids)

    def detections(self, frame: int) -> Detections:
        """The boxes of ``frame`` (empty when the frame has none or is not listed)."""
        lo, hi = np.searchsorted(self.frames, [frame, frame + 1])
        return Detections.from_arrays(self.boxes[lo:hi], self.track_ids[lo:hi])

    def iter_frames(self) -> Iterator[tuple[int, Detections]]:
        """``(frame number, detections)`` for every listed frame, in order."""
        for f in self.frame_numbers:
            yield int(f), self.detections(int(f))


def _int_attr(elem: ET.Element, name: str, path: Path, record: str) -> int:
    raw = elem.get(name)
    try:
        value = int(raw) if raw is not None and len(raw) < 40 else None
    except ValueError:
        value = None
    if not is_int64(value):
        raise FormatError(path, f"expected an integer attribute {name!r} (int64), got {short(raw)}", record)
    assert value is not None
    return value


def _box(obj: ET.Element, path: Path, record: str) -> list[float]:
    box = obj.find("box")
    if box is None:
        raise FormatError(path, "expected a <box xc yc w h> element, found none", record)
    vals = []
    for name in ("xc", "yc", "w", "h"):
        raw = box.get(name)
        try:
            v = float(raw) if raw is not None else math.nan
        except ValueError:
            v = math.nan
        if not abs(v) <= FLOAT32_MAX:  # NaN, inf, or inf once stored as float32
            raise FormatError(
                path, f"expected a finite number in box attribute {name!r} (|value| < 3.4e38, the float32 "
                f"range), got {short(raw)}", record,
            )  # fmt: skip
        vals.append(v)
    xc, yc, w, h = vals
    if w <= 0 or h <= 0:
        raise FormatError(path, f"expected a positive box size, got w={w}, h={h}", record)
    out = [xc - w / 2, yc - h / 2, w, h]
    if not all(abs(v) <= FLOAT32_MAX for v in out):
        raise FormatError(path, f"box corner beyond the float32 range: {out}", record)
    return out


def read_cvml(path: str | Path) -> CvmlTracks:
    """Read a PETS / CVML XML ground-truth file.

    Raises:
        FormatError: not well-formed XML (names line and column), a frame without an integer ``number``, an
            object without an integer ``id`` or a valid ``<box>``, a frame listed twice, or an id repeated
            within a frame; the message names the frame and object.
    """
    path = Path(path)
    try:
        root = ET.parse(path).getroot()
    except FileNotFoundError:
        raise FormatError(path, "file not found") from None
    except ET.ParseError as exc:
        line, col = exc.position
        raise FormatError(path, f"expected well-formed XML: {exc}", f"line {line}, column {col}") from None
    except OSError as exc:
        raise FormatError(path, f"could not read the file: {exc}") from None
    except (LookupError, ValueError) as exc:  # e.g. an unknown encoding in the XML declaration
        raise FormatError(path, f"expected a readable XML file: {exc}") from None
    frame_numbers: list[int] = []
    rows: list[list[float]] = []
    keys: list[tuple[int, int]] = []
    for k, frame in enumerate(root.iter("frame")):
        number = _int_attr(frame, "number", path, f"frame #{k + 1}")
        frame_numbers.append(number)
        seen: set[int] = set()
        for i, obj in enumerate(frame.iter("object")):
            record = f"frame {number}, object #{i + 1}"
            oid = _int_attr(obj, "id", path, record)
            if oid in seen:
                raise FormatError(
                    path, f"expected unique object ids within a frame, id {oid} repeats", record
                )
            seen.add(oid)
            rows.append(_box(obj, path, record))
            keys.append((number, oid))
    if root.tag != "dataset" and not frame_numbers:
        raise FormatError(path, f"expected a CVML <dataset> of <frame> elements, got <{root.tag}>")
    numbers = np.asarray(frame_numbers, np.int64)
    uniq, counts = np.unique(numbers, return_counts=True)
    if (counts > 1).any():
        raise FormatError(
            path, "expected each frame number once, found a repeat", f"frame {int(uniq[counts > 1][0])}"
        )
    key = np.asarray(keys, np.int64).reshape(-1, 2)
    order = np.lexsort((key[:, 1], key[:, 0]))
    return CvmlTracks(
        path=path,
        frame_numbers=np.sort(numbers),
        frames=key[order, 0],
        track_ids=key[order, 1],
        boxes=np.asarray(rows, np.float32).reshape(-1, 4)[order],
    )
