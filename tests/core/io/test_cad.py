"""Collective Activity readers: annoNN.mat (fixture in the real structure + the real files) and
annotations.txt."""

from __future__ import annotations

import numpy as np
import pytest
from pairedge.core.errors import FormatError
from pairedge.core.io.cad import (
    COLLECTIVE,
    frame_size_of,
    read_cad_annotations,
    read_cad_dir,
    read_cad_mat,
)
from pairedge.core.labels import CAD8

sio = pytest.importorskip("scipy.io")

from cad_synth import person, write_mat  # noqa: E402


@pytest.fixture()
def tiny(tmp_path):
    # 3 people over 6 frames: 1 in 1..6, 2 in 2..5, 3 in 4..6
    people = [
        person([1, 2, 3, 4, 5, 6], 10),
        person([2, 3, 4, 5], 100),
        person([4, 5, 6], 200, attr_action=2),
    ]
    inter = np.array(
        [
            [6, 6, 6, 6, 6, 1],  # (1,2): walking side by side where both present
            [2, 2, 2, 2, 3, 3],  # (1,3): approaching, then leaving
            [8, 8, 8, 8, 8, 8],  # (2,3)
        ]
    )
    return write_mat(tmp_path / "anno20.mat", people, inter, [1, 5, 5, 5, 6, 6], 6)


def test_tiny_structure(tiny):
    seq = read_cad_mat(tiny, isolate=False)
    assert seq.sequence == 20 and seq.frame_size == (800, 450) and seq.num_frames == 6
    assert [p.track_id for p in seq.people] == [1, 2, 3]
    assert seq.people[0].frames.tolist() == [1, 2, 3, 4, 5, 6]
    assert seq.people[2].action.tolist() == [1, 1, 1]  # standing, 0-based
    assert seq.people[0].pose.tolist() == [3] * 6
    assert seq.collective.tolist() == [0, 4, 4, 4, 5, 5]
    assert COLLECTIVE[seq.collective[1]] == "walking"
    d = seq.detections(4)
    assert d.track_ids.tolist() == [1, 2, 3]
    np.testing.assert_allclose(d.boxes[:, 0], [14, 104, 204])
    assert d.boxes.dtype == np.float32
    assert seq.timestamp(31) == pytest.approx(1.0)


def test_tiny_labels_only_where_both_present(tiny):
    seq = read_cad_mat(tiny, isolate=False)
    pairs, labels = seq.pair_labels(1)
    assert len(pairs) == 0  # only person 1 present
    pairs, labels = seq.pair_labels(2)
    assert pairs.tolist() == [[1, 2]] and labels.tolist() == [CAD8.index("walking_side_by_side")]
    pairs, labels = seq.pair_labels(5)
    assert pairs.tolist() == [[1, 2], [1, 3], [2, 3]]
    assert [CAD8.classes[i] for i in labels] == ["walking_side_by_side", "leaving", "standing_side_by_side"]
    pairs, labels = seq.pair_labels(6)  # person 2 gone: its pairs unlabelled
    assert pairs.tolist() == [[1, 3]] and labels.tolist() == [2]
    # lookup in any order; unknown ids and absent people give -1
    got = seq.labels_for(4, np.array([[3, 1], [2, 1], [1, 9], [0, 2], [2, 2]]))
    assert got.tolist() == [1, 5, -1, -1, -1]


def test_frames_iterator_and_frame_bounds(tiny):
    seq = read_cad_mat(tiny, isolate=False)
    frames = list(seq.frames())
    assert [f for f, _, _ in frames] == [1, 2, 3, 4, 5, 6]
    assert [len(d) for _, _, d in frames] == [1, 2, 2, 3, 3, 2]
    assert frames[3][1] == pytest.approx(3 / 30)
    with pytest.raises(IndexError):
        seq.detections(7)


def test_frame_sizes():
    assert (
        frame_size_of(15) == (800, 450)
        and frame_size_of(1) == (720, 480)
        and frame_size_of(None) == (720, 480)
    )


def test_bad_interaction_id_where_both_present(tmp_path):
    people = [person([1, 2]), person([2])]
    path = write_mat(tmp_path / "anno01.mat", people, [[0, 9]], [1, 1], 2)  # 0 is fine (absent), 9 is not
    with pytest.raises(
        FormatError, match=r"anno01.mat, record interaction frame 2: expected interaction ids 1..8"
    ):
        read_cad_mat(path)


