"""PETS / CVML XML reader: a tiny fixture, malformed files, and the real PETS 2009 S2.L1 ground truth."""

from __future__ import annotations

import numpy as np
import pytest
from pairedge.core.errors import FormatError
from pairedge.core.io.cvml import read_cvml

TINY = """<?xml version="1.0" encoding="utf-8"?>
<dataset>
  <frame number="0">
    <objectlist>
      <object id="9"><box h="80" w="30" xc="515" yc="195"/></object>
      <object id="2"><orientation>90</orientation><box h="60.5" w="20" xc="100" yc="50.25"/></object>
    </objectlist>
  </frame>
  <frame number="1"><objectlist/></frame>
  <frame number="2">
    <objectlist>
      <object id="9"><box h="80" w="30" xc="517" yc="196"/></object>
    </objectlist>
  </frame>
</dataset>
"""


def write(tmp_path, text, name="gt.xml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_tiny_boxes_converted_to_top_left(tmp_path):
    tr = read_cvml(write(tmp_path, TINY))
    assert tr.frame_numbers.tolist() == [0, 1, 2]
    assert tr.frames.tolist() == [0, 0, 2] and tr.track_ids.tolist() == [2, 9, 9]
    np.testing.assert_allclose(tr.boxes[0], [90, 20, 20, 60.5])
    np.testing.assert_allclose(tr.boxes[1], [500, 155, 30, 80])
    assert tr.boxes.dtype == np.float32 and tr.identities.tolist() == [2, 9]
    d = tr.detections(0)
    assert d.track_ids.tolist() == [2, 9]
    assert len(tr.detections(1)) == 0 and len(tr.detections(99)) == 0
    assert [(f, len(d)) for f, d in tr.iter_frames()] == [(0, 2), (1, 0), (2, 1)]


@pytest.mark.parametrize(
    "old, new, match",
    [
        ('<object id="2">', '<object id="two">', r"frame 0, object #2: expected an integer attribute 'id'"),
        ('<frame number="1">', "<frame>", r"frame #2: expected an integer attribute 'number'"),
        ('w="20"', 'w="-20"', r"frame 0, object #2: expected a positive box size"),
        ('xc="100"', 'xc="nan"', r"frame 0, object #2: expected a finite number in box attribute 'xc'"),
        ('xc="100" ', "", r"frame 0, object #2: expected a finite number in box attribute 'xc'"),
        ('<object id="2">', '<object id="9">', r"frame 0, object #2: expected unique object ids"),
        ('<frame number="2">', '<frame number="0">', r"record frame 0: expected each frame number once"),
        ('<box h="80" w="30" xc="517" yc="196"/>', "", r"frame 2, object #1: expected a <box"),
    ],
)
def test_malformed_names_frame_and_object(tmp_path, old, new, match):
    assert old in TINY
    with pytest.raises(FormatError, match=match):
        read_cvml(write(tmp_path, TINY.replace(old, new, 1)))


def test_truncated_and_missing(tmp_path):
    with pytest.raises(FormatError, match=r"gt.xml, record line \d+, column \d+: expected well-formed XML"):
        read_cvml(write(tmp_path, TINY[: len(TINY) // 2]))
    with pytest.raises(FormatError, match="no such file"):
        read_cvml(tmp_path / "absent.xml")
    with pytest.raises(FormatError, match="expected a CVML <dataset>"):
        read_cvml(write(tmp_path, "<html><body/></html>", "page.xml"))


def test_real_pets_s2l1(shared_data):
    tr = read_cvml(shared_data / "pets09_s2l1" / "PETS2009-S2L1.xml")
    assert len(tr.identities) == 19
    assert len(tr.boxes) == 4650
    assert len(tr.frame_numbers) == 795 and tr.frame_numbers.min() == 0 and tr.frame_numbers.max() == 794
    assert (tr.boxes[:, 2:] > 0).all() and np.isfinite(tr.boxes).all()
    # the MOTChallenge gt.txt of the same video: frame = index + 1, integer-rounded left/top
    gt = np.loadtxt(shared_data / "pets09_s2l1" / "mot15" / "gt" / "gt.txt", delimiter=",")
    gt = gt[np.lexsort((gt[:, 1], gt[:, 0]))]
    np.testing.assert_array_equal(tr.frames + 1, gt[:, 0].astype(np.int64))
    np.testing.assert_array_equal(tr.track_ids, gt[:, 1].astype(np.int64))
    np.testing.assert_allclose(tr.boxes, gt[:, 2:6], atol=1.0)


@pytest.mark.parametrize("seed", range(3))
def test_fuzzed_xml_gives_format_error_or_tracks(tmp_path, seed):
    """Random byte edits of a valid file: a clean FormatError or a valid result, never another exception."""
    rng = np.random.default_rng(seed)
    data = bytearray(TINY.encode())
    for trial in range(40):
        mutated = bytearray(data)
        for pos in rng.integers(0, len(mutated), rng.integers(1, 6)):
            mutated[pos] = int(rng.integers(32, 127))
        path = tmp_path / f"f{trial}.xml"
        path.write_bytes(bytes(mutated))
        try:
            tr = read_cvml(path)
        except FormatError:
            continue
        assert np.isfinite(tr.boxes).all() and (tr.boxes[:, 2:] > 0).all()


def test_an_entity_declaration_is_refused_once_not_rewrapped(tmp_path) -> None:
    import pytest
    from pairedge.core.errors import FormatError
    from pairedge.core.io.cvml import read_cvml

    path = tmp_path / "bomb.xml"
    path.write_text('<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "x">]><dataset></dataset>')
    with pytest.raises(FormatError) as err:
        read_cvml(path)
    assert "declares an entity" in str(err.value) and "readable XML" not in str(err.value)
    assert str(err.value).count(str(path)) == 1
