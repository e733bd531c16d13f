"""A bounded ``.npz`` reader: every size is known from the zip directory and the ``.npy`` headers first.

``numpy.load`` inflates an array as soon as it is asked for, whatever its header declares, so a 5 MB pack can
cost 2 GB before any shape is checked. :class:`NpzReader` instead

1. counts the members from the zip's end record before :mod:`zipfile` parses the directory (a zip of a
   million tiny members is refused unparsed), then sums the uncompressed sizes the directory declares for
   all members and refuses above ``limit``;
2. reads only the ``.npy`` header of every member (magic, version 1.0 / 2.0, shape, dtype, order), refuses
   object dtypes (no pickle, ever) and any header whose shape x item size disagrees with the member's
   declared size — so the caller can check the layout (row counts, widths) before any data is read;
3. inflates one array at a time on request, reading exactly the bytes its header declares, in chunks, and
   refuses a member that inflates to more (or fewer) bytes than it declared.

Errors are :class:`~pairedge.core.errors.FormatError` naming the file and the member. Parity packs
(:mod:`pairedge.compare.parity.pack`) and training features (:func:`pairedge.core.io.featurefile.load_npz`)
are read through it.
"""

from __future__ import annotations

import math
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
from pairedge.core import limits
from pairedge.core.errors import FormatError

#: Members an archive may hold at most (a pack has 23, a features file 12; a zip of a million tiny members
#: is neither).
MAX_MEMBERS = 256
#: Largest ``.npy`` header read (numpy's own default limit).
MAX_HEADER = 10_000
_CHUNK = 1 << 20
#: dtype kinds an array may have: bool, signed / unsigned integers, floats, unicode and byte strings.
_KINDS = frozenset("biufUS")
#: What a corrupt or truncated zip / deflate stream raises while it is read.
CORRUPT = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError)


@dataclass(frozen=True)
class ArrayInfo:
    """What one member's ``.npy`` header declares.

    Attributes:
        key: the array's name (member name without ``.npy``). shape: its shape. dtype: its dtype.
        fortran: column-major order. header: bytes before the data. member: the zip entry.
    """

    key: str
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran: bool
    header: int
    member: zipfile.ZipInfo

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)


