"""The pixel size an encoded image declares, read from its header without decoding it.

A 100 kB PNG can declare 20,000 x 20,000 pixels and make the decoder allocate 1.2 GB; so every image file and
compressed image message is measured here first and refused above
:data:`pairedge.core.limits.MAX_FRAME_PIXELS` (:func:`check_image_bytes`) before OpenCV sees it. The formats
are those the frame folders and ROS 2 ``CompressedImage`` messages accept: PNG, JPEG, BMP, WebP (lossy,
lossless, extended), TIFF (classic, the first page, which is the one OpenCV decodes) and the binary / ASCII
PNM family (PBM, PGM, PPM). Anything else is refused as an unknown format rather than handed to a decoder
whose allocation nobody checked.

Every parser reads only a bounded prefix of the bytes (a JPEG's markers up to its frame header, a TIFF's
first directory) and never trusts an offset that points outside the data.
"""

from __future__ import annotations

from pairedge.core import limits
from pairedge.core.errors import FormatError

#: The formats :func:`image_size` understands, for messages.
FORMATS = "PNG, JPEG, BMP, WebP, TIFF, PBM / PGM / PPM"
#: JPEG markers walked at most before the frame header (real files have a dozen).
_MAX_JPEG_SEGMENTS = 4096
#: TIFF directory entries read at most.
_MAX_TIFF_ENTRIES = 4096
#: JPEG start-of-frame markers (baseline, progressive, lossless, arithmetic): C0-CF except C4, C8, CC.
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def image_size(data: bytes | memoryview) -> tuple[str, int, int] | None:
    """``(format, width, height)`` an encoded image declares, or None for an unknown or broken header.

    Args:
        data: the encoded bytes (a whole file or message).
    """
    b = bytes(data[:32]) if len(data) >= 32 else bytes(data)
    try:
        if b.startswith(b"\x89PNG\r\n\x1a\n"):
            return _png(bytes(data[:33]))
        if b.startswith(b"\xff\xd8"):
            return _jpeg(data)
        if b.startswith(b"BM"):
            return _bmp(bytes(data[:30]))
        if b.startswith(b"RIFF") and b[8:12] == b"WEBP":
            return _webp(bytes(data[:30]))
        if b[:4] in (b"II*\x00", b"MM\x00*"):
            return _tiff(data)
        if len(b) >= 2 and b[0:1] == b"P" and b[1:2] in b"123456":
            return _pnm(bytes(data[:4096]))
    except (IndexError, ValueError):
        return None
    return None


def check_image_bytes(data: bytes | memoryview, source: str) -> tuple[int, int]:
    """``(width, height)`` of an encoded image, refused before decoding when too large or unknown.

    Args:
        data: the encoded bytes; source: the file or message, for the message.

    Raises:
        FormatError: empty, larger than :data:`~pairedge.core.limits.MAX_IMAGE_BYTES`, an unknown format or
            header, or a declared size above :data:`~pairedge.core.limits.MAX_FRAME_PIXELS`.
    """
    if len(data) == 0:
        raise FormatError(source, "an empty image; expected encoded image bytes")
    if len(data) > limits.MAX_IMAGE_BYTES:
        raise FormatError(
            source,
            f"an encoded image of {limits.describe_size(len(data))}, more than the "
            f"{limits.describe_size(limits.MAX_IMAGE_BYTES)} ceiling (pairedge.core.limits.MAX_IMAGE_BYTES)",
        )
    found = image_size(data)
    if found is None:
        raise FormatError(source, f"not an image pairedge can measure before decoding; expected {FORMATS}")
    _, width, height = found
    limits.check_frame_size(width, height, source)
    return width, height


def _be(b: bytes, at: int, n: int) -> int:
    if at + n > len(b):
        raise IndexError(at)
    return int.from_bytes(b[at : at + n], "big")


def _le(b: bytes, at: int, n: int, signed: bool = False) -> int:
    if at + n > len(b):
        raise IndexError(at)
    return int.from_bytes(b[at : at + n], "little", signed=signed)


def _png(b: bytes) -> tuple[str, int, int] | None:
    if b[12:16] != b"IHDR":
        return None
    return "png", _be(b, 16, 4), _be(b, 20, 4)


def _jpeg(data: bytes | memoryview) -> tuple[str, int, int] | None:
    pos, n = 2, len(data)
    for _ in range(_MAX_JPEG_SEGMENTS):
        while pos < n and data[pos] == 0xFF and pos + 1 < n and data[pos + 1] == 0xFF:
            pos += 1  # fill bytes
        if pos + 4 > n or data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker in (0x01, *range(0xD0, 0xD8)):  # standalone markers carry no length
            pos += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image / start of scan before any frame header
            return None
        length = (data[pos + 2] << 8) | data[pos + 3]
        if length < 2:
            return None
        if marker in _JPEG_SOF:
            if pos + 9 > n:
                return None
            height = (data[pos + 5] << 8) | data[pos + 6]
            width = (data[pos + 7] << 8) | data[pos + 8]
            return "jpeg", width, height
        pos += 2 + length
    return None


def _bmp(b: bytes) -> tuple[str, int, int] | None:
    header = _le(b, 14, 4)
    if header == 12:  # BITMAPCOREHEADER: 16-bit sizes
        return "bmp", _le(b, 18, 2), _le(b, 20, 2)
    if header < 40:
        return None
    return "bmp", abs(_le(b, 18, 4, signed=True)), abs(_le(b, 22, 4, signed=True))  # height < 0: top-down


def _webp(b: bytes) -> tuple[str, int, int] | None:
    chunk = b[12:16]
    if chunk == b"VP8 ":
        if b[23:26] != b"\x9d\x01\x2a":
            return None
        return "webp", _le(b, 26, 2) & 0x3FFF, _le(b, 28, 2) & 0x3FFF
    if chunk == b"VP8L":
        if b[20:21] != b"\x2f":
            return None
        bits = _le(b, 21, 4)
        return "webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        return "webp", _le(b, 24, 3) + 1, _le(b, 27, 3) + 1
    return None


def _tiff(data: bytes | memoryview) -> tuple[str, int, int] | None:
    order = "little" if bytes(data[:2]) == b"II" else "big"

    def num(at: int, n: int) -> int:
        if at < 0 or at + n > len(data):
            raise IndexError(at)
        return int.from_bytes(bytes(data[at : at + n]), order)  # type: ignore[arg-type]

    ifd = num(4, 4)
    count = num(ifd, 2)
    if count > _MAX_TIFF_ENTRIES:
        return None
    size: dict[int, int] = {}
    for k in range(count):
        entry = ifd + 2 + 12 * k
        tag, kind = num(entry, 2), num(entry + 2, 2)
        if tag in (256, 257):
            size[tag] = num(entry + 8, 2) if kind == 3 else num(entry + 8, 4)
    if 256 not in size or 257 not in size:
        return None
    return "tiff", size[256], size[257]


def _pnm(b: bytes) -> tuple[str, int, int] | None:
    tokens: list[int] = []
    pos = 2
    while len(tokens) < 2 and pos < len(b):
        c = b[pos : pos + 1]
        if c == b"#":
            end = b.find(b"\n", pos)
            if end < 0:
                return None
            pos = end + 1
        elif c.isspace():
            pos += 1
        elif c.isdigit():
            start = pos
            while pos < len(b) and b[pos : pos + 1].isdigit():
                pos += 1
            if pos - start > 12:
                return None
            tokens.append(int(b[start:pos]))
        else:
            return None
    if len(tokens) < 2:
        return None
    return "pnm", tokens[0], tokens[1]
