"""Every file reader is bounded before the work (SPEC 9, issue 22): a FIFO or a symlink to ``/dev/zero`` is
refused unopened, a file above its ceiling is refused on its size, an overlong line before parsing, a
declared size (a header, a zip member, a JSON value count) before the allocation it claims."""

from __future__ import annotations

import json
import os
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pairedge.core import limits
from pairedge.core.errors import FormatError
from pairedge.core.io.cad import read_cad_annotations
from pairedge.core.io.cvml import read_cvml
from pairedge.core.io.jrdb import read_jrdb
from pairedge.core.io.mot import read_mot
from pairedge.core.io.par import read_par
from pairedge.core.io.stickmen import read_stickmen
from pairedge.core.io.stickmen_json import read_stickmen_json
from pairedge.core.io.textio import iter_lines, json_value_bound
from pairedge.measure.metrics.pairwise import read_pairwise_file

PAPER3 = ("walking_together", "standing_together", "sitting_together")
STICK = "1 2 3 4\n" * 6
CVML = (
    '<?xml version="1.0"?>\n<dataset><frame number="0"><objectlist><object id="1"><box xc="5" yc="5" '
    'w="2" h="2"/></object></objectlist></frame></dataset>\n'
)  # noqa: E501


def _pairwise(path: str | Path) -> object:
    return read_pairwise_file(path, PAPER3)


#: name -> (reader, a valid file's text, line-based)
READERS: dict[str, tuple[Callable[[Any], object], str, bool]] = {
    "mot": (read_mot, "1,1,0,0,5,5,1\n2,1,0,0,5,5,1\n", True),
    "par": (read_par, '{"frame": 1}\n{"frame": 2}\n', True),
    "pairwise": (_pairwise, '{"frame": 1, "interactions": [{"ids": [1, 2]}]}\n', True),
    "stickmen": (read_stickmen, STICK, True),
    "cad_annotations": (read_cad_annotations, "1 10 10 5 5 1 1\n11 10 10 5 5 1 1\n", True),
    "jrdb": (
        read_jrdb,
        '{"labels": {"000001.jpg": [{"label_id": "pedestrian:1", "box": [0, 0, 5, 5]}]}}',
        False,
    ),
    "stickmen_json": (read_stickmen_json, '{"images": [{"name": "a", "stickmen": []}]}', False),
    "cvml": (read_cvml, CVML, False),
}
LINE_BASED = [name for name, (_, _, lines) in READERS.items() if lines]


def _refused_quickly(reader: Callable[[Any], object], path: Path) -> FormatError:
    """The FormatError ``reader(path)`` raises, from a thread so that a reader that opens a FIFO fails the
    test instead of hanging it."""
    caught: list[BaseException] = []

    def attempt() -> None:
        try:
            reader(path)
        except BaseException as exc:  # noqa: BLE001 - reported below
            caught.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(10)
    assert caught, f"{path.name}: the reader blocked or returned"
    assert isinstance(caught[0], FormatError), repr(caught[0])
    return caught[0]


@pytest.mark.parametrize("name", READERS)
def test_valid_sample_reads(tmp_path: Path, name: str) -> None:
    reader, text, _ = READERS[name]
    path = tmp_path / f"{name}.txt"
    path.write_text(text)
    reader(path)  # the samples below are refused for their ceiling, not for their content


@pytest.mark.parametrize("name", READERS)
def test_fifo_and_dev_zero_are_refused_unopened(tmp_path: Path, name: str) -> None:
    reader = READERS[name][0]
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.txt"
    zero.symlink_to("/dev/zero")
    assert "FIFO" in str(_refused_quickly(reader, fifo))
    assert "character device (a symlink to it)" in str(_refused_quickly(reader, zero))
    assert "a folder" in str(_refused_quickly(reader, tmp_path))


@pytest.mark.parametrize("name", READERS)
def test_file_above_the_text_ceiling_is_refused_on_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    reader, text, _ = READERS[name]
    path = tmp_path / f"{name}.txt"
    path.write_text(text)
    monkeypatch.setattr(limits, "MAX_TEXT_BYTES", len(text.encode()) - 1)
    err = _refused_quickly(reader, path)
    assert "ceiling" in str(err) and "\n" not in str(err) and name in err.path


@pytest.mark.parametrize("name", LINE_BASED)
def test_overlong_line_is_refused_before_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    reader, text, _ = READERS[name]
    path = tmp_path / f"{name}.txt"
    first, rest = text.split("\n", 1)
    path.write_text(first + "\n" + first + " " * 64 + "\n" + rest)
    monkeypatch.setattr(limits, "MAX_LINE_BYTES", len(first) + 32)
    err = _refused_quickly(reader, path)
    assert "ceiling for one line" in str(err) and err.record == "line 2"