@pytest.mark.parametrize(
    "case, match",
    [
        ("shape", "expected interaction of shape"),
        ("time", r"record people\(2\): expected integer frame numbers"),
        ("length", r"record people\(1\): expected time, sbbs, bbs and attr of the same length"),
        ("collective", "record anno.collective"),
        ("missing", "expected a field 'collective'"),
        ("nan", r"people\(1\): expected finite smoothed boxes"),
    ],
)
def test_malformed_mat_names_the_record(tmp_path, case, match):
    people = [person([1, 2, 3]), person([2, 3])]
    inter, coll, drop = [[1, 1, 1]], [1, 1, 1], None
    if case == "shape":
        inter = [[1, 1, 1], [1, 1, 1]]
    elif case == "time":
        people[1] = person([3, 4])
    elif case == "length":
        people[0]["sbbs"] = people[0]["sbbs"][:, :2]
    elif case == "collective":
        coll = [1, 1]
    elif case == "missing":
        drop = "collective"
    elif case == "nan":
        people[0]["sbbs"][0, 1] = np.nan
    path = write_mat(tmp_path / "anno07.mat", people, inter, coll, 3, drop=drop)
    with pytest.raises(FormatError, match=match):
        read_cad_mat(path, isolate=False)


def test_not_a_mat_file(tmp_path):
    bad = tmp_path / "anno02.mat"
    bad.write_bytes(b"MATLAB 5.0 MAT-file truncated")
    with pytest.raises(FormatError, match="anno02.mat"):
        read_cad_mat(bad)
    with pytest.raises(FormatError, match="no such file"):
        read_cad_mat(tmp_path / "nope.mat")
    sio.savemat(str(tmp_path / "anno03.mat"), {"other": np.zeros(3)})
    with pytest.raises(FormatError, match="expected a variable 'anno'"):
        read_cad_mat(tmp_path / "anno03.mat")
    with pytest.raises(FormatError, match="found none"):
        read_cad_dir(tmp_path / "empty")


def test_truncated_real_structure(tmp_path, tiny):
    data = tiny.read_bytes()
    cut = tmp_path / "anno21.mat"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError, match="anno21.mat"):
        read_cad_mat(cut)


def test_annotations_txt(tmp_path):
    path = tmp_path / "annotations.txt"
    path.write_text("1\t100\t50\t40\t80\t2\t3\n1\t200\t55\t38\t76\t2\t4\n\n11\t105\t50\t40\t80\t5\t3\n")
    kf = read_cad_annotations(path)
    assert kf.frames.tolist() == [1, 1, 11]
    assert kf.boxes.shape == (3, 4) and kf.boxes.dtype == np.float32
    assert kf.action.tolist() == [2, 2, 5] and kf.pose.tolist() == [3, 4, 3]
    d = kf.detections(1)
    assert len(d) == 2 and (d.track_ids == -1).all()
    path.write_text("1\t100\t50\t40\t80\t2\t3\n11\t105\t50\t40\t80\t5\n")
    with pytest.raises(FormatError, match="record line 2: expected 7 fields"):
        read_cad_annotations(path)
    path.write_text("1\t100\t50\t0\t80\t2\t3\n")
    with pytest.raises(FormatError, match="line 1: expected a positive box size"):
        read_cad_annotations(path)
    path.write_text("1\t1x0\t50\t4\t80\t2\t3\n")
    with pytest.raises(FormatError, match="line 1: expected numbers"):
        read_cad_annotations(path)


# ---- the real files (../shared/data/cad_choi), skipped when absent ----

CAD_SEQUENCES = [1, 2, 3, 4, 12, 13, 14, *range(17, 25), 26, 27, *range(30, 45)]


@pytest.fixture(scope="module")
def cad(shared_data):
    return read_cad_dir(shared_data / "cad_choi" / "annotations")


def test_real_cad_counts(cad):
    assert [s.sequence for s in cad] == CAD_SEQUENCES
    for s in cad:
        assert s.frame_size == ((800, 450) if s.sequence in (15, 20, 21, 22, 23, 24) else (720, 480))
        assert 150 <= s.num_frames <= 2000 and 5 <= len(s.people) <= 40
        assert s.present.any(axis=0).all()  # every person appears
        assert np.isfinite(s.boxes[s.present]).all() and (s.boxes[s.present][:, 2:] > 0).all()
    per_class = np.zeros(len(CAD8), int)
    for s in cad:
        lab = s.labels[s.labels >= 0]
        per_class += np.bincount(lab, minlength=len(CAD8)) // 2  # symmetric matrix counts each pair twice
    assert (per_class > 5000).all()
    assert 300_000 < per_class.sum() < 400_000


