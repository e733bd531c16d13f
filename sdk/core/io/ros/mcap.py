"""An MCAP file's record framing checked before rosbags opens it, and chunk inflation that cannot overshoot.

rosbags trusts what an MCAP file declares: it reads a record of the length its header claims, inflates a
chunk whole with ``zstd.decompress`` (which keeps going for as long as the stream does, whatever size the
chunk declared) and, to merge messages in time order, holds every chunk whose time range overlaps the one
it is reading. So a 99 kB file can ask for gigabytes. :func:`walk_mcap` reads only the fixed headers of
every record (opcode ``uint8`` + length ``uint64`` LE, then the few fixed fields of Chunk and Chunk Index
records; never a payload) and refuses, before rosbags sees the file:

- a record whose length runs past the end of the file, more than
  :data:`~pairedge.core.limits.MAX_MCAP_RECORDS` records, a footer whose summary offset is not the start of a
  record;
- a Message record above :data:`~pairedge.core.limits.MAX_MESSAGE_BYTES`;
- a Chunk (or Chunk Index) whose compressed records or declared ``uncompressed_size`` exceed
  :data:`~pairedge.core.limits.MAX_MCAP_CHUNK_BYTES`, an unknown compression, an uncompressed chunk whose two
  sizes differ, and chunks with overlapping time ranges that together declare more than
  :data:`~pairedge.core.limits.MAX_MCAP_OVERLAP_BYTES`.

:func:`bound_decompression` makes rosbags inflate each chunk with a decompressor that stops one byte past
the declared size, so a chunk that declares 1 MiB and inflates to 3 GiB costs 1 MiB before it is refused.

Layouts (MCAP specification): Chunk = message_start_time u64, message_end_time u64, uncompressed_size u64,
uncompressed_crc u32, compression (u32 length + bytes), records (u64 length + bytes). Chunk Index =
message_start_time u64, message_end_time u64, chunk_start_offset u64, chunk_length u64,
message_index_offsets (u32 byte length + entries), message_index_length u64, compression (string),
compressed_size u64, uncompressed_size u64. Footer = summary_start u64, summary_offset_start u64, crc u32.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from pairedge.core import limits
from pairedge.core.errors import FormatError
from pairedge.core.io.textio import printable

MAGIC = b"\x89MCAP0\r\n"
OP_FOOTER, OP_MESSAGE, OP_CHUNK, OP_CHUNK_INDEX = 0x02, 0x05, 0x06, 0x08
MESSAGE_HEADER = 22  # channel_id u16, sequence u32, log_time u64, publish_time u64
CHUNK_FIXED = 8 + 8 + 8 + 4 + 4  # start, end, uncompressed_size, crc, compression length
COMPRESSIONS = ("", "zstd", "lz4")
_MAX_NAME = 64  # a compression name is "zstd" or "lz4"
_FOOTER = 9 + 20 + 8  # footer record + closing magic


@dataclass(frozen=True)
class McapLayout:
    """What the walk found: record and chunk counts, and the largest declared chunk."""

    records: int
    chunks: int
    largest_chunk: int


def walk_mcap(path: str | Path, size: int, *, verify_inflation: bool = False) -> McapLayout:
    """Check every record header of the MCAP file ``path`` (``size`` bytes, a regular file).

    Args:
        verify_inflation: also inflate every compressed chunk with :func:`inflate` (when rosbags' own
            decompressors could not be bounded, see :func:`bound_decompression`).

    Raises:
        FormatError: the first record that breaks the framing or a ceiling, with its byte offset.
    """
    p = Path(path)
    with open(p, "rb") as fh:
        if fh.read(8) != MAGIC:
            raise FormatError(p, "not an MCAP file (the first 8 bytes are not the MCAP magic)")
        summary_start = _summary_start(fh, size)
        walker = _Walker(p, fh, size, verify_inflation)
        pos, seen_summary = 8, summary_start == 0
        while pos < size:
            if size - pos == len(MAGIC):
                break
            op, length = walker.header(pos)
            seen_summary = seen_summary or pos == summary_start
            walker.record(op, pos + 9, length)
            pos += 9 + length
            if op == OP_FOOTER:
                break
        if not seen_summary:
            raise FormatError(p, f"the footer's summary offset {summary_start} is not the start of a record")
        walker.check_overlap()
        return McapLayout(walker.records, walker.chunks, walker.largest)


def _summary_start(fh: BinaryIO, size: int) -> int:
    """The footer's summary_start (0: none, or no footer to read; rosbags then refuses the file itself)."""
    if size < 8 + _FOOTER:
        return 0
    fh.seek(size - _FOOTER)
    tail = fh.read(_FOOTER)
    if tail[:1] != bytes([OP_FOOTER]) or tail[-8:] != MAGIC:
        return 0
    (start,) = struct.unpack_from("<Q", tail, 9)
    fh.seek(8)
    return start


