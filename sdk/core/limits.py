"""The ceilings every reader checks before it does the work (SPEC 9: work and memory bounded by the input).

A hostile or broken input must cost seconds and well under 1 GB, whatever it claims: a file that is a FIFO
or ``/dev/zero``, a 99 kB log whose chunk claims 3 GiB, an image that decodes to 20,000 x 20,000 pixels, a
text file that is one 200 MB line, a parity pack that inflates to 2 GB, or a scene range of 10^8 seeds.
Each reader compares what the input *declares* (a file size, an image header, a chunk header, a zip
member's size, a count on the command line) with the ceiling here first, and refuses with a one-line
:class:`~pairedge.core.errors.FormatError` / :class:`~pairedge.core.errors.InputError` that names the ceiling.

The ceilings are far above any real input of their kind (``docs/formats.md#ceilings`` is generated from this
module and lists them with the reason for each); raise one in your own process by assigning the module
attribute, e.g. ``pairedge.core.limits.MAX_FRAME_PIXELS = 100_000_000``, before opening the input.

Files are opened only after :func:`regular_file` says they are regular files (symlinks are followed first):
opening a FIFO blocks forever and a character device never ends. Reading is chunked and stops one chunk past
the ceiling, so a file that grows while it is read is still bounded.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pairedge.core.errors import FormatError, InputError

MiB = 1 << 20
GiB = 1 << 30

#: A text or JSON input: detection files (MOT, JRDB, CVML), annotation and ground-truth files, predictions.
MAX_TEXT_BYTES = 256 * MiB
#: One line of a line-based text format (MOT, JSON Lines, stickmen, CAD annotations.txt).
MAX_LINE_BYTES = 1 * MiB
#: Values of one JSON document parsed whole (JRDB, stickmen JSON, a checkpoint config), counted before
#: parsing as an upper bound (commas + colons + opening brackets + 1): a Python object per value costs up to
#: about 70 bytes, so a 10 MB file of ``[{},{},...]`` would otherwise hold 250 MB.
MAX_JSON_VALUES = 10_000_000
#: Records a reader keeps as Python objects (JRDB-PAR frames, JRDB images, stickmen and CAD annotation
#: lines): about 1 KB each, so the ceiling bounds them near 1 GB.
MAX_RECORDS = 1_000_000
#: An ONNX model file: protobuf's own ceiling (2 GiB); pairedge's classifiers are well under 1 MiB.
MAX_MODEL_BYTES = 2 * GiB
#: The largest side of a detector's declared image input, in pixels, checked before its session or engine is
#: made: a [1, 3, 4096, 4096] float32 input is 200 MB per frame before the network's own activations (the
#: common exports are 416 to 1280).
MAX_DETECTOR_INPUT_SIDE = 4096
#: A serialized TensorRT engine, a timing cache, a manifest-listed file of a model folder that is read whole.
MAX_ENGINE_BYTES = 2 * GiB
#: A small JSON side file read whole (manifest.json, an engine manifest, calibration.json, tolerances).
MAX_SIDECAR_BYTES = 64 * MiB
#: An image file in a frame folder, or one compressed image message.
MAX_IMAGE_BYTES = 256 * MiB
#: Pixels of one decoded frame (width x height). 8K UHD (7680 x 4320 = 33.2 MP) and JRDB's stitched
#: 3760 x 480 panorama fit; one 40 MP BGR frame is 120 MB before the flow's own buffers.
MAX_FRAME_PIXELS = 40_000_000
#: The longest side of a decoded frame, in pixels (a 1 x 40,000,000 "image" is not a camera frame).
MAX_FRAME_SIDE = 32_768
#: One message of a ROS 2 log (an uncompressed 8K bgr8 image is 100 MB).
MAX_MESSAGE_BYTES = 256 * MiB
#: One MCAP chunk, compressed or as its header claims once decompressed (rosbags inflates a chunk whole).
MAX_MCAP_CHUNK_BYTES = 256 * MiB
#: MCAP chunks whose time ranges overlap, as declared decompressed: rosbags inflates them together to merge
#: their messages in time order (a recorder's chunks follow each other; overlaps are a few MiB).
MAX_MCAP_OVERLAP_BYTES = 512 * MiB
#: Records of one MCAP file walked before it is opened (a chunked hour of 30 fps video is ~100,000).
MAX_MCAP_RECORDS = 20_000_000
#: A parity pack: the sum of its arrays as their headers declare them once decompressed.
MAX_PACK_BYTES = 1 * GiB
#: A features ``.npz`` for training, decompressed.
MAX_FEATURES_BYTES = 4 * GiB
#: A MATLAB v5 ``.mat`` annotation file (Collective Activity ``annoNN.mat``), on disk and inflated.
MAX_MAT_BYTES = 256 * MiB
#: Simulator work asked for on a command line: seeds of one scene range, frames per scene, and their product.
MAX_SIM_SEEDS = 10_000
MAX_SIM_FRAMES = 100_000
MAX_SIM_TOTAL_FRAMES = 1_000_000

#: Read in blocks of this size (never the whole file in one call).
READ_CHUNK = 4 * MiB


def describe_size(n: int) -> str:
    """``n`` bytes in the unit a person reads (``"512 MiB"``, ``"3.0 GiB"``, ``"812 bytes"``)."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def regular_file(path: str | Path, expected: str, limit: int | None = None) -> int:
    """Check that ``path`` (symlinks followed) is a regular file of at most ``limit`` bytes; its size.

    Never opens the file, so a FIFO cannot block and a device cannot be read.

    Args:
        path: the file.
        expected: what it should be, for the message ("a MOT .txt detection file").
        limit: the ceiling in bytes (None: no size check).

    Raises:
        FormatError: missing, unreadable, a folder / FIFO / device / socket, or larger than ``limit``.
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as exc:
        reason = (
            "no such file"
            if isinstance(exc, FileNotFoundError)
            else f"cannot read it ({exc.strerror or exc})"
        )
        raise FormatError(p, f"{reason}; expected {expected}") from None
    if not stat.S_ISREG(st.st_mode):
        link = " (a symlink to it)" if p.is_symlink() else ""
        raise FormatError(p, f"{_kind(st.st_mode)}{link}, not a regular file; expected {expected}")
    if limit is not None and st.st_size > limit:
        raise FormatError(
            p,
            f"{describe_size(st.st_size)}, more than the {describe_size(limit)} ceiling for {expected} "
            f"(pairedge.core.limits); check that it is the right file",
        )
    return int(st.st_size)


def read_bytes(path: str | Path, expected: str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, read in chunks.

    Raises:
        FormatError: see :func:`regular_file`; also when the file grew past ``limit`` while it was read.
    """
    p = Path(path)
    regular_file(p, expected, limit)
    parts: list[bytes] = []
    total = 0
    try:
        with open(p, "rb") as fh:
            while True:
                block = fh.read(min(READ_CHUNK, limit + 1 - total))
                if not block:
                    break
                parts.append(block)
                total += len(block)
                if total > limit:
                    raise FormatError(
                        p, f"grew past the {describe_size(limit)} ceiling for {expected} while it was read"
                    )
    except OSError as exc:
        raise FormatError(p, f"cannot read the file ({exc.strerror or exc}); expected {expected}") from None
    return b"".join(parts)


