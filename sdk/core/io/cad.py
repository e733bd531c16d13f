"""Collective Activity Dataset (CAD): ``annoNN.mat`` tracks with per-pair interaction labels, and
``annotations.txt`` key-frame boxes.

``annoNN.mat`` (MATLAB v5; Choi & Savarese, ECCV 2012) holds one struct ``anno``:

* ``nframe``: number of frames F (frames are numbered 1..F, consecutive video frames);
* ``people(k)``, k = 1..P: ``time`` (T frame numbers where person k is present), ``bbs`` (4 x T raw key-frame
  boxes, zeros between key frames), ``sbbs`` (4 x T smoothed boxes ``x y w h``, every frame), ``attr``
  (2 x T: row 1 = body orientation 1..8, row 2 = action 1 walking / 2 standing; -1 = unknown in both);
* ``interaction``: P(P-1)/2 x F interaction ids, pairs in the order (1,2), (1,3), ..., (1,P), (2,3), ...;
  ids 1 no-interaction, 2 approaching, 3 leaving, 4 passing-by, 5 facing-each-other,
  6 walking-side-by-side, 7 standing-in-a-row, 8 standing-side-by-side (:data:`pairedge.core.labels.CAD8`,
  index = id - 1). The matrix is filled for every frame; a label is used only where both people are present.
* ``collective``: F collective-activity ids 1 none, 2 crossing, 3 waiting, 4 queueing, 5 walking, 6 talking.

In pairedge a person's track id is its 1-based index k in ``people``; labels are 0-based
(``CAD8`` index, :data:`COLLECTIVE` index). Frame size: 720 x 480 (W x H), except sequences 15 and 20-24:
800 x 450. The tracks carry no timestamps; :data:`DEFAULT_FPS` (30) is assumed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.errors import FormatError
from pairedge.core.features.orientation import from_cad_bins
from pairedge.core.io.matfile import MatLoader
from pairedge.core.io.textio import read_lines
from pairedge.core.labels import CAD8
from pairedge.core.types import Detections

#: Collective activity names; index = file id - 1.
COLLECTIVE: tuple[str, ...] = ("none", "crossing", "waiting", "queueing", "walking", "talking")
#: Person action names in ``attr`` row 2; index = file id - 1.
ACTIONS: tuple[str, ...] = ("walking", "standing")
DEFAULT_FPS = 30.0
PURPOSE = "reading Collective Activity .mat files"
WIDE_SEQUENCES = frozenset({15, 20, 21, 22, 23, 24})


def frame_size_of(sequence: int | None) -> tuple[int, int]:
    """``(W, H)`` of a CAD sequence: (800, 450) for 15 and 20-24, else (720, 480)."""
    return (800, 450) if sequence in WIDE_SEQUENCES else (720, 480)


def sequence_number(path: str | Path) -> int | None:
    """The NN of ``annoNN.mat`` or ``seqNN`` in a path, or None."""
    m = re.search(r"(?:anno|seq)(\d+)", Path(path).as_posix())
    return int(m.group(1)) if m else None


@dataclass(frozen=True, eq=False)
class CadPerson:
    """One person (track) of a sequence.

    Attributes:
        track_id: 1-based index in the file's ``people``.
        frames: (T,) int64 frame numbers (1-based) where the person is present.
        boxes: (T, 4) float32 smoothed boxes ``x y w h`` (``sbbs``).
        raw_boxes: (T, 4) float32 key-frame boxes (``bbs``; zeros where not annotated).
        pose: (T,) int64 body orientation 1..8, -1 unknown (as in the file).
        action: (T,) int64 0 walking / 1 standing (:data:`ACTIONS` index), -1 unknown.
    """

    track_id: int
    frames: np.ndarray
    boxes: np.ndarray
    raw_boxes: np.ndarray
    pose: np.ndarray
    action: np.ndarray


@dataclass(frozen=True, eq=False)
class CadSequence:
    """A CAD ``annoNN.mat`` sequence with dense per-frame lookups.

    Attributes:
        path: source file. sequence: NN from the file name (None if absent).
        num_frames: F. frame_size: ``(W, H)``. fps: assumed frame rate.
        people: the P tracks.
        present: (F, P) bool, person k present in frame f (row f-1, column k-1).
        boxes: (F, P, 4) float32 smoothed boxes (NaN where absent).
        labels: (F, P, P) int8 CAD8 index of the pair (i, j) in frame f, symmetric, -1 where unlabelled
            (either person absent, or i == j).
        collective: (F,) int64 :data:`COLLECTIVE` index per frame.
    """

    path: Path
    sequence: int | None
    num_frames: int
    frame_size: tuple[int, int]
    fps: float
    people: tuple[CadPerson, ...]
    present: np.ndarray
    boxes: np.ndarray
    labels: np.ndarray
    collective: np.ndarray

    def timestamp(self, frame: int) -> float:
        """Seconds of 1-based ``frame`` at :attr:`fps`."""
        return (frame - 1) / self.fps

    def _row(self, frame: int) -> int:
        if not 1 <= frame <= self.num_frames:
            raise IndexError(f"frame {frame} outside 1..{self.num_frames} of {self.path}")
        return frame - 1

    def detections(self, frame: int, orientation: bool = True) -> Detections:
        """The people present in 1-based ``frame`` (track id = person index, score 1), with the annotated
        8-way body orientation (``attr`` row 1) as an angle (:func:`pairedge.core.features.orientation.
        from_cad_bins`; unknown bins -> NaN, confidence 0) unless ``orientation`` is False (boxes only)."""
        r = self._row(frame)
        cols = np.flatnonzero(self.present[r])
        if not orientation:
            return Detections.from_arrays(self.boxes[r, cols], cols + 1)

        angle, conf = from_cad_bins(self._pose_table[r, cols])
        return Detections.from_arrays(self.boxes[r, cols], cols + 1, None, angle, conf)

    @functools.cached_property
    def _pose_table(self) -> np.ndarray:
        """(num_frames, P) int64 orientation bin of every person per frame (0 = unknown / absent)."""
        table = np.zeros((self.num_frames, len(self.people)), np.int64)
        for k, person in enumerate(self.people):
            rows = np.asarray(person.frames, np.int64) - 1
            ok = (rows >= 0) & (rows < self.num_frames)
            table[rows[ok], k] = np.maximum(np.asarray(person.pose, np.int64)[ok], 0)
        return table

    def pair_labels(self, frame: int) -> tuple[np.ndarray, np.ndarray]:
        """Labelled pairs of 1-based ``frame``.

        Returns:
            pairs: (M, 2) int64 track ids ``a < b``, both present; labels: (M,) int64 CAD8 index.
        """
        r = self._row(frame)
        ia, ib = np.triu_indices(len(self.people), k=1)
        lab = self.labels[r, ia, ib].astype(np.int64)
        keep = lab >= 0
        return np.stack([ia[keep] + 1, ib[keep] + 1], axis=1), lab[keep]

    def labels_for(self, frame: int, pairs: np.ndarray) -> np.ndarray:
        """CAD8 index of the given track-id pairs in 1-based ``frame``; -1 where unlabelled or unknown id.

        Args:
            pairs: (M, 2) int64 track ids (any order).
        """
        r = self._row(frame)
        p = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        ok = np.asarray((p >= 1).all(axis=1) & (p <= len(self.people)).all(axis=1))
        safe = np.where(ok[:, None], p - 1, 0)
        return np.where(ok, self.labels[r, safe[:, 0], safe[:, 1]], -1).astype(np.int64)

    def frames(self, orientation: bool = True) -> Iterator[tuple[int, float, Detections]]:
        """``(frame, timestamp, detections)`` for every frame in order (no images: box-only streams);
        ``orientation=False`` leaves the annotated orientation out."""
        for f in range(1, self.num_frames + 1):
            yield f, self.timestamp(f), self.detections(f, orientation)


def _field(struct: Any, name: str, path: Path, record: str) -> Any:
    try:
        return struct[name]
    except (ValueError, KeyError, IndexError):
        raise FormatError(
            path, f"expected a field {name!r} in the anno struct, it is missing", record
        ) from None


def _array(value: Any, path: Path, record: str, rows: int | None = None) -> np.ndarray:
    """A numeric matrix from a loadmat cell value; ``rows`` forces the first dimension."""
    arr = np.asarray(value)
    if arr.dtype == object:
        raise FormatError(path, f"expected a numeric array, got a nested {arr.dtype} value", record)
    try:
        arr = arr.astype(np.float64)
    except (TypeError, ValueError):
        raise FormatError(path, f"expected a numeric array, got dtype {arr.dtype}", record) from None
    if rows is None:
        return arr.reshape(-1)
    if arr.size == 0:
        return np.zeros((rows, 0))
    if arr.ndim != 2 or arr.shape[0] != rows:
        raise FormatError(path, f"expected {rows} x T, got shape {arr.shape}", record)
    return arr


def _person(p: Any, k: int, num_frames: int, path: Path) -> CadPerson:
    rec = f"people({k})"
    time = _array(_field(p, "time", path, rec), path, rec + ".time")
    sbbs = _array(_field(p, "sbbs", path, rec), path, rec + ".sbbs", rows=4)
    bbs = _array(_field(p, "bbs", path, rec), path, rec + ".bbs", rows=4)
    attr = _array(_field(p, "attr", path, rec), path, rec + ".attr", rows=2)
    t = len(time)
    if not (sbbs.shape[1] == bbs.shape[1] == attr.shape[1] == t):
        raise FormatError(
            path,
            f"expected time, sbbs, bbs and attr of the same length, got {t}, {sbbs.shape[1]}, "
            f"{bbs.shape[1]}, {attr.shape[1]}",
            rec,
        )
    if t and (time.min() < 1 or time.max() > num_frames or np.any(time != np.round(time))):
        raise FormatError(
            path, f"expected integer frame numbers in 1..{num_frames}, got {time.min()}..{time.max()}", rec
        )
    if len(np.unique(time)) != t:
        raise FormatError(path, "expected each frame at most once in time, got duplicates", rec)
    with np.errstate(over="ignore"):  # values beyond float32 become inf and are rejected below
        boxes = sbbs.T.astype(np.float32)
    if not np.isfinite(boxes).all():
        raise FormatError(
            path, "expected finite smoothed boxes (sbbs), got NaN, inf or out-of-range values", rec
        )
    if t and not (boxes[:, 2:] > 0).all():
        raise FormatError(path, "expected smoothed boxes (sbbs) with positive width and height", rec)
    if t and not (np.isin(attr[1], (-1, 1, 2)).all() and np.isin(attr[0], (-1, *range(1, 9))).all()):
        raise FormatError(
            path,
            f"expected orientations 1..8 and actions 1 (walking) / 2 (standing), or -1 (unknown), got "
            f"{np.unique(attr[0]).tolist()} and {np.unique(attr[1]).tolist()}",
            rec,
        )
    return CadPerson(
        track_id=k,
        frames=time.astype(np.int64),
        boxes=boxes,
        raw_boxes=bbs.T.astype(np.float32),
        pose=attr[0].astype(np.int64),
        action=np.where(attr[1] > 0, attr[1] - 1, -1).astype(np.int64),
    )


def _dense(people: tuple[CadPerson, ...], num_frames: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(people)
    present = np.zeros((num_frames, n), bool)
    boxes = np.full((num_frames, n, 4), np.nan, np.float32)
    for k, person in enumerate(people):  # one vectorised scatter per track
        present[person.frames - 1, k] = True
        boxes[person.frames - 1, k] = person.boxes
    return present, boxes


def _labels(inter: np.ndarray, present: np.ndarray, path: Path) -> np.ndarray:
    """(F, P, P) int8 CAD8 index, -1 where unlabelled; validates ids where both people are present."""
    f, n = present.shape
    ia, ib = np.triu_indices(n, k=1)
    if inter.shape != (len(ia), f):
        raise FormatError(
            path,
            f"expected interaction of shape ({len(ia)}, {f}) for {n} people, got {inter.shape}",
            "interaction",
        )
    both = present[:, ia] & present[:, ib]  # (F, pairs)
    ids = inter.T  # (F, pairs)
    bad = both & ~np.isin(ids, np.arange(1, len(CAD8) + 1))
    if bad.any():
        fr, pr = np.argwhere(bad)[0]
        raise FormatError(
            path,
            f"expected interaction ids 1..{len(CAD8)}, got {ids[fr, pr]} for people ({ia[pr] + 1}, "
            f"{ib[pr] + 1})",
            f"interaction frame {fr + 1}",
        )
    lab = np.where(both, ids - 1, -1).astype(np.int8)
    out = np.full((f, n, n), -1, np.int8)
    out[:, ia, ib] = lab
    out[:, ib, ia] = lab
    return out


def read_cad_mat(
    path: str | Path,
    frame_size: tuple[int, int] | None = None,
    fps: float = DEFAULT_FPS,
    *,
    isolate: bool = True,
    loader: MatLoader | None = None,
) -> CadSequence:
    """Read a CAD ``annoNN.mat``.

    Args:
        path: the file. frame_size: ``(W, H)``; by default from the sequence number (:func:`frame_size_of`).
        fps: frame rate used for timestamps.
        isolate: probe the file with scipy in a child process first
            (:class:`pairedge.core.io.matfile.MatLoader`), so that a corrupt file that crashes scipy gives a
            FormatError instead of killing this process. Costs one process start (about 0.3 s) per call;
            ``False`` for trusted files.
        loader: an open :class:`~pairedge.core.io.matfile.MatLoader` to reuse across many files (then
            ``isolate`` is the loader's).

    Raises:
        MissingDependencyError: scipy is not installed (``pip install '.[data]'``).
        FormatError: the file is not a MATLAB file with the ``anno`` struct described above (names the
            record).
    """
    return _read(Path(path), loader or MatLoader(isolate, PURPOSE), frame_size, fps)


def _read(path: Path, loader: MatLoader, frame_size: tuple[int, int] | None, fps: float) -> CadSequence:
    mat = loader.load(path)
    if "anno" not in mat:
        raise FormatError(
            path, f"expected a variable 'anno', got {sorted(k for k in mat if not k.startswith('__'))}"
        )
    anno = np.asarray(mat["anno"])
    if anno.dtype.names is None or anno.size != 1:
        raise FormatError(path, "expected 'anno' to be a 1 x 1 struct", "anno")
    anno = anno.reshape(-1)[0]
    nframe = _array(_field(anno, "nframe", path, "anno"), path, "anno.nframe")
    if nframe.size != 1 or nframe[0] < 1 or nframe[0] != round(nframe[0]):
        raise FormatError(path, f"expected a positive integer nframe, got {nframe}", "anno.nframe")
    num_frames = int(nframe[0])
    people_raw = np.asarray(_field(anno, "people", path, "anno")).reshape(-1)
    if people_raw.size and people_raw.dtype.names is None:
        raise FormatError(path, "expected people to be a struct array", "anno.people")
    people = tuple(_person(p, k + 1, num_frames, path) for k, p in enumerate(people_raw))
    collective = _array(_field(anno, "collective", path, "anno"), path, "anno.collective")
    if collective.shape != (num_frames,) or not np.isin(collective, np.arange(1, len(COLLECTIVE) + 1)).all():
        raise FormatError(
            path,
            f"expected {num_frames} collective ids in 1..{len(COLLECTIVE)}, got {collective.size} values",
            "anno.collective",
        )
    present, boxes = _dense(people, num_frames)
    raw_inter = _field(anno, "interaction", path, "anno")
    inter = _array(raw_inter, path, "anno.interaction")
    inter = np.zeros((0, num_frames)) if inter.size == 0 else inter.reshape(np.shape(raw_inter)[0], -1)
    seq = sequence_number(path)
    return CadSequence(
        path=path,
        sequence=seq,
        num_frames=num_frames,
        frame_size=frame_size or frame_size_of(seq),
        fps=fps,
        people=people,
        present=present,
        boxes=boxes,
        labels=_labels(inter, present, path),
        collective=collective.astype(np.int64) - 1,
    )


def read_cad_dir(folder: str | Path, fps: float = DEFAULT_FPS, *, isolate: bool = True) -> list[CadSequence]:
    """Every ``anno*.mat`` of a folder, sorted by sequence number (one probe process for all when
    isolated)."""
    files = sorted(Path(folder).glob("anno*.mat"), key=lambda p: (sequence_number(p) or 0, p.name))
    if not files:
        raise FormatError(folder, "expected annoNN.mat files in this folder, found none")
    loader = MatLoader(isolate, PURPOSE)
    loader.check(files)  # one probe process for the whole folder
    return [_read(f, loader, None, fps) for f in files]


@dataclass(frozen=True, eq=False)
class CadKeyframes:
    """Boxes of a CAD ``annotations.txt`` (key frames, typically every 10th frame; no track ids).

    Attributes:
        frames: (N,) int64 frame numbers. boxes: (N, 4) float32 ``x y w h``.
        action: (N,) int64 per-person activity id as in the file (1-based). pose: (N,) int64 orientation id.
    """

    frames: np.ndarray
    boxes: np.ndarray
    action: np.ndarray
    pose: np.ndarray

    def detections(self, frame: int) -> Detections:
        """Boxes of ``frame`` (track ids -1: the file has none)."""
        return Detections.from_arrays(self.boxes[self.frames == frame])


def read_cad_annotations(path: str | Path) -> CadKeyframes:
    """Read a CAD ``annotations.txt``: one box per line, ``frame x y w h action pose``, tab (or space)
    separated.

    Bounded before parsing (:func:`pairedge.core.io.textio.read_lines`): a regular file of at most
    ``pairedge.core.limits.MAX_TEXT_BYTES``, lines of at most ``MAX_LINE_BYTES``, at most ``MAX_RECORDS``
    lines.

    Raises:
        FormatError: a line without 7 numeric fields, a non-integer frame / action / pose, or a box with
            non-positive size (names the line); a ceiling exceeded; not UTF-8 text.
    """
    path = Path(path)
    rows = []
    for lineno, line in enumerate(read_lines(path, "a CAD annotations.txt"), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 7:
            raise FormatError(
                path, f"expected 7 fields 'frame x y w h action pose', got {len(fields)}", f"line {lineno}"
            )
        try:
            vals = [float(v) for v in fields]
        except ValueError:
            raise FormatError(path, f"expected numbers, got {line.strip()!r}", f"line {lineno}") from None
        if not all(np.isfinite(vals)) or any(vals[i] != round(vals[i]) for i in (0, 5, 6)):
            raise FormatError(
                path, "expected finite values and integer frame, action and pose", f"line {lineno}"
            )
        if vals[3] <= 0 or vals[4] <= 0:
            raise FormatError(
                path, f"expected a positive box size, got w={vals[3]}, h={vals[4]}", f"line {lineno}"
            )
        if max(abs(vals[i]) for i in (0, 5, 6)) > 2**62 or max(map(abs, vals[1:5])) > 3.4e38:
            raise FormatError(
                path,
                "expected frame, action, pose within int64 and a box within the float32 range "
                f"(|value| < 3.4e38), got {line.strip()[:120]!r}",
                f"line {lineno}",
            )
        rows.append(vals)
    arr = np.asarray(rows, dtype=np.float64).reshape(-1, 7)
    return CadKeyframes(
        frames=arr[:, 0].astype(np.int64),
        boxes=arr[:, 1:5].astype(np.float32),
        action=arr[:, 5].astype(np.int64),
        pose=arr[:, 6].astype(np.int64),
    )