class _Walker:
    """Reads the fixed header fields at given offsets and applies the ceilings."""

    def __init__(self, path: Path, fh: BinaryIO, size: int, verify: bool = False) -> None:
        self.path, self.fh, self.size, self.verify = path, fh, size, verify
        self.records = self.chunks = self.largest = 0
        self.indexed: list[tuple[int, int, int]] = []  # chunk index: (start time, end time, uncompressed)

    def fail(self, at: int, problem: str) -> FormatError:
        return FormatError(self.path, f"{problem}; the file is corrupt or hostile", f"at byte {at}")

    def read(self, at: int, n: int) -> bytes:
        self.fh.seek(at)
        data = self.fh.read(n)
        if len(data) != n:
            raise self.fail(at, f"a record field of {n} bytes runs past the end of the file")
        return data

    def header(self, pos: int) -> tuple[int, int]:
        self.records += 1
        if self.records > limits.MAX_MCAP_RECORDS:
            raise FormatError(
                self.path,
                f"more than {limits.MAX_MCAP_RECORDS:,} records, the ceiling "
                "(pairedge.core.limits.MAX_MCAP_RECORDS); split the log",
            )
        if self.size - pos < 9:
            raise self.fail(pos, "a truncated record header")
        op, length = struct.unpack("<BQ", self.read(pos, 9))
        if length > self.size - pos - 9:
            raise self.fail(
                pos,
                f"a record (opcode 0x{op:02x}) of {limits.describe_size(length)} runs past "
                f"the end of the {limits.describe_size(self.size)} file",
            )
        return op, length

    def record(self, op: int, body: int, length: int) -> None:
        if op == OP_MESSAGE:
            if length < MESSAGE_HEADER:
                raise self.fail(body - 9, f"a message record of {length} bytes (the header alone is 22)")
            _ceiling(
                self,
                body - 9,
                "a message",
                length - MESSAGE_HEADER,
                limits.MAX_MESSAGE_BYTES,
                "MAX_MESSAGE_BYTES",
            )
        elif op == OP_CHUNK:
            self.chunk(body, length)
        elif op == OP_CHUNK_INDEX:
            self.chunk_index(body, length)

    def chunk(self, body: int, length: int) -> None:
        if length < CHUNK_FIXED + 8:
            raise self.fail(body - 9, f"a chunk record of {length} bytes, shorter than its fixed fields")
        _, _, declared, _, name_len = struct.unpack("<QQQII", self.read(body, CHUNK_FIXED))
        name = self.compression(body - 9, body + CHUNK_FIXED, name_len, length - CHUNK_FIXED - 8)
        (stored,) = struct.unpack("<Q", self.read(body + CHUNK_FIXED + name_len, 8))
        if stored > length - CHUNK_FIXED - name_len - 8:
            raise self.fail(
                body - 9,
                f"a chunk whose records ({limits.describe_size(stored)}) run past the "
                "end of the chunk record",
            )
        self.sizes(body - 9, name, stored, declared)
        if self.verify and name:
            try:
                inflate(self.read(body + CHUNK_FIXED + name_len + 8, stored), name, declared)
            except FormatError as exc:
                raise self.fail(body - 9, exc.problem) from None
        self.chunks += 1

    def chunk_index(self, body: int, length: int) -> None:
        fixed = 32 + 4
        if length < fixed + 8 + 4 + 16:
            raise self.fail(body - 9, f"a chunk index record of {length} bytes, shorter than its fields")
        start, end, offset, chunk_length, map_len = struct.unpack("<QQQQI", self.read(body, fixed))
        if map_len > length - fixed - 28:
            raise self.fail(body - 9, "a chunk index whose message index table runs past its record")
        at = body + fixed + map_len + 8
        (name_len,) = struct.unpack("<I", self.read(at, 4))
        name = self.compression(body - 9, at + 4, name_len, length - (at + 4 - body) - 16)
        stored, declared = struct.unpack("<QQ", self.read(at + 4 + name_len, 16))
        if offset + chunk_length > self.size or 9 + CHUNK_FIXED + name_len + 8 + stored > chunk_length:
            raise self.fail(
                body - 9,
                f"a chunk index that points outside the file or its chunk (chunk at "
                f"byte {offset}, {limits.describe_size(chunk_length)})",
            )
        self.sizes(body - 9, name, stored, declared)
        self.indexed.append((start, end, declared))

    def compression(self, record: int, at: int, n: int, room: int) -> str:
        if n > min(room, _MAX_NAME):
            raise self.fail(record, f"a chunk compression name of {n} bytes")
        name = self.read(at, n).decode("utf-8", "replace")
        if name not in COMPRESSIONS:
            raise self.fail(
                record,
                f"a chunk compressed with '{printable(name)}'; pairedge reads zstd, lz4 "
                "or uncompressed chunks",
            )
        return name

    def sizes(self, record: int, name: str, stored: int, declared: int) -> None:
        what = f"a {name or 'uncompressed'} chunk"
        _ceiling(self, record, f"{what} holding", stored, limits.MAX_MCAP_CHUNK_BYTES, "MAX_MCAP_CHUNK_BYTES")
        _ceiling(
            self,
            record,
            f"{what} that declares",
            declared,
            limits.MAX_MCAP_CHUNK_BYTES,
            "MAX_MCAP_CHUNK_BYTES",
        )
        if not name and stored != declared:
            raise self.fail(record, f"an uncompressed chunk of {stored} bytes that declares {declared}")
        self.largest = max(self.largest, declared)

    def check_overlap(self) -> None:
        """Chunks rosbags inflates together (overlapping time ranges) stay under the overlap ceiling."""
        worst = _largest_overlap(self.indexed)
        if worst > limits.MAX_MCAP_OVERLAP_BYTES:
            raise FormatError(
                self.path,
                f"chunks with overlapping time ranges declare {limits.describe_size(worst)} "
                f"together, more than the {limits.describe_size(limits.MAX_MCAP_OVERLAP_BYTES)} ceiling "
                "(pairedge.core.limits.MAX_MCAP_OVERLAP_BYTES); re-record or re-chunk the log",
            )