def read_text(path: str | Path, expected: str, limit: int | None = None) -> str:
    """The file as UTF-8 text (a leading byte-order mark dropped), at most ``limit`` bytes
    (default :data:`MAX_TEXT_BYTES`, read when called).

    Raises:
        FormatError: see :func:`read_bytes`; also when the bytes are not UTF-8.
    """
    return decode_utf8(path, read_bytes(path, expected, MAX_TEXT_BYTES if limit is None else limit), expected)


def decode_utf8(path: str | Path, data: bytes, expected: str) -> str:
    """``data`` as UTF-8 text, a leading byte-order mark dropped.

    Raises:
        FormatError: naming ``path``, the byte offset and ``expected``, when ``data`` is not UTF-8.
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(
            path, f"not UTF-8 text (byte {exc.start}: {exc.reason}); expected {expected}"
        ) from None


def longest_line(data: bytes | str) -> int:
    """Length of the longest line of ``data`` (``\\n``-separated), without building the lines."""
    sep = b"\n" if isinstance(data, bytes) else "\n"
    best, start = 0, 0
    while True:
        end = data.find(sep, start)  # type: ignore[arg-type]
        stop = len(data) if end < 0 else end
        best = max(best, stop - start)
        if end < 0:
            return best
        start = end + 1


def check_lines(path: str | Path, data: bytes | str, expected: str, limit: int | None = None) -> None:
    """Refuse ``data`` (a whole text file) when one of its lines is longer than ``limit`` (default
    :data:`MAX_LINE_BYTES`, read when called).

    Raises:
        FormatError: naming the line number and the ceiling.
    """
    limit = MAX_LINE_BYTES if limit is None else limit
    sep = b"\n" if isinstance(data, bytes) else "\n"
    start, line = 0, 1
    while True:
        end = data.find(sep, start)  # type: ignore[arg-type]
        stop = len(data) if end < 0 else end
        if stop - start > limit:
            raise FormatError(
                path,
                f"a line of {describe_size(stop - start)}, more than the {describe_size(limit)} "
                f"ceiling for one line of {expected} (pairedge.core.limits); is it the right file?",
                f"line {line}",
            )
        if end < 0:
            return
        start, line = end + 1, line + 1


def check_frame_size(width: int, height: int, source: str) -> None:
    """Refuse a frame of ``width x height`` pixels above :data:`MAX_FRAME_PIXELS` or :data:`MAX_FRAME_SIDE`.

    Call it with the size an image header or a message declares, before decoding or allocating.

    Raises:
        FormatError: naming ``source`` (a file, a topic and message index) and the ceiling.
    """
    w, h = int(width), int(height)
    if w <= 0 or h <= 0:
        raise FormatError(source, f"an image of {w} x {h} pixels; expected a positive width and height")
    if w > MAX_FRAME_SIDE or h > MAX_FRAME_SIDE or w * h > MAX_FRAME_PIXELS:
        raise FormatError(
            source,
            f"an image of {w} x {h} pixels ({w * h / 1e6:.1f} MP), more than the ceiling of "
            f"{MAX_FRAME_PIXELS / 1e6:g} MP and {MAX_FRAME_SIDE} px a side "
            "(pairedge.core.limits.MAX_FRAME_PIXELS); resize the input",
        )


def check_sim_work(seeds: int, frames: int, what: str) -> None:
    """Refuse simulator work above :data:`MAX_SIM_SEEDS` seeds, :data:`MAX_SIM_FRAMES` frames per scene or
    :data:`MAX_SIM_TOTAL_FRAMES` in all, before any scene is rendered.

    Args:
        seeds: number of scenes (seeds) asked for; frames: frames per scene; what: the option, for the
            message.

    Raises:
        InputError: naming the option, the count and the ceiling.
    """
    if seeds > MAX_SIM_SEEDS:
        raise InputError(
            f"{what}: {seeds:,} seeds, more than the ceiling of {MAX_SIM_SEEDS:,} (pairedge.core.limits)"
        )
    if frames > MAX_SIM_FRAMES:
        raise InputError(
            f"{what}: {frames:,} frames per scene, more than the ceiling of {MAX_SIM_FRAMES:,} "
            "(pairedge.core.limits)"
        )
    if seeds * frames > MAX_SIM_TOTAL_FRAMES:
        raise InputError(
            f"{what}: {seeds:,} seeds x {frames:,} frames = {seeds * frames:,} frames, more than the ceiling "
            f"of {MAX_SIM_TOTAL_FRAMES:,} in all (pairedge.core.limits); ask for fewer seeds or frames"
        )


#: Every ceiling with what it bounds and why it is where it is: the table in ``docs/formats.md#ceilings``.
CEILINGS: tuple[tuple[str, str, str], ...] = (
    ("MAX_TEXT_BYTES", "a text / JSON input file (detections, annotations, predictions)", "read whole"),
    ("MAX_LINE_BYTES", "one line of a line-based text file", "a MOT line is under 200 bytes"),
    ("MAX_JSON_VALUES", "values of a JSON document parsed whole, counted before parsing", "~70 B each"),
    ("MAX_RECORDS", "frames / lines a reader keeps as Python objects (PAR, JRDB, stickmen)", "~1 KB each"),
    ("MAX_MODEL_BYTES", "an ONNX model file", "protobuf's own limit"),
    ("MAX_DETECTOR_INPUT_SIDE", "a side of a detector's declared image input", "exports are 416-1280"),
    ("MAX_ENGINE_BYTES", "a TensorRT engine or timing cache", "read whole to hash and deserialise"),
    ("MAX_SIDECAR_BYTES", "manifest.json, engine manifests, calibration.json, tolerances", "small JSON"),
    (
        "MAX_IMAGE_BYTES",
        "an image file of a frame folder, one compressed image message",
        "an 8K PNG is < 100 MB",
    ),
    ("MAX_FRAME_PIXELS", "pixels of one decoded frame, checked on the declared size", "8K UHD is 33.2 MP"),
    ("MAX_FRAME_SIDE", "the longest side of a frame", "no camera is wider"),
    ("MAX_MESSAGE_BYTES", "one ROS 2 log message", "an 8K bgr8 image is 100 MB"),
    ("MAX_MCAP_CHUNK_BYTES", "one MCAP chunk, compressed and as declared decompressed", "inflated whole"),
    (
        "MAX_MCAP_OVERLAP_BYTES",
        "MCAP chunks with overlapping time ranges, declared decompressed",
        "inflated together",
    ),
    ("MAX_MCAP_RECORDS", "records of one MCAP file", "each header is read before the file is opened"),
    ("MAX_PACK_BYTES", "a parity pack's arrays, as declared decompressed", "a pack is a short clip"),
    ("MAX_FEATURES_BYTES", "a features .npz for training, decompressed", "held in memory to train"),
    ("MAX_MAT_BYTES", "a MATLAB .mat annotation file, on disk and inflated", "annoNN.mat is < 1 MB"),
    ("MAX_SIM_SEEDS", "seeds of one simulator scene range on a command line", "--scenes, --data sim:"),
    ("MAX_SIM_FRAMES", "frames per simulated scene", "--frames"),
    ("MAX_SIM_TOTAL_FRAMES", "seeds x frames of one command", "about an hour of rendering"),
)


def ceilings_markdown() -> str:
    """The Markdown table of :data:`CEILINGS` with their current values (``docs/formats.md`` quotes it)."""
    rows = ["| ceiling | value | bounds | why |", "|---|---:|---|---|"]
    for name, bounds, why in CEILINGS:
        value = globals()[name]  # this module's value now (a test may have patched it)
        shown = describe_size(value) if name.endswith("_BYTES") else f"{value:,}"
        rows.append(f"| `{name}` | {shown} | {bounds} | {why} |")
    return "\n".join(rows)
