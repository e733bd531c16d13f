"""Body orientation as an optional per-person input: types, readers, features (spec v2) and the runtime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import FormatError, InputError
from pairedge.core.features import get_spec
from pairedge.core.features import orientation as ori
from pairedge.core.types import Detections
from pairedge.runtime.config import ValidationConfig
from pairedge.runtime.validate import validate_detections

PI = np.pi


def test_pair_values_face_to_face_queue_side_by_side() -> None:
    u = np.array([[1.0, 0.0]] * 3)  # B to the right of A
    right, left, down = np.array([1.0, 0.0]), np.array([-1.0, 0.0]), np.array([0.0, 1.0])
    fa = np.stack([right, right, down])
    fb = np.stack([left, right, down])
    one = np.ones(3)
    v = ori.pair_values(fa, one, fb, one, u)
    names = {n: i for i, n in enumerate(ori.PAIR_NAMES)}
    # face to face: both face each other, opposite directions
    assert v[0, names["face_max"]] == v[0, names["face_min"]] == 1 and v[0, names["facing_cos"]] == -1
    assert v[0, names["facing_angle"]] == pytest.approx(1.0)
    # queue: same direction, B along A's facing; A faces B, B faces away
    assert v[1, names["facing_cos"]] == 1 and v[1, names["facing_along"]] == 1
    assert v[1, names["face_max"]] == 1 and v[1, names["face_min"]] == -1
    # side by side, both facing the camera: the line between them is across their facing
    assert v[2, names["facing_along"]] == 0 and v[2, names["facing_cos"]] == 1
    # swapping A and B leaves every value unchanged
    np.testing.assert_allclose(ori.pair_values(fb, one, fa, one, -u), v, atol=1e-12)
    # unknown on one side: all zeros, mask 0
    w = ori.pair_values(fa, np.array([1.0, 0.0, 0.5]), fb, one, u)
    assert (w[1] == 0).all() and w[2, names["orientation_known"]] == 0.5


def test_cad_bins_and_shoulders() -> None:
    angle, conf = ori.from_cad_bins(np.array([1, 3, 5, 7, 8, -1, 0, 9]))
    expect = np.array([0, PI / 2, PI, -PI / 2, -PI / 4])
    np.testing.assert_allclose(np.cos(angle[:5]), np.cos(expect), atol=1e-6)
    np.testing.assert_allclose(np.sin(angle[:5]), np.sin(expect), atol=1e-6)
    assert np.isnan(angle[5:]).all() and conf.tolist() == [1, 1, 1, 1, 1, 0, 0, 0]
    # facing the camera: the right shoulder appears left in the image -> pi/2
    a = ori.from_shoulders(
        np.array([[60, 50]]), np.array([[40, 50]]), np.array([[50, 40]]), height=np.array([80])
    )
    assert a[0] == pytest.approx(PI / 2)
    # seen from the side, nose to the left -> facing image left
    a = ori.from_shoulders(
        np.array([[50, 50]]), np.array([[50, 52]]), np.array([[40, 40]]), height=np.array([80])
    )
    assert abs(abs(a[0]) - PI) < 1e-6


def test_motion_fallback_for_walkers_only() -> None:
    vel = np.array([[1.0, 0.0], [0.01, 0.0], [0.0, -1.0]])
    facing, conf = ori.person_orientation(
        np.array([np.nan, np.nan, 0.0]), np.array([0, 0, 0.9]), vel, np.hypot(*vel.T)
    )
    np.testing.assert_allclose(facing, [[1, 0], [0, 0], [1, 0]])  # the given angle wins over the motion
    np.testing.assert_allclose(conf, [ori.MOTION_CONFIDENCE, 0, 0.9])
    # no confidences: a finite angle counts as known (1), as in Detections.from_arrays
    facing, conf = ori.person_orientation(np.array([np.nan, np.nan, 0.0]), None, vel, np.hypot(*vel.T))
    np.testing.assert_allclose(conf, [ori.MOTION_CONFIDENCE, 0, 1.0])
    np.testing.assert_allclose(facing[2], [1, 0])


def test_detections_from_arrays_orientation_checks() -> None:
    boxes = np.ones((3, 4))
    d = Detections.from_arrays(boxes, [1, 2, 3], orientation=[0.5, np.nan, 7.0 - 2 * PI])
    assert np.isnan(d.orientation[1]) and d.orientation_conf.tolist() == [1, 0, 1]
    assert d.subset(np.array([0, 2])).orientation.shape == (2,)
    with pytest.raises(InputError, match="degrees"):
        Detections.from_arrays(boxes, [1, 2, 3], orientation=[90.0, 0, 0])
    with pytest.raises(InputError, match="numbers"):
        Detections.from_arrays(boxes, [1, 2, 3], orientation=["north", "x", "y"])
    with pytest.raises(InputError, match="3 orientations"):
        Detections.from_arrays(boxes, [1, 2, 3], orientation=[0.0])
    with pytest.raises(InputError, match="confidences"):
        Detections.from_arrays(boxes, [1, 2, 3], orientation=[0, 0, 0], orientation_conf=[2, 0, 0])
    with pytest.raises(InputError, match="without orientation"):
        Detections.from_arrays(boxes, [1, 2, 3], orientation_conf=[1, 1, 1])
    many = np.ones((40, 4))
    with pytest.raises(InputError, match=r"got 2 \(1 of 40 outside\)") as err:  # one line, not the array
        Detections.from_arrays(many, orientation=np.zeros(40), orientation_conf=np.r_[np.ones(39), 2.0])
    assert "\n" not in str(err.value)


def test_runtime_validation_drops_and_reports_bad_orientations() -> None:
    boxes = np.array([[10 + 30 * k, 10, 20, 40] for k in range(4)], np.float32)
    ids = np.arange(4, dtype=np.int64)
    sc = np.ones(4, np.float32)
    bad = Detections(
        boxes,
        ids,
        sc,
        np.array([0.3, np.nan, 40.0, np.inf], np.float32),
        np.array([1, 1, 1, 0.5], np.float32),
    )
    clean, dropped = validate_detections(bad, (200, 100), ValidationConfig())
    assert len(clean) == 4  # boxes kept
    assert clean.orientation[0] == pytest.approx(0.3) and np.isnan(clean.orientation[1:]).all()
    assert clean.orientation_conf.tolist() == [1, 0, 0, 0]
    assert sum(v for k, v in dropped.items() if "orientation" in k) == 3
    wrong = Detections(boxes, ids, sc, np.array(["a", "b", "c", "d"]), None)
    clean, dropped = validate_detections(wrong, (200, 100), ValidationConfig())
    assert len(clean) == 4 and clean.orientation is None and any("not numbers" in k for k in dropped)


def _frames(with_orientation: list[bool], steps: int = 3):
    for t in range(steps):
        boxes = [[20 + 3 * t, 20, 20, 50], [60, 20, 20, 50], [100, 22, 20, 50]]
        angle = [0.0 if w else np.nan for w in with_orientation]
        yield Detections.from_arrays(boxes, [1, 2, 3], orientation=angle), t / 10


def test_spec_v2_some_people_with_orientation_others_without() -> None:
    spec = get_spec("pairedge").for_version("2")
    assert spec.stage1_dim == 31 and spec.stage2_dim == 61 and spec.person_dim == 15
    names = {n: i for i, n in enumerate(spec.stage1_names)}
    ex = spec.make_extractor({"motion": "boxes"})
    for dets, t in _frames([True, True, False]):
        f = ex.step(dets, t, (200, 100))
    known = f.stage1[:, names["orientation_known"]]
    assert f.pairs.tolist() == [[1, 2], [1, 3], [2, 3]] and known.tolist() == [1, 0, 0]
    assert f.stage1[0, names["facing_cos"]] == 1  # both face image right
    assert np.isfinite(f.stage2).all()
    # without any orientation, the version-1 columns are unchanged and the orientation block is masked
    ex1, ex2 = (
        get_spec("pairedge").for_version("1").make_extractor({"motion": "boxes"}),
        spec.make_extractor({"motion": "boxes"}),
    )
    for dets, t in _frames([False, False, False]):
        f1, f2 = ex1.step(dets, t, (200, 100)), ex2.step(dets, t, (200, 100))
    np.testing.assert_array_equal(f2.stage1[:, :25], f1.stage1)
    assert (f2.stage1[:, 25:] == 0).all()
    assert get_spec("pairedge").for_version("9") is None


def test_pipeline_step_accepts_mixed_orientation() -> None:
    from pairedge.core.bundled import default_model_dir
    from pairedge.runtime import Pipeline

    with Pipeline.load(default_model_dir(), flow="none") as pipe:
        for dets, t in _frames([True, False, True], steps=4):
            res = pipe.step(None, dets, t, image_size=(200, 100))
        assert len(res.pairs) == 3 and not res.diagnostics.dropped
        bad = Detections(dets.boxes, dets.track_ids, dets.scores, np.array([0, 99, 0], np.float32), None)
        res = pipe.step(None, bad, 1.0, image_size=(200, 100))
        assert len(res.pairs) == 3 and any("orientation" in k for k in res.diagnostics.dropped)


def test_mot_and_jrdb_orientation_fields(tmp_path: Path) -> None:
    from pairedge.core.io.jrdb import read_jrdb
    from pairedge.core.io.mot import read_mot

    mot = tmp_path / "gt.txt"
    mot.write_text(
        "1,1,10,10,20,40,1,-1,-1,-1,1.5,0.8\n1,2,50,10,20,40,1,-1,-1,-1,0.5,0\n1,3,90,10,20,40,1\n"
    )
    d = read_mot(mot).by_frame()[1]
    assert d.orientation[0] == pytest.approx(1.5) and np.isnan(d.orientation[1:]).all()
    assert d.orientation_conf.tolist() == pytest.approx([0.8, 0, 0])
    doc = {
        "labels": {
            "000001.jpg": [
                {"label_id": "pedestrian:1", "box": [1, 2, 3, 4], "orientation": 1.0},
                {"label_id": "pedestrian:2", "box": [5, 2, 3, 4]},
            ]
        }
    }
    path = tmp_path / "a.json"
    path.write_text(json.dumps(doc))
    people = read_jrdb(path)[0].people
    assert people.orientation[0] == pytest.approx(1.0) and np.isnan(people.orientation[1])
    from pairedge.core.io.jrdb import write_jrdb

    write_jrdb(tmp_path / "b.json", read_jrdb(path))  # the writer keeps the orientation
    again = read_jrdb(tmp_path / "b.json")[0].people
    assert again.orientation[0] == pytest.approx(1.0) and np.isnan(again.orientation[1])
    doc["labels"]["000001.jpg"][0]["orientation"] = 90
    path.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match="radians"):
        read_jrdb(path)
    doc["labels"]["000001.jpg"][0]["orientation"] = "north"
    path.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match="finite number"):
        read_jrdb(path)
    doc["labels"]["000001.jpg"][0]["orientation"] = 10**400  # beyond float: not an OverflowError
    path.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match="finite number"):
        read_jrdb(path)


@pytest.mark.data
def test_cad_reader_fills_orientation(shared_data: Path) -> None:
    from pairedge.core.io.cad import read_cad_mat

    seq = read_cad_mat(shared_data / "cad_choi" / "annotations" / "anno01.mat")
    d = seq.detections(10)
    assert d.orientation is not None and np.isfinite(d.orientation).any()
    assert seq.detections(10, orientation=False).orientation is None


def test_orientation_input_ignore_computes_as_if_none_were_given() -> None:
    """A model trained without orientation records ``orientation_input="ignore"``: its extractor never feeds
    a given orientation to the orientation columns (the motion-direction fallback instead)."""
    import numpy as np
    from pairedge.core.features import get_spec
    from pairedge.core.types import Detections

    rng = np.random.default_rng(0)
    boxes = np.array([[10, 20, 30, 80], [60, 22, 30, 78], [120, 25, 28, 75]], np.float32)
    with_ori = Detections.from_arrays(boxes, np.array([1, 2, 3]), orientation=rng.uniform(-3, 3, 3))
    without = Detections.from_arrays(boxes, np.array([1, 2, 3]))
    spec = get_spec("pairedge")
    ignore = spec.make_extractor({"motion": "boxes", "orientation_input": "ignore"})
    plain = spec.make_extractor({"motion": "boxes"})
    use = spec.make_extractor({"motion": "boxes"})
    for t in (0.0, 1 / 30, 2 / 30):
        a = ignore.step(with_ori, t, (320, 240))
        b = plain.step(without, t, (320, 240))
        c = use.step(with_ori, t, (320, 240))
    assert np.array_equal(a.stage2, b.stage2) and np.array_equal(a.stage1, b.stage1)
    assert not np.array_equal(c.stage2, b.stage2)  # "use" (the default) does read it


def test_cad_features_without_orientation_record_it_for_the_runtime(shared_data) -> None:
    import json

    import pytest

    pytest.importorskip("scipy")
    from pairedge.core.io.cad import read_cad_dir
    from pairedge.export.datasets.cad import cad_features

    seqs = read_cad_dir(shared_data / "cad_choi" / "annotations")[:1]
    data = cad_features(seqs, stage=2, orientation=False)
    assert json.loads(data.feature_config)["orientation_input"] == "ignore"
    assert "orientation_input" not in json.loads(cad_features(seqs, stage=2, orientation=True).feature_config)


def test_frame_pair_values_equal_box_pair_values():
    """The gathered-columns version used per frame gives the definition's values (unknown facings
    included)."""
    rng = np.random.default_rng(4)
    n = 12
    boxes = np.column_stack([rng.uniform(0, 600, (n, 2)), rng.uniform(10, 60, n), rng.uniform(40, 160, n)])
    angle = rng.uniform(-np.pi, np.pi, n)
    facing = (np.stack([np.cos(angle), np.sin(angle)], axis=1), rng.choice([0.0, 0.4, 1.0], n))
    facing[0][facing[1] == 0] = 0.0
    ia, ib = np.triu_indices(n, k=1)
    for width in (None, 640.0):
        want = ori.box_pair_values(boxes, facing, ia, ib, width)
        got = np.stack(ori.frame_pair_values(boxes, facing, ia, ib, width), axis=1)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
        assert (want[:, -1] == 0).any() and (want[:, -1] > 0).any()