def _ceiling(walker: _Walker, at: int, what: str, n: int, limit: int, name: str) -> None:
    if n > limit:
        raise walker.fail(
            at,
            f"{what} {limits.describe_size(n)}, more than the {limits.describe_size(limit)} "
            f"ceiling (pairedge.core.limits.{name})",
        )


def _largest_overlap(chunks: list[tuple[int, int, int]]) -> int:
    """The largest sum of sizes of chunks whose ``[start, end]`` time ranges share an instant."""
    open_ends: list[tuple[int, int]] = []
    total = worst = 0
    for start, end, size in sorted(chunks):
        while open_ends and open_ends[0][0] < start:
            total -= heapq.heappop(open_ends)[1]
        heapq.heappush(open_ends, (end, size))
        total += size
        worst = max(worst, total)
    return worst


def inflate(data: bytes, compression: str, size: int) -> bytes:
    """A chunk's records inflated, at most ``size + 1`` bytes ever produced.

    Args:
        data: the compressed records; compression: "zstd", "lz4" or "" (stored); size: the declared size.

    Raises:
        FormatError: the stream inflates to more than ``size`` bytes (refused one byte past it).
    """
    if not compression:
        return data
    make = _decompressor(compression)
    parts: list[bytes] = []
    total, rest = 0, data
    while rest:  # a chunk may hold several concatenated frames
        dec = make()
        piece = dec.decompress(rest, max_length=size + 1 - total)
        total += len(piece)
        parts.append(piece)
        if total > size:
            raise FormatError(
                "<mcap chunk>",
                f"a {compression} chunk inflates to more than the {size} bytes it "
                "declares; the log is corrupt or hostile",
            )
        if not dec.eof:
            break  # truncated stream: the caller's size check reports it
        rest = dec.unused_data
    return b"".join(parts)


def _decompressor(compression: str) -> Callable[[], object]:
    if compression == "zstd":
        try:
            from compression import zstd  # type: ignore[import-not-found]  # Python 3.14
        except ImportError:
            from backports import zstd  # type: ignore[no-redef]
        return zstd.ZstdDecompressor  # type: ignore[no-any-return]
    if compression == "lz4":
        import lz4.frame  # type: ignore[import-untyped]

        return lz4.frame.LZ4FrameDecompressor  # type: ignore[no-any-return]
    raise FormatError("<mcap chunk>", f"unknown chunk compression '{printable(compression)}'")


def bound_decompression() -> bool:
    """Make rosbags inflate MCAP chunks through :func:`inflate` (idempotent); False if it has no table.

    rosbags keeps its chunk decompressors in ``storage_mcap.DECOMPRESSORS`` (name -> ``f(data, size)``); the
    bounded ones give the same bytes for every well-formed chunk.
    """
    from rosbags.rosbag2 import storage_mcap

    table = getattr(storage_mcap, "DECOMPRESSORS", None)
    if not isinstance(table, dict):
        return False
    for name in ("zstd", "lz4"):
        if name in table and getattr(table[name], "__name__", "") != "_bounded":
            table[name] = _bounded_for(name)
    return True


def _bounded_for(name: str) -> Callable[[bytes, int], bytes]:
    def _bounded(data: bytes, size: int) -> bytes:
        return inflate(data, name, size)

    return _bounded
