"""The shared ceilings (pairedge.core.limits) and the header-only image measurement
(pairedge.core.io.imagesize)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import cv2
import numpy as np
import pytest
from pairedge.core import limits
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.imagesize import check_image_bytes, image_size


def test_non_regular_files_are_refused_without_opening_them(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "zero.txt"
    link.symlink_to("/dev/zero")
    done: list[str] = []

    def attempt() -> None:
        for path in (fifo, link, tmp_path, tmp_path / "missing"):
            with pytest.raises(FormatError) as err:
                limits.read_bytes(path, "a test file", 100)
            done.append(str(err.value))

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(10)
    assert len(done) == 4, "opening a FIFO blocked"
    assert "FIFO" in done[0] and "character device (a symlink to it)" in done[1]
    assert "a folder" in done[2] and "no such file" in done[3]


def test_size_ceiling_is_checked_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 1001)
    with pytest.raises(FormatError, match="more than the 1000 bytes ceiling"):
        limits.read_text(big, "a test file", limit=1000)
    assert limits.read_text(big, "a test file", limit=1001) == "x" * 1001
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbfab")
    assert limits.read_text(bom, "a test file") == "ab"


def test_module_ceilings_are_read_when_called(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "a.txt"
    f.write_text("hello")
    monkeypatch.setattr(limits, "MAX_TEXT_BYTES", 4)
    with pytest.raises(FormatError, match="ceiling"):
        limits.read_text(f, "a test file")
    monkeypatch.setattr(limits, "MAX_LINE_BYTES", 3)
    with pytest.raises(FormatError, match="line 2"):
        limits.check_lines(f, "ab\nabcd\n", "a test file")


def test_line_ceiling_names_the_line() -> None:
    data = b"a\n" + b"b" * 50 + b"\nc"
    assert limits.longest_line(data) == 50
    limits.check_lines("f", data, "x", limit=50)
    with pytest.raises(FormatError, match="line 2"):
        limits.check_lines("f", data, "x", limit=49)


def test_frame_and_sim_ceilings() -> None:
    limits.check_frame_size(7680, 4320, "8k")
    limits.check_frame_size(3760, 480, "jrdb")
    for w, h in ((20_000, 20_000), (40_000, 1), (0, 10)):
        with pytest.raises(FormatError):
            limits.check_frame_size(w, h, "x")
    limits.check_sim_work(4, 300, "--scenes")
    with pytest.raises(InputError, match="seeds"):
        limits.check_sim_work(100_000_001, 2, "--data")
    with pytest.raises(InputError, match="frames per scene"):
        limits.check_sim_work(1, 100_000_000, "--frames")
    with pytest.raises(InputError, match="in all"):
        limits.check_sim_work(1000, 10_000, "--scenes")


@pytest.mark.parametrize("ext", [".png", ".jpg", ".bmp", ".webp", ".tiff", ".ppm", ".pgm"])
def test_image_size_matches_the_decoder(ext: str) -> None:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, (37, 53, 3), dtype=np.uint8)
    ok, buf = cv2.imencode(ext, image[..., 0] if ext == ".pgm" else image)
    assert ok
    found = image_size(buf.tobytes())
    assert found is not None and found[1:] == (53, 37)
    decoded = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)
    assert decoded.shape[:2] == (found[2], found[1])


def test_image_size_of_lossy_webp_and_progressive_jpeg() -> None:
    image = np.full((20, 31, 3), 120, np.uint8)
    for ext, params in (
        (".webp", [cv2.IMWRITE_WEBP_QUALITY, 40]),
        (".jpg", [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]),
    ):
        ok, buf = cv2.imencode(ext, image, params)
        assert image_size(buf.tobytes())[1:] == (31, 20)


def test_a_small_file_that_declares_a_huge_image_is_refused_before_decoding() -> None:
    ok, buf = cv2.imencode(".png", np.zeros((8, 8), np.uint8))
    data = bytearray(buf.tobytes())
    data[16:24] = (20_000).to_bytes(4, "big") + (20_000).to_bytes(4, "big")  # IHDR width, height
    with pytest.raises(FormatError, match="20000 x 20000"):
        check_image_bytes(bytes(data), "bomb.png")


@pytest.mark.parametrize(
    "data", [b"", b"GIF89a" + b"\0" * 40, b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"P6 12"]
)
def test_unknown_or_broken_headers_are_refused(data: bytes) -> None:
    with pytest.raises(FormatError):
        check_image_bytes(data, "x")


def test_truncated_headers_never_raise_anything_but_format_error() -> None:
    rng = np.random.default_rng(1)
    samples = []
    for ext in (".png", ".jpg", ".bmp", ".webp", ".tiff", ".ppm"):
        ok, buf = cv2.imencode(ext, np.zeros((5, 6, 3), np.uint8))
        samples.append(buf.tobytes())
    for raw in samples:
        for cut in range(0, min(len(raw), 200)):
            try:
                check_image_bytes(raw[:cut], "x")
            except FormatError:
                pass
        for _ in range(50):
            noisy = bytearray(raw)
            for k in rng.integers(0, len(noisy), 4):
                noisy[int(k)] = int(rng.integers(0, 256))
            try:
                check_image_bytes(bytes(noisy), "x")
            except FormatError:
                pass


def test_ceilings_table_lists_every_ceiling() -> None:
    table = limits.ceilings_markdown()
    names = [n for n in dir(limits) if n.startswith("MAX_")]
    assert sorted(names) == sorted(name for name, _, _ in limits.CEILINGS)
    for name in names:
        assert f"`{name}`" in table


def test_printable_escapes_control_characters() -> None:
    from pairedge.core.io.textio import printable

    assert printable("/camera\nerror: boom\x1b[2J\t") == "/camera\\nerror: boom\\x1b[2J\\t"
    assert "\n" not in printable("a\r\nb") and printable("héllo /topic") == "héllo /topic"
    assert len(printable("x" * 500)) == 200


def test_docs_ceiling_table_is_generated_from_the_code() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "formats.md").read_text(encoding="utf-8")
    start, end = docs.index("<!-- ceilings:start -->\n"), docs.index("<!-- ceilings:end -->")
    assert docs[start + len("<!-- ceilings:start -->\n") : end].strip() == limits.ceilings_markdown(), (
        "docs/formats.md#ceilings is stale: paste the output of pairedge.core.limits.ceilings_markdown()"
    )
