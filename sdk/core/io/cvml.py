"""PETS / CVML ground-truth XML: ``<dataset><frame number=N><objectlist><object id=K><box xc yc w h/>``.

Boxes are given by their centre ``xc, yc`` and size ``w, h``; pairedge converts them to the top-left
``x = xc - w/2, y = yc - h/2``. Frame numbers are taken as written (for A. Milan's PETS 2009 S2.L1 file they
are the 0-based video frame indices). Other children of ``object`` (orientation, appearance, ...) are
ignored.

Reading is bounded before and during the parse: a regular file (a FIFO or a device is refused unopened) of
at most ``pairedge.core.limits.MAX_TEXT_BYTES``, read in chunks and parsed as a stream by expat (no element
tree is built: memory is the output arrays, about 48 bytes a box). A document that declares an entity (a DTD's
``<!ENTITY ...>``: the "billion laughs" expansion bomb or an external entity that names a file or URL) is
refused before the entity can be used: CVML files declare none. Elements nested deeper than
:data:`MAX_DEPTH` are refused (CVML nests five levels). External DTDs and entities are never fetched.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.parsers import expat

import numpy as np
from pairedge.core import limits
from pairedge.core.errors import FormatError
from pairedge.core.io.textio import FLOAT32_MAX, is_int64, printable, short
from pairedge.core.types import Detections

#: Deepest element nesting accepted (``dataset > frame > objectlist > object > box`` is 5).
MAX_DEPTH = 64
EXPECTED = "a PETS / CVML ground-truth XML file"


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


def _int_attr(attrs: dict[str, str], name: str, path: Path, record: str) -> int:
    raw = attrs.get(name)
    try:
        value = int(raw) if raw is not None and len(raw) < 40 else None
    except ValueError:
        value = None
    if not is_int64(value):
        raise FormatError(path, f"expected an integer attribute {name!r} (int64), got {short(raw)}", record)
    assert value is not None
    return value


def _box(box: dict[str, str] | None, path: Path, record: str) -> list[float]:
    """``[x, y, w, h]`` top-left of a ``<box xc yc w h>`` element's attributes."""
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
                path,
                f"expected a finite number in box attribute {name!r} (|value| < 3.4e38, the float32 "
                f"range), got {short(raw)}",
                record,
            )
        vals.append(v)
    xc, yc, w, h = vals
    if w <= 0 or h <= 0:
        raise FormatError(path, f"expected a positive box size, got w={w}, h={h}", record)
    out = [xc - w / 2, yc - h / 2, w, h]
    if not all(abs(v) <= FLOAT32_MAX for v in out):
        raise FormatError(path, f"box corner beyond the float32 range: {out}", record)
    return out


@dataclass
class _Object:
    """An open ``<object>``: its record for messages, frame number, id and first ``<box>`` attributes."""

    record: str
    frame: int
    oid: int
    box: dict[str, str] | None = None


class _Collector:
    """expat callbacks: frames, objects and their first ``<box>`` child, validated as they close.

    An object belongs to the innermost open ``<frame>``; its record is ``"frame N, object #i"`` (i counts
    the objects of that frame in document order).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.root: str | None = None
        self.stack: list[str] = []
        self.frame_numbers = array("q")
        self.frames: list[tuple[int, set[int], list[int]]] = []  # open frames: number, ids seen, [objects]
        self.objects: list[_Object | None] = []  # open objects (None: outside a frame, not read)
        self.keys = array("q")  # frame, id per box
        self.boxes = array("d")  # x, y, w, h per box

    def start(self, name: str, attrs: dict[str, str]) -> None:
        if len(self.stack) >= MAX_DEPTH:
            raise FormatError(
                self.path,
                f"elements nested deeper than {MAX_DEPTH} levels; a CVML file nests 5 (dataset, "
                "frame, objectlist, object, box)",
                f"<{short(name, 40)}>",
            )
        parent = self.stack[-1] if self.stack else None
        self.root = self.root or name
        self.stack.append(name)
        if name == "frame":
            number = _int_attr(attrs, "number", self.path, f"frame #{len(self.frame_numbers) + 1}")
            self.frame_numbers.append(number)
            self.frames.append((number, set(), [0]))
        elif name == "object" and self.frames:
            number, seen, count = self.frames[-1]
            count[0] += 1
            record = f"frame {number}, object #{count[0]}"
            oid = _int_attr(attrs, "id", self.path, record)
            if oid in seen:
                raise FormatError(
                    self.path, f"expected unique object ids within a frame, id {oid} repeats", record
                )
            seen.add(oid)
            self.objects.append(_Object(record, number, oid))
        elif name == "object":
            self.objects.append(None)
        elif name == "box" and parent == "object" and self.objects:
            obj = self.objects[-1]
            if obj is not None and obj.box is None:
                obj.box = dict(attrs)

    def end(self, name: str) -> None:
        self.stack.pop()
        if name == "frame":
            self.frames.pop()
        elif name == "object":
            obj = self.objects.pop()
            if obj is not None:
                self.boxes.extend(_box(obj.box, self.path, obj.record))
                self.keys.extend((obj.frame, obj.oid))

    def entity(self, name: str, *_: object) -> None:
        raise FormatError(
            self.path,
            f"the document declares an entity ({printable(name, 40)}); expected {EXPECTED}, which "
            "declares none (entities can expand to gigabytes or name other files, so they are refused)",
        )


def _parse(path: Path, data: bytes) -> _Collector:
    """Stream ``data`` through expat into a :class:`_Collector` (parse errors name line and column)."""
    collector = _Collector(path)
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartElementHandler = collector.start
    parser.EndElementHandler = collector.end
    parser.EntityDeclHandler = collector.entity
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise FormatError(
            path, f"expected well-formed XML: {exc}", f"line {exc.lineno}, column {exc.offset}"
        ) from None
    except FormatError:  # raised by a handler (an entity declaration, a bad record): already says it all
        raise
    except (LookupError, ValueError) as exc:  # e.g. an unknown encoding in the XML declaration
        raise FormatError(path, f"expected a readable XML file: {exc}") from None
    return collector


def read_cvml(path: str | Path) -> CvmlTracks:
    """Read a PETS / CVML XML ground-truth file (within the ceilings of the module docstring).

    Raises:
        FormatError: not a regular file or above ``pairedge.core.limits.MAX_TEXT_BYTES``, not well-formed XML
            (names line and column), an entity declaration, nesting deeper than :data:`MAX_DEPTH`, a frame
            without an integer ``number``, an object without an integer ``id`` or a valid ``<box>``, a
            frame listed twice, or an id repeated within a frame; the message names the frame and object.
    """
    path = Path(path)
    found = _parse(path, limits.read_bytes(path, EXPECTED, limits.MAX_TEXT_BYTES))
    if found.root != "dataset" and not found.frame_numbers:
        raise FormatError(
            path, f"expected a CVML <dataset> of <frame> elements, got <{printable(found.root, 40)}>"
        )
    numbers = np.asarray(found.frame_numbers, np.int64)
    uniq, counts = np.unique(numbers, return_counts=True)
    if (counts > 1).any():
        raise FormatError(
            path, "expected each frame number once, found a repeat", f"frame {int(uniq[counts > 1][0])}"
        )
    key = np.asarray(found.keys, np.int64).reshape(-1, 2)
    order = np.lexsort((key[:, 1], key[:, 0]))
    return CvmlTracks(
        path=path,
        frame_numbers=np.sort(numbers),
        frames=key[order, 0],
        track_ids=key[order, 1],
        boxes=np.asarray(found.boxes, np.float64).astype(np.float32).reshape(-1, 4)[order],
    )
