"""Inputs of ``pairedge run``: frames from a video file or an image folder, detections from a file.

Frames are numbered by their 0-based position in the video (or in the sorted image folder). Detection files
are mapped onto that numbering:

* MOT Challenge ``.txt`` (``frame,id,left,top,w,h,conf,...``): frames are **1-based**, so MOT frame ``k + 1``
  belongs to video frame ``k``;
* JRDB social / activity ``.json``: the integer in the image key (``"000123.jpg"`` -> 123) is the video frame;
* PETS / CVML ``.xml``: frame numbers as written (the 0-based video index in A. Milan's PETS file).

A detection with id -1 has no identity; when every detection of a frame has id -1 the pipeline's built-in
tracker assigns ids.

Frames are bounded in pixels before they are decoded (:mod:`pairedge.core.limits`): an image file is read as a
regular file of at most ``limits.MAX_IMAGE_BYTES`` and its header measured
(:func:`pairedge.core.io.imagesize.check_image_bytes`) before ``cv2.imdecode``; a file above
``limits.MAX_FRAME_PIXELS`` (or that cannot be measured, or decoded) is a dropped frame with that reason,
and a FormatError when it is the folder's first image. A video's declared ``CAP_PROP_FRAME_WIDTH / HEIGHT``
and its first decoded frame are checked the same way before reading on (a FormatError), and a later frame of
another, too large size is dropped with the reason. A path that is a FIFO, a device or a socket is refused
unopened.

Unreadable input raises a :class:`~pairedge.core.errors.FormatError` naming the file; a video that stops
decoding before the frame count in its header ends the stream early and says so in :attr:`FrameSource.error`.
An MP4 / MOV file (ISO base media) that cannot be opened, or stops early, is checked for truncation: a
recording cut short before it was finalised has no ``moov`` index atom, or a last atom that runs past the end
of the file, and the message says so. A detection file with no box at all is a FormatError (nothing to run
on).

FFmpeg's own log (thousands of "error at MB" lines for a corrupt stream) is silenced: importing this module
sets ``OPENCV_FFMPEG_LOGLEVEL=-8`` (FFmpeg's ``AV_LOG_QUIET``) unless the environment already sets it. OpenCV
reads it once, when its FFmpeg backend first opens a file, so an application that opened videos through
OpenCV before importing pairedge should set the variable itself; set it to 24 (warnings) or 32 (info) to
see FFmpeg's messages again. The problems that matter are reported by pairedge itself.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import cv2
import numpy as np
from pairedge.core import limits
from pairedge.core.errors import FormatError
from pairedge.core.io.cvml import read_cvml
from pairedge.core.io.imagesize import check_image_bytes
from pairedge.core.io.jrdb import read_jrdb
from pairedge.core.io.mot import read_mot
from pairedge.core.types import Detections

#: FFmpeg log level OpenCV's video backend uses: quiet, unless the user's environment says otherwise.
os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm"})
DEFAULT_FPS = 30.0


class FrameSource:
    """Frames of a video file or of an image folder (files sorted by name), as ``(index, image)``.

    Args:
        path: a video file OpenCV can decode, or a folder of images.
        fps: frames per second for the timestamps; None = the video's own rate (images: 30).

    Raises:
        FormatError: the path does not exist, the video cannot be opened or has no decodable frame, the
            folder has no images.

    Attributes:
        fps: frames per second used for timestamps (``timestamp = index / fps``).
        frame_count: frames announced by the video header (images: files found); None when unknown.
        size: ``(W, H)`` of the first frame.
        error: why the stream ended early (truncated or corrupt video), else None. Set while iterating.
        unreadable: image files that were refused or could not be decoded (passed on as ``None`` frames).
        problem: why the frame just yielded is None (the file, the ceiling it broke), else None; see
            :meth:`frames` for the pairs with their reasons.
        notes: remarks, e.g. a video that ended a frame or two (at most 1 %) before its header's count, which
            is within the usual inaccuracy of container frame counts and not an error.
    """

    def __init__(self, path: str | Path, fps: float | None = None) -> None:
        self.path = Path(path).expanduser()
        self.error: str | None = None
        self.unreadable: list[str] = []
        self.notes: list[str] = []
        self.problem: str | None = None
        self.first_problem: str | None = None
        self._capture: cv2.VideoCapture | None = None
        self._first: np.ndarray | None = None
        if not self.path.exists():
            raise FormatError(self.path, "no such file or folder; expected a video file or an image folder")
        if self.path.is_dir():
            self.kind = "images"
            self._files = sorted(p for p in self.path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
            if not self._files:
                raise FormatError(
                    self.path, f"expected image files ({', '.join(sorted(IMAGE_SUFFIXES))}), found none"
                )
            self.frame_count: int | None = len(self._files)
            native = None
            self._first = read_image(self._files[0])  # FormatError: the first image sets the stream's size
        else:
            self.kind = "video"
            self._files = []
            limits.regular_file(self.path, "a video file or an image folder")  # a FIFO or device: unopened
            native, self.frame_count = self._open_video()
        self.fps = float(fps) if fps else (native or DEFAULT_FPS)
        if not self.fps > 0:
            raise FormatError(self.path, f"expected a positive frame rate, got {fps}; pass --fps")
        assert self._first is not None
        self.size = (int(self._first.shape[1]), int(self._first.shape[0]))

    def _open_video(self) -> tuple[float | None, int | None]:
        capture = cv2.VideoCapture(str(self.path))
        if not capture.isOpened():
            truncated = iso_bmff_problem(self.path)
            if truncated is not None:
                raise FormatError(
                    self.path,
                    f"cannot open as a video: the file looks truncated ({truncated}); a recording "
                    "cut short before it was finalised has no index. Copy it again from its source, or "
                    "recover it with a tool such as untrunc and a good file from the same camera",
                )
            raise FormatError(
                self.path,
                "cannot open as a video (not a video file, corrupt, or a codec OpenCV lacks); "
                "fix by converting it (e.g. ffmpeg -i IN -c:v mjpeg OUT.avi) or pass a folder of images",
            )
        try:  # the declared size first: a huge frame is refused before one is decoded
            props = (cv2.CAP_PROP_FRAME_WIDTH, cv2.CAP_PROP_FRAME_HEIGHT)
            width, height = (int(capture.get(p) or 0) for p in props)
            if width > 0 and height > 0:
                limits.check_frame_size(width, height, str(self.path))
            ok, first = capture.read()
            if not ok or first is None:
                raise FormatError(
                    self.path, "the video opened but no frame could be decoded (corrupt or empty)"
                )
            limits.check_frame_size(first.shape[1], first.shape[0], f"{self.path} frame 0")
        except BaseException:
            capture.release()
            raise
        self._capture, self._first = capture, first
        fps = float(capture.get(cv2.CAP_PROP_FPS) or 0.0)
        count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
        return (fps if 0 < fps < 1000 else None), (count if count > 0 else None)

    def __iter__(self) -> Iterator[tuple[int, np.ndarray | None]]:
        """``(index, image)``; ``image`` is (H, W, 3) uint8 BGR, or None for a refused or undecodable image
        (then :attr:`problem` says why until the next item)."""
        for index, image, _ in self.frames():
            yield index, image

    def frames(self) -> Iterator[tuple[int, np.ndarray | None, str | None]]:
        """``(index, image, problem)``: :meth:`__iter__` with the reason of each None frame."""
        if self.kind == "images":
            self.problem = None
            yield 0, self._first, None
            for k, file in enumerate(self._files[1:], start=1):
                try:
                    image, self.problem = read_image(file), None
                except FormatError as exc:
                    image, self.problem = None, str(exc)
                    self.unreadable.append(file.name)
                    self.first_problem = self.first_problem or self.problem
                yield k, image, self.problem
            return
        for index, image in self._iter_video():
            self.problem = None
            if image is not None and index > 0:
                w, h = int(image.shape[1]), int(image.shape[0])
                if (w, h) != self.size:  # a stream that changes resolution: the new size is checked too
                    try:
                        limits.check_frame_size(w, h, f"{self.path} frame {index}")
                    except FormatError as exc:
                        image, self.problem = None, str(exc)
                        self.first_problem = self.first_problem or self.problem
            yield index, image, self.problem

    def _iter_video(self) -> Iterator[tuple[int, np.ndarray | None]]:
        capture = self._capture
        if capture is None:
            raise FormatError(self.path, "the video was already read or closed; open a new FrameSource")
        yield 0, self._first
        index = 1
        while True:
            try:
                ok, image = capture.read()
            except cv2.error as exc:  # some backends raise on damaged streams
                ok, image = False, None
                self.error = f"{self.path}: decoding failed at frame {index} ({exc.msg or exc})"
            if not ok or image is None:
                break
            yield index, image
            index += 1
        if self.error is None and self.frame_count is not None and index < self.frame_count:
            message = f"decoding stopped at frame {index} but the header announces {self.frame_count} frames"
            if self.frame_count - index <= max(2, self.frame_count // 100):  # container estimates can be off
                self.notes.append(f"{self.path}: {message} (within the usual inaccuracy of container counts)")
            else:
                truncated = iso_bmff_problem(self.path)
                kind = f"the file looks truncated: {truncated}" if truncated else "truncated or corrupt video"
                self.error = f"{self.path}: {message} ({kind}); results cover frames 0-{index - 1}"
        self.close()

    def close(self) -> None:
        if self._capture is not None:
            self._capture.release()
            self._capture = None

    def __enter__(self) -> FrameSource:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


#: Top-level atoms walked at most by :func:`iso_bmff_problem` (bounded work on hostile files).
_MAX_ATOMS = 100_000


def iso_bmff_problem(path: Path) -> str | None:
    """Why an MP4 / MOV style file looks truncated, or None (also None for files of other formats).

    Walks the top-level atoms (``size`` + ``type`` headers only, no payload is read): a file whose last atom
    declares more bytes than remain, or that has no ``moov`` atom (the index with the frame table, written
    when a recording is finalised), is truncated.
    """
    try:
        total = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8 or head[4:8] != b"ftyp":
                return None
            pos, atoms, seen_moov = 0, 0, False
            while pos < total and atoms < _MAX_ATOMS:
                fh.seek(pos)
                header = fh.read(16)
                if len(header) < 8:
                    return f"{total - pos} stray byte(s) at the end, where an atom header was expected"
                size, kind = int.from_bytes(header[:4], "big"), header[4:8].decode("latin-1")
                if size == 1 and len(header) == 16:
                    size = int.from_bytes(header[8:16], "big")
                elif size == 0:
                    size = total - pos  # "to the end of the file"
                if size < 8:
                    return f"atom {kind!r} at byte {pos} declares an impossible size {size}"
                if pos + size > total:
                    missing = "" if seen_moov or kind == "moov" else "; and no 'moov' index atom before it"
                    return (
                        f"atom {kind!r} at byte {pos} declares {size} bytes but the file ends "
                        f"{total - pos} bytes after its start{missing}"
                    )
                seen_moov |= kind == "moov"
                pos, atoms = pos + size, atoms + 1
    except OSError:
        return None
    return None if seen_moov else "no 'moov' index atom"


def read_image(path: Path) -> np.ndarray:
    """An image file as (H, W, 3) uint8 BGR, bounded before decoding.

    Raises:
        FormatError: not a regular file, larger than ``limits.MAX_IMAGE_BYTES``, a header that cannot be
            measured or declares more than ``limits.MAX_FRAME_PIXELS``, or bytes OpenCV cannot decode.
    """
    data = limits.read_bytes(path, "an image file", limits.MAX_IMAGE_BYTES)
    check_image_bytes(data, str(path))
    try:
        image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    except cv2.error as exc:
        raise FormatError(path, f"cannot decode the image ({exc.msg or exc})") from None
    if not isinstance(image, np.ndarray) or not image.size:
        raise FormatError(path, "cannot decode the image (corrupt or truncated)")
    return image


@dataclass(frozen=True)
class DetectionFile:
    """Detections per 0-based video frame.

    Attributes:
        path: the file. format: "mot", "jrdb" or "cvml".
        frames: video frame index -> detections (frames without an entry have none).
        with_ids: whether any detection carries a track id (else the built-in tracker assigns them).
        boxes: total number of boxes.
        note: how frame numbers were mapped (for summaries).
    """

    path: Path
    format: str
    frames: dict[int, Detections] = field(default_factory=dict)
    with_ids: bool = True
    boxes: int = 0
    note: str = ""

    def get(self, index: int) -> Detections:
        """Detections of video frame ``index`` (empty when none)."""
        found = self.frames.get(index)
        return found if found is not None else _EMPTY

    @property
    def last_frame(self) -> int:
        """The largest video frame index with detections (-1 when none)."""
        return max(self.frames, default=-1)


_EMPTY = Detections.empty()


def read_detections(path: str | Path) -> DetectionFile:
    """Read a MOT ``.txt``, JRDB ``.json`` or CVML ``.xml`` detection / track file (format by suffix).

    Raises:
        FormatError: unknown suffix, a malformed file (the reader names the line or record), or a file with
            no box at all (empty, only comments, or only frames without people).
    """
    found = _read_detections(path)
    if found.boxes == 0 or not found.frames:
        raise FormatError(
            found.path,
            f"no detections in this {found.format.upper()} file (empty, only comments, or only "
            "frames without people); expected at least one box: check that it is the right file",
        )
    return found


def _read_detections(path: str | Path) -> DetectionFile:
    p = Path(path).expanduser()
    suffix = p.suffix.lower()
    limits.regular_file(p, "a MOT .txt, JRDB .json or CVML .xml detection file")  # the true reason
    if suffix in (".txt", ".csv"):
        table = read_mot(p)
        frames = {k - 1: d for k, d in table.by_frame().items()}
        note = "MOT frames are 1-based: MOT frame k + 1 = video frame k"
        return DetectionFile(p, "mot", frames, bool((table.track_id >= 0).any()), len(table), note)
    if suffix == ".json":
        jrdb = {f.frame: f.people for f in read_jrdb(p)}
        note = "JRDB frames: the number in the image key is the video frame"
        return DetectionFile(p, "jrdb", jrdb, True, sum(len(d) for d in jrdb.values()), note)
    if suffix == ".xml":
        tracks = read_cvml(p)
        frames = {f: d for f, d in tracks.iter_frames() if len(d)}
        note = "CVML frames as written (0-based video index)"
        return DetectionFile(p, "cvml", frames, True, len(tracks.frames), note)
    raise FormatError(
        p, f"unknown detection format {suffix!r}; expected a MOT .txt, a JRDB .json or a CVML .xml file"
    )