def pair_stats(seqs, label, horizon=10):
    """Median centre distance / mean height and its rate of change (heights/s) for one CAD8 class."""
    dist, rate = [], []
    for s in seqs:
        c = s.boxes[:, :, :2] + s.boxes[:, :, 2:] / 2  # (F, P, 2)
        h = s.boxes[:, :, 3]
        f, i, j = np.nonzero(s.labels == label)
        keep = i < j
        f, i, j = f[keep], i[keep], j[keep]
        d = np.hypot(*(c[f, i] - c[f, j]).T) / ((h[f, i] + h[f, j]) / 2)
        dist.append(d)
        g = f + horizon
        ok = g < s.num_frames
        ok[ok] &= s.present[g[ok], i[ok]] & s.present[g[ok], j[ok]]
        d2 = np.hypot(*(c[g[ok], i[ok]] - c[g[ok], j[ok]]).T) / ((h[g[ok], i[ok]] + h[g[ok], j[ok]]) / 2)
        rate.append((d2 - d[ok]) / (horizon / s.fps))
    return float(np.median(np.concatenate(dist))), float(np.median(np.concatenate(rate)))


def test_real_cad_label_sanity(cad):
    """The README's medians (all 44 sequences): side-by-side ~0.57 heights apart; approaching distance
    shrinks (-0.24 heights/s), leaving grows (+0.48 heights/s). Checked roughly on the sequences here."""
    side_d, side_rate = pair_stats(cad, CAD8.index("walking_side_by_side"))
    assert 0.4 < side_d < 0.8 and abs(side_rate) < 0.1
    _, approach = pair_stats(cad, CAD8.index("approaching"))
    _, leave = pair_stats(cad, CAD8.index("leaving"))
    assert -0.5 < approach < -0.1
    assert 0.25 < leave < 0.8


@pytest.mark.parametrize("seed", range(3))
def test_fuzzed_mat_gives_format_error_or_sequence(tiny, tmp_path, seed):
    """Random byte edits of a valid .mat: a clean FormatError or a consistent sequence, never a crash
    (seed 2 includes a file on which scipy 1.17's loadmat segfaults)."""
    from pairedge.core.io.matfile import MatLoader

    rng = np.random.default_rng(seed)
    data = tiny.read_bytes()
    paths = []
    for trial in range(25):
        mutated = bytearray(data)
        for pos in rng.integers(128, len(mutated), rng.integers(1, 4)):  # keep the 128-byte header
            mutated[pos] = int(rng.integers(0, 256))
        paths.append(tmp_path / f"anno{trial:02d}.mat")
        paths[-1].write_bytes(bytes(mutated))
    loader = MatLoader(isolate=True)  # probes in a child process: scipy itself crashes on some files
    loader.check(paths)
    for path in paths:
        try:
            seq = read_cad_mat(path, loader=loader)
        except FormatError:
            continue
        assert seq.labels.shape == (seq.num_frames, len(seq.people), len(seq.people))
        assert np.isfinite(seq.boxes[seq.present]).all()


def test_scipy_crash_becomes_format_error(tmp_path, monkeypatch):
    """A probe process that dies on a file (as scipy does on some corrupt ones) gives a FormatError naming it;
    the other files are still read."""
    from pairedge.core.io import matfile

    paths = [tmp_path / name for name in ("anno05.mat", "anno06.mat", "anno07.mat")]
    for p in paths:
        sio.savemat(str(p), {"x": np.zeros(2)})
    dies_on_06 = (
        "import os, sys\n"
        "for i, p in enumerate(sys.argv[1:]):\n"
        "    if p.endswith('anno06.mat'):\n"
        "        os.abort()\n"
        "    print(i, flush=True)\n"
    )
    monkeypatch.setattr(matfile, "_PROBE", dies_on_06)
    assert matfile.crashing_files(paths) == {paths[1]}
    loader = matfile.MatLoader(isolate=True)
    loader.check(paths)
    with pytest.raises(FormatError, match="anno06.mat: .*crashed on it"):
        loader.load(paths[1])
    assert loader.load(paths[0])["x"].shape == (1, 2) and loader.load(paths[2])["x"].shape == (1, 2)