def test_one_huge_mot_line_is_refused_in_a_fraction_of_its_size(tmp_path: Path) -> None:
    """The issue's repro at a small scale: one line of 3 MiB (no newline), above the 1 MiB default."""
    path = tmp_path / "det.txt"
    path.write_bytes(b"1," * (3 << 19))
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match="more than the 1 MiB ceiling for one line") as err:
            read_mot(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert err.value.record == "line 1"
    assert peak < 3 * path.stat().st_size  # the bytes read once; nothing parsed


def test_mot_memory_stays_near_its_documented_ratio(tmp_path: Path) -> None:
    """The bounded, chunked read keeps read_mot's peak near the bytes + the output columns (~3.7x of a
    typical ground-truth file, block temporaries included; the same as before the ceilings)."""
    path = tmp_path / "gt.txt"
    line = b"%d,%d,10.5,20.25,30,60,0.875,-1,-1,-1\n"
    path.write_bytes(b"".join(line % (f, k) for f in range(1, 20_001) for k in range(8)))
    tracemalloc.start()
    try:
        table = read_mot(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(table) == 160_000
    assert peak < 3.8 * path.stat().st_size + (8 << 20)  # + a read chunk and one block's temporaries


def test_streamed_lines_survive_chunk_boundaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """iter_lines (the pairwise reader's) reads in chunks: \\r\\n split across two chunks is one line end."""
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"\xef\xbb\xbfab\r\ncd\rlong-ish line\n\r\nx")
    monkeypatch.setattr(limits, "READ_CHUNK", 3)
    assert list(iter_lines(path, "a test file")) == [
        (1, "ab"),
        (2, "cd"),
        (3, "long-ish line"),
        (4, ""),
        (5, "x"),
    ]


def test_pairwise_overlong_line_is_not_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "pred.jsonl"
    path.write_bytes(b'{"frame": 1}\n' + b" " * (24 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match="ceiling for one line") as err:
            _pairwise(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert err.value.record == "line 2"
    assert peak < 4 * limits.READ_CHUNK  # a chunk and the open line, not the 24 MiB line


def test_pairwise_reader_keeps_columns_not_tuples(tmp_path: Path) -> None:
    """Memory of the parsed records stays within a few times the file (it was about 20x in tuples)."""
    path = tmp_path / "pred.jsonl"
    pairs = [{"ids": [k, k + 1], "p_interact": 0.5} for k in range(0, 400, 2)]
    path.write_text("".join(json.dumps({"frame": f, "interactions": pairs}) + "\n" for f in range(200)))
    tracemalloc.start()
    try:
        parsed = _pairwise(path)
        current = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(parsed.pairs.frame) == 40_000  # type: ignore[attr-defined]
    assert current < 2 * path.stat().st_size


def test_json_value_bound_is_an_upper_bound() -> None:
    doc: Any = {"a": [1, 2, {"b": [], "c": {}}], "d": "x,y", "e": [[[]]]}
    values = 0

    def count(v: Any) -> None:
        nonlocal values
        values += 1
        for child in v.values() if isinstance(v, dict) else v if isinstance(v, list) else ():
            count(child)
        values += len(v) if isinstance(v, dict) else 0  # the keys

    count(doc)
    assert values <= json_value_bound(json.dumps(doc)) == json_value_bound(json.dumps(doc).encode())


@pytest.mark.parametrize("name", ["jrdb", "stickmen_json"])
def test_json_array_of_tiny_objects_is_refused_before_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """50 million ``{}`` would be 3.6 GB in Python from a 150 MB file: the value count is checked first."""
    path = tmp_path / f"{name}.json"
    path.write_text('{"labels": [' + ",".join(["{}"] * 2000) + "]}")
    monkeypatch.setattr(limits, "MAX_JSON_VALUES", 1000)
    with pytest.raises(FormatError, match="JSON values, more than the ceiling of 1,000"):
        READERS[name][0](path)


def test_records_ceiling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_RECORDS", 3)
    par = tmp_path / "par.jsonl"
    par.write_text("".join(f'{{"frame": {k}}}\n' for k in range(4)))
    with pytest.raises(FormatError, match="4 lines, more than the ceiling of 3 records"):
        read_par(par)
    jrdb = tmp_path / "jrdb.json"
    jrdb.write_text(json.dumps({"labels": {f"{k:06d}.jpg": [] for k in range(4)}}))
    with pytest.raises(FormatError, match="4 images"):
        read_jrdb(jrdb)
    stick = tmp_path / "s.txt"
    stick.write_text(STICK)
    with pytest.raises(FormatError, match="6 lines"):
        read_stickmen(stick)


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<dataset><frame number="0"><objectlist><object id="1"><box xc="5" yc="5" w="2" h="2"/></object>
<object id="&lol9;"><box xc="5" yc="5" w="2" h="2"/></object></objectlist></frame></dataset>
"""


@pytest.mark.parametrize(
    "text",
    [
        BILLION_LAUGHS,
        '<?xml version="1.0"?>\n<!DOCTYPE d [<!ENTITY x SYSTEM '
        '"file:///etc/passwd">]>\n<dataset>&x;</dataset>',
        '<?xml version="1.0"?>\n<!DOCTYPE d [<!ENTITY % p SYSTEM "http://example.invalid/x.dtd"> '
        "%p;]>\n<dataset/>",
    ],
    ids=["billion-laughs", "external-entity", "parameter-entity"],
)
def test_xml_entities_are_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "gt.xml"
    path.write_text(text)
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match="declares an entity") as err:
            read_cvml(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "\n" not in str(err.value) and peak < limits.READ_CHUNK + (1 << 20)  # one read chunk, no expansion


def test_xml_nesting_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "deep.xml"
    path.write_text("<dataset>" + "<a>" * 100_000 + "</a>" * 100_000 + "</dataset>")
    with pytest.raises(FormatError, match="nested deeper than 64 levels"):
        read_cvml(path)


def test_xml_objects_keep_their_own_box_when_nested(tmp_path: Path) -> None:
    """The stream parser pairs each object with its own first <box> child, whatever the nesting."""
    path = tmp_path / "gt.xml"
    path.write_text(
        '<dataset><frame number="3"><object id="1"><object id="2"><box xc="10" yc="10" w="2" h="2"/></object>'
        '<box xc="5" yc="5" w="4" h="4"/></object></frame></dataset>'
    )
    tracks = read_cvml(path)
    assert tracks.track_ids.tolist() == [1, 2]
    np.testing.assert_allclose(tracks.boxes, [[3, 3, 4, 4], [9, 9, 2, 2]])


# ------------------------------------------------------------------------------------------ binary readers


def _flo(width: int, height: int, data: bytes = b"") -> bytes:
    return np.array([202021.25], "<f4").tobytes() + np.array([width, height], "<i4").tobytes() + data


def test_flo_declared_size_is_checked_before_reading(tmp_path: Path) -> None:
    from pairedge.core.io.flo import read_flo

    huge = tmp_path / "huge.flo"
    huge.write_bytes(_flo(30_000, 30_000))  # 7.2 GB of flow claimed by a 12-byte file
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match="MAX_FRAME_PIXELS"):
            read_flo(huge)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    short = tmp_path / "short.flo"
    short.write_bytes(_flo(100, 100, b"\0" * 16))
    with pytest.raises(FormatError, match="expected 80012 bytes for a 100x100 flow field, got 28"):
        read_flo(short)
    long = tmp_path / "long.flo"
    long.write_bytes(_flo(2, 2, b"\0" * 40))
    with pytest.raises(FormatError, match="expected 44 bytes"):
        read_flo(long)
    fifo = tmp_path / "pipe.flo"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.flo"
    zero.symlink_to("/dev/zero")
    assert "FIFO" in str(_refused_quickly(read_flo, fifo))
    assert "character device" in str(_refused_quickly(read_flo, zero))


MAT_HEADER = b"MATLAB 5.0 MAT-file, pairedge test".ljust(116) + b"\0" * 8 + b"\x00\x01IM"


def _element(kind: int, data: bytes) -> bytes:
    return np.array([kind, len(data)], "<u4").tobytes() + data + b"\0" * (-len(data) % 8)


def _cell_array(dims: tuple[int, int], children: bytes = b"") -> bytes:
    """An ``miMATRIX`` cell array named x declaring ``dims`` and holding ``children``."""
    flags = _element(6, np.array([1, 0], "<u4").tobytes())  # class 1: cell
    body = flags + _element(5, np.array(dims, "<i4").tobytes()) + _element(1, b"x") + children
    return _element(14, body)


def test_mat_cell_array_declaring_more_cells_than_it_holds_is_refused(tmp_path: Path) -> None:
    """scipy allocates an object array of the declared size first: 10^10 cells from a 200-byte file."""
    from pairedge.core.io.matfile import MatLoader, check_mat_file

    path = tmp_path / "anno01.mat"
    path.write_bytes(MAT_HEADER + _cell_array((100_000, 100_000)))
    with pytest.raises(FormatError, match="declaring 10,000,000,000 cells .* that holds 0"):
        check_mat_file(path)
    with pytest.raises(FormatError, match="declaring 10,000,000,000 cells"):
        MatLoader(isolate=True).load(path)  # refused before the probe process or scipy sees it
    one = _cell_array((1, 1), _cell_array((0, 0)))
    path.write_bytes(MAT_HEADER + one)
    assert MatLoader(isolate=False).load(path)["x"].shape == (1, 1)


def test_mat_nesting_truncation_and_non_v5_are_refused(tmp_path: Path) -> None:
    from pairedge.core.io.matfile import check_mat_file

    nested = _cell_array((0, 0))
    for _ in range(40):
        nested = _cell_array((1, 1), nested)
    path = tmp_path / "deep.mat"
    path.write_bytes(MAT_HEADER + nested)
    with pytest.raises(FormatError, match="nested deeper than 32"):
        check_mat_file(path)
    data = bytearray(MAT_HEADER + _cell_array((1, 1), _cell_array((0, 0))))
    data[128 + 4 : 128 + 8] = np.array([1 << 30], "<u4").tobytes()  # the variable claims 1 GiB
    path.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="declaring 1 GiB, beyond the end of its container"):
        check_mat_file(path)
    path.write_bytes(b"MATLAB 7.3 MAT-file".ljust(128, b"\0") + b"\x89HDF")
    with pytest.raises(FormatError, match="v7.3 file is HDF5"):
        check_mat_file(path)


def test_mat_inflation_and_size_ceilings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sio = pytest.importorskip("scipy.io")
    from pairedge.core.io.matfile import check_mat_file

    path = tmp_path / "anno02.mat"
    sio.savemat(str(path), {"x": np.zeros(300_000)}, do_compression=True)  # 2.4 MB inflated, ~3 kB on disk
    assert path.stat().st_size < 64 << 10
    monkeypatch.setattr(limits, "MAX_MAT_BYTES", 1 << 20)
    with pytest.raises(FormatError, match="inflate to more than the 1 MiB ceiling"):
        check_mat_file(path)
    monkeypatch.setattr(limits, "MAX_MAT_BYTES", 1000)
    with pytest.raises(FormatError, match="more than the 1000 bytes ceiling"):
        check_mat_file(path)


def test_mat_fifo_and_dev_zero_are_refused_unopened(tmp_path: Path) -> None:
    pytest.importorskip("scipy.io")
    from pairedge.core.io.cad import read_cad_dir, read_cad_mat

    fifo = tmp_path / "anno01.mat"
    os.mkfifo(fifo)
    zero = tmp_path / "anno02.mat"
    zero.symlink_to("/dev/zero")
    assert "FIFO" in str(_refused_quickly(read_cad_mat, fifo))
    assert "character device" in str(_refused_quickly(read_cad_mat, zero))
    assert "FIFO" in str(_refused_quickly(read_cad_dir, tmp_path))


def _npy(shape: tuple[int, ...], data: bytes, descr: str = "<f4") -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue() + data


def _features_zip(path: Path, members: dict[str, bytes], method: int = 8) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w", compression=method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _set_declared_size(path: Path, member: str, size: int) -> None:
    """Patch a member's uncompressed size in its local header and its central directory entry."""
    data = bytearray(path.read_bytes())
    name = member.encode()
    local = data.find(b"PK\x03\x04")
    while data[local + 30 : local + 30 + len(name)] != name:
        local = data.find(b"PK\x03\x04", local + 4)
    data[local + 22 : local + 26] = size.to_bytes(4, "little")
    central = data.find(b"PK\x01\x02")
    while data[central + 46 : central + 46 + len(name)] != name:
        central = data.find(b"PK\x01\x02", central + 4)
    data[central + 24 : central + 28] = size.to_bytes(4, "little")
    path.write_bytes(bytes(data))


def _small_features() -> dict[str, bytes]:
    return {
        "y.npy": _npy((2,), np.array([0, 1], "<i8").tobytes(), "<i8"),
        "groups.npy": _npy((2,), np.array(["a", "b"], "<U1").tobytes(), "<U1"),
        "labels.npy": _npy((2,), np.array(["p", "q"], "<U1").tobytes(), "<U1"),
    }


def test_npz_header_claiming_more_than_its_member_is_refused_unloaded(tmp_path: Path) -> None:
    from pairedge.core.io.featurefile import load_npz

    path = _features_zip(tmp_path / "f.npz", {"X.npy": _npy((10**6, 10**6), b"\0" * 64), **_small_features()})
    tracemalloc.start()
    try:
        with pytest.raises(
            FormatError,
            match=r"'X': its header declares shape \(1000000, 1000000\) of float32 .* holds 64 bytes",
        ):
            load_npz(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_npz_member_inflating_past_its_declared_size_is_not_read_whole(tmp_path: Path) -> None:
    """A member whose deflate stream holds 40 MB while its zip entry declares 4 kB: zipfile stops at the
    declared size (then the CRC disagrees); the 40 MB are never produced."""
    from pairedge.core.io.featurefile import load_npz

    x = _npy((10, 100), b"\0" * 4000)
    path = _features_zip(tmp_path / "f.npz", {"X.npy": x + b"\0" * (40 << 20), **_small_features()})
    assert path.stat().st_size < 1 << 20
    _set_declared_size(path, "X.npy", len(x))
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match="CRC"):
            load_npz(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_npz_member_count_and_loaded_size_ceilings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pairedge.core.io.featurefile import load_npz
    from pairedge.core.io.npz import MAX_MEMBERS

    many = _features_zip(tmp_path / "many.npz", {f"m{k}.npy": b"" for k in range(MAX_MEMBERS + 1)}, method=0)
    with pytest.raises(FormatError, match=f"a zip of {MAX_MEMBERS + 1:,} members"):
        load_npz(many)
    x = _npy((1000, 100), b"\0" * 400_000)
    big = _features_zip(tmp_path / "big.npz", {"X.npy": x, **_small_features()})
    assert big.stat().st_size < 64 << 10
    monkeypatch.setattr(limits, "MAX_FEATURES_BYTES", 100_000)
    with pytest.raises(FormatError, match="once decompressed, more than the 97.7 KiB ceiling"):
        load_npz(big)
    monkeypatch.setattr(limits, "MAX_FEATURES_BYTES", 500_000)  # the member fits; its float32 copy does not
    f64 = _features_zip(
        tmp_path / "f64.npz", {"X.npy": _npy((500, 100), b"\0" * 400_000, "<f8"), **_small_features()}
    )
    with pytest.raises(FormatError, match="once loaded, more than the 488.3 KiB ceiling"):
        load_npz(f64)


def test_npz_fifo_and_dev_zero_are_refused_unopened(tmp_path: Path) -> None:
    from pairedge.core.io.featurefile import load_npz

    fifo = tmp_path / "f.npz"
    os.mkfifo(fifo)
    zero = tmp_path / "z.npz"
    zero.symlink_to("/dev/zero")
    assert "FIFO" in str(_refused_quickly(load_npz, fifo))
    assert "character device" in str(_refused_quickly(load_npz, zero))


def _checkpoint(folder: Path) -> Path:
    pytest.importorskip("torch")
    from pairedge.core.labels import STAGE1
    from pairedge.export.checkpoint import Checkpoint, save_checkpoint
    from pairedge.export.models import ModelConfig, build_model

    config = ModelConfig("stage1_mlp", 7, 2)
    model = build_model(config).eval()
    ckpt = Checkpoint(model, config, 1, STAGE1.classes, "liang2026", "1", {"p_interact": 0.5})
    save_checkpoint(ckpt, folder)
    return folder


def test_checkpoint_config_and_weights_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pairedge.core.errors import ModelError
    from pairedge.export.checkpoint import load_checkpoint

    folder = _checkpoint(tmp_path / "ckpt")
    load_checkpoint(folder)
    config = folder / "model.json"
    size = config.stat().st_size
    monkeypatch.setattr(limits, "MAX_SIDECAR_BYTES", size - 1)
    with pytest.raises(ModelError, match="not a readable JSON checkpoint config .*more than the .* ceiling"):
        load_checkpoint(folder)
    monkeypatch.undo()
    text = config.read_text()
    config.unlink()
    os.mkfifo(config)
    caught: list[BaseException] = []
    worker = threading.Thread(target=lambda: _catch(caught, load_checkpoint, folder), daemon=True)
    worker.start()
    worker.join(10)
    assert caught and isinstance(caught[0], ModelError) and "FIFO" in str(caught[0])
    config.unlink()
    config.write_text(text)
    (folder / "model.pt").unlink()
    (folder / "model.pt").symlink_to("/dev/zero")
    with pytest.raises(ModelError, match="character device"):
        load_checkpoint(folder)


def _catch(caught: list[BaseException], fn: Callable[[Path], object], arg: Path) -> None:
    try:
        fn(arg)
    except BaseException as exc:  # noqa: BLE001 - the test inspects it
        caught.append(exc)