class NpzReader:
    """An open ``.npz`` whose arrays are described (:attr:`infos`) before any is read (:meth:`read`).

    Use as a context manager. ``limit``: the ceiling in bytes on the members' declared uncompressed sizes.
    """

    def __init__(
        self, path: Path, limit: int, what: str = "a .npz file", ceiling: str = "MAX_PACK_BYTES"
    ) -> None:
        self.path = path
        self.what = what
        self.ceiling = ceiling
        members = zip_member_count(path)
        if members > MAX_MEMBERS:
            raise FormatError(
                path, f"a zip of {members:,} members; expected {what} (at most {MAX_MEMBERS})", "npz"
            )
        try:
            self._zip = zipfile.ZipFile(path)
        except CORRUPT as exc:
            raise self._corrupt(exc) from None
        try:
            self.infos = self._describe(limit)
        except BaseException:
            self._zip.close()
            raise

    def __enter__(self) -> NpzReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._zip.close()

    def _corrupt(self, exc: BaseException, member: str | None = None) -> FormatError:
        return FormatError(
            self.path,
            f"not a readable {self.what}: {type(exc).__name__}: {exc}; the file is truncated or "
            "corrupt, copy it again",
            member or "npz",
        )

    def _describe(self, limit: int) -> dict[str, ArrayInfo]:
        members = self._zip.infolist()
        if len(members) > MAX_MEMBERS:
            raise FormatError(self.path, f"a zip of {len(members)} members; expected {self.what}", "npz")
        declared = sum(m.file_size for m in members)
        if declared > limit:
            raise FormatError(
                self.path,
                f"its arrays declare {limits.describe_size(declared)} once decompressed, more than the "
                f"{limits.describe_size(limit)} ceiling for {self.what} "
                f"(pairedge.core.limits.{self.ceiling}); it is larger than such a file can be, or it is a "
                "zip bomb",
                "npz",
            )
        infos: dict[str, ArrayInfo] = {}
        for member in members:
            if member.is_dir() or not member.filename.endswith(".npy"):
                continue  # not an array: ignored (its declared size was counted above)
            info = self._header(member)
            infos[info.key] = info
        return infos

    def _header(self, member: zipfile.ZipInfo) -> ArrayInfo:
        key = member.filename[: -len(".npy")]
        try:
            with self._zip.open(member) as fh:
                version = np.lib.format.read_magic(fh)
                shape, fortran, dtype = _read_header(fh, version)
                header = fh.tell()
        except CORRUPT as exc:
            raise self._corrupt(exc, key) from None
        if dtype.hasobject or dtype.kind not in _KINDS or dtype.names is not None:
            raise FormatError(
                self.path,
                f"not a readable {self.what}: array {key!r} holds {dtype} values (Python objects or "
                "records), which a pack never does; refusing it (no pickle)",
                key,
            )
        info = ArrayInfo(key, tuple(int(d) for d in shape), dtype, bool(fortran), header, member)
        if header + info.nbytes != member.file_size:
            raise FormatError(
                self.path,
                f"array {key!r}: its header declares shape {info.shape} of {dtype} "
                f"({limits.describe_size(info.nbytes)}), the zip member holds "
                f"{limits.describe_size(max(member.file_size - header, 0))}; the file is corrupt",
                key,
            )
        return info

    def read(self, key: str) -> np.ndarray:
        """The array ``key``, inflating exactly the bytes its header declared (checked in :attr:`infos`).

        Raises:
            FormatError: the member inflates to another size than it declared, or is corrupt (CRC).
        """
        info = self.infos[key]
        try:
            with self._zip.open(info.member) as fh:
                _read_exactly(fh, info.header)
                data = _read_exactly(fh, info.nbytes)
                if len(data) != info.nbytes or fh.read(1):
                    raise FormatError(
                        self.path,
                        f"array {key!r} inflates to another size than its header declares; the file "
                        "is corrupt, copy it again",
                        key,
                    )
        except CORRUPT as exc:
            raise self._corrupt(exc, key) from None
        array = np.frombuffer(data, dtype=info.dtype)
        return array.reshape(info.shape, order="F" if info.fortran else "C")


def _read_header(fh: IO[bytes], version: tuple[int, int]) -> tuple[Any, bool, np.dtype]:
    """(shape, fortran, dtype) of a ``.npy`` header of ``version`` (1.0 or 2.0; 3.0 is only for non-Latin-1
    field names, which a pack has none of)."""
    fmt = np.lib.format
    if version == (1, 0):
        return fmt.read_array_header_1_0(fh, max_header_size=MAX_HEADER)  # type: ignore[no-any-return]
    if version == (2, 0):
        return fmt.read_array_header_2_0(fh, max_header_size=MAX_HEADER)  # type: ignore[no-any-return]
    raise ValueError(f".npy format version {version[0]}.{version[1]}, expected 1.0 or 2.0")


def _read_exactly(fh: IO[bytes], n: int) -> bytes:
    """Up to ``n`` bytes of ``fh`` in chunks (fewer only at its end): never more than asked for."""
    parts, left = [], n
    while left > 0:
        block = fh.read(min(_CHUNK, left))
        if not block:
            break
        parts.append(block)
        left -= len(block)
    return b"".join(parts)


def zip_member_count(path: Path) -> int:
    """The number of members a zip's end-of-central-directory record (or its zip64 record) declares, read
    from the file's tail before :mod:`zipfile` parses the directory; -1 when there is no such record
    (zipfile then says why)."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - (22 + 0xFFFF)))
            tail = fh.read()
            end = tail.rfind(b"PK\x05\x06")
            if end < 0 or end + 22 > len(tail):
                return -1
            entries = struct.unpack_from("<H", tail, end + 10)[0]
            locator = end - 20
            if entries != 0xFFFF or locator < 0 or tail[locator : locator + 4] != b"PK\x06\x07":
                return int(entries)
            fh.seek(struct.unpack_from("<Q", tail, locator + 8)[0])
            record = fh.read(56)
    except OSError:
        return -1
    if len(record) < 56 or record[:4] != b"PK\x06\x06":
        return -1
    return int(struct.unpack_from("<Q", record, 32)[0])
