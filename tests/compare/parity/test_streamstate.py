"""The state an exact replay needs: per-frame decisions (``Pipeline.step(state=)``), the stream state at a
point (``Pipeline.snapshot`` / ``restore``, :mod:`pairedge.runtime.streamstate`), and how a pack stores and
checks them (layout v3)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pairedge.apps.evaluation.sources import parse_scene
from pairedge.compare.parity import load_pack, save_pack
from pairedge.compare.parity.build import build_pack
from pairedge.compare.parity.check import gate_threshold
from pairedge.core.bundled import default_model_dir
from pairedge.core.errors import FormatError, InputError
from pairedge.runtime.pipeline import Pipeline
from pairedge.runtime.streamstate import FrameState, capture, decode, encode, restore


def _arrays(pack: Path) -> dict[str, np.ndarray]:
    with np.load(pack, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def _write(dst: Path, data: dict[str, np.ndarray]) -> Path:
    np.savez(dst, **data)  # type: ignore[arg-type]
    return dst


@pytest.fixture(scope="module")
def mid_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Frames 6-11 of static:0 (ground-truth boxes): a clip that starts mid-stream."""
    out = tmp_path_factory.mktemp("mid") / "mid.npz"
    build_pack(default_model_dir(), parse_scene("static:0", 12), out, frames=6, start=6)
    return out


# -- values and objects ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    [None, True, 3, -(2**40), 0.1, math.inf, -math.inf, "x", [1, 2.5, None], (1, (2.0,)), {3: 4, "a": [0.5]}],
)
def test_encode_round_trips_exactly(value: object) -> None:
    text = json.dumps(encode(value), allow_nan=False)  # strict JSON: NaN / inf as hex
    back = decode(json.loads(text))
    assert back == value and type(back) is type(value)


def test_encode_keeps_nan_and_refuses_other_objects() -> None:
    assert math.isnan(decode(encode(float("nan"))))
    assert decode(encode(np.float32(0.5))) == 0.5
    with pytest.raises(TypeError):
        encode(object())
    for bad in ({"f": "zz"}, {"what": 1}, {"dict": [[[1], 2]]}):
        with pytest.raises(InputError, match="not an encoded value"):
            decode(bad)


class _Inner:
    def __init__(self) -> None:
        self.buf = np.arange(3.0)
        self.slots = {1: 2}


class _Outer:
    def __init__(self) -> None:
        self.inner = _Inner()
        self.count = 0
        self.last: float | None = None
        self.config = dataclasses.make_dataclass("C", [("x", int)], frozen=True)(1)  # configuration: left out
        self.fn = len  # a callable: left out


def test_capture_and_restore_an_object() -> None:
    a = _Outer()
    a.inner.buf = np.arange(5.0) * 2
    a.inner.slots = {7: 1}
    a.count, a.last = 4, 1.25
    values, arrays = capture(a, "x")
    assert sorted(arrays) == ["x.inner.buf"] and sorted(values) == ["x.count", "x.inner.slots", "x.last"]
    b = _Outer()
    restore(b, "x", values, arrays)
    assert np.array_equal(b.inner.buf, a.inner.buf) and b.inner.buf is not a.inner.buf
    assert (b.inner.slots, b.count, b.last) == ({7: 1}, 4, 1.25)


def test_restore_refuses_state_that_does_not_fit() -> None:
    values, arrays = capture(_Outer(), "x")
    with pytest.raises(InputError, match="do not match"):
        restore(_Outer(), "x", {**values, "x.extra": 1}, arrays)
    with pytest.raises(InputError, match="float64 with 1"):
        restore(_Outer(), "x", values, {"x.inner.buf": np.zeros((2, 2), np.int32)})
    with pytest.raises(InputError, match="recorded str"):
        restore(_Outer(), "x", {**values, "x.count": "many"}, arrays)


# -- the pipeline hooks -------------------------------------------------------------------------------------
def _frames(n: int, preset: str = "static:0", boxes: str = "truth") -> list:
    src = parse_scene(preset, n, boxes)
    return list(src.open(("walking_together", "standing_together", "sitting_together")))


def test_given_state_replaces_the_monitors() -> None:
    """Box shape ignored and thresholds from the state; the monitors neither decide nor change."""
    frames = _frames(3)
    with Pipeline.load(default_model_dir()) as pipe:
        plain = [pipe.step(f.image, f.detections, f.timestamp) for f in frames]
        assert not pipe.frame_state().box_shape_ignored
        pipe.reset()
        given = FrameState(True, 0.44, 0.0, 0.0)  # gate always open, no confirmation
        out = [pipe.step(f.image, f.detections, f.timestamp, state=given) for f in frames]
        assert pipe.frame_state() == dataclasses.replace(given, aspect=0.44)
        assert pipe.fixed_ratio_detector == 0.44 and not pipe.box_shape.monitor.fixed
        assert pipe.describe()["tau_interact"] == 0.0
    assert all((r.label_ids >= 0).all() for r in out[1:]) and len(out[-1].pairs) == len(plain[-1].pairs)


def test_snapshot_and_restore_continue_the_stream() -> None:
    """Frames 8-13 after a restore at 8 give the results of the uninterrupted stream, bit for bit (and
    differ without the restore: the test can fail)."""
    frames = _frames(14, "moving:4100")  # ids given: the tracker is not part of the state
    with Pipeline.load(default_model_dir()) as pipe:
        whole, states = [], []
        for f in frames:
            whole.append(pipe.step(f.image, f.detections, f.timestamp))
            states.append(pipe.frame_state())
        pipe.reset()
        for f in frames[:8]:
            pipe.step(f.image, f.detections, f.timestamp)
        snap = pipe.snapshot()
        assert snap.flow_primed and "extractor.history.pos" in snap.arrays and "smoother._p" in snap.arrays
    with Pipeline.load(default_model_dir()) as other:
        for restored in (True, False):
            if restored:
                other.restore(snap, frames[7].image)
            else:
                other.reset()
            same = []
            for f, w, st in zip(frames[8:], whole[8:], states[8:], strict=True):
                r = other.step(f.image, f.detections, f.timestamp, state=st)
                same.append(
                    np.array_equal(r.pairs, w.pairs)
                    and np.array_equal(r.p_interact, w.p_interact)
                    and np.array_equal(r.probs, w.probs)
                    and np.array_equal(r.label_ids, w.label_ids)
                )
            assert all(same) if restored else not all(same)
        with pytest.raises(InputError, match="previous frame"):
            other.restore(snap, None)


def _table(states: tuple[FrameState, ...]) -> np.ndarray:
    return np.array([dataclasses.astuple(s) for s in states], np.float64)


# -- the pack
# -------------------------------------------------------------------------------------------------
def test_mid_stream_pack_round_trips(mid_pack: Path, tmp_path: Path) -> None:
    pk = load_pack(mid_pack)
    assert pk.reference["start"] == 6 and pk.num_frames == 6 and pk.snapshot is not None
    again = load_pack(save_pack(pk, tmp_path / "copy.npz"))
    assert again.snapshot.values == pk.snapshot.values
    assert np.array_equal(_table(again.frame_states), _table(pk.frame_states), equal_nan=True)
    assert sorted(again.snapshot.arrays) == sorted(pk.snapshot.arrays)
    for k, v in pk.snapshot.arrays.items():
        np.testing.assert_array_equal(again.snapshot.arrays[k], v)  # NaN (an open-gate time unset) == NaN
        assert again.snapshot.arrays[k].dtype == v.dtype
    assert np.array_equal(again.lead_image(), pk.lead_image())


def test_per_row_thresholds_only_when_they_change(pack_path: Path) -> None:
    pk = load_pack(pack_path)
    assert gate_threshold(pk) == pk.frame_states[0].tau_interact
    states = tuple(
        dataclasses.replace(s, tau_interact=0.55 if k < 6 else 0.65) for k, s in enumerate(pk.frame_states)
    )
    tau = gate_threshold(dataclasses.replace(pk, frame_states=states))
    assert isinstance(tau, np.ndarray) and np.array_equal(tau, np.where(pk.rows.frame < 6, 0.55, 0.65))


def test_older_layout_is_refused_saying_why(pack_path: Path, tmp_path: Path) -> None:
    data = _arrays(pack_path)
    data["version"] = np.array(2, np.int64)
    with pytest.raises(FormatError, match="version 2.*do not record.*make the pack again"):
        load_pack(_write(tmp_path / "v2.npz", data))


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (
            lambda d: d.__setitem__("frame_box_shape", np.full(len(d["timestamps"]), 2, np.int8)),
            "frame_box_shape",
        ),
        (lambda d: d.__setitem__("frame_aspect", np.full(len(d["timestamps"]), 0.44)), "frame_aspect"),
        (
            lambda d: d.__setitem__("frame_tau_interact", np.full(len(d["timestamps"]), np.nan)),
            "frame_tau_interact",
        ),
        (lambda d: d.__setitem__("frame_confirm_s", np.full(len(d["timestamps"]), 1e9)), "frame_confirm_s"),
        (lambda d: d.__setitem__("frame_confirm_s", np.zeros(1)), "expected shape"),
        (lambda d: d.__setitem__("state:extractor.x", np.zeros(3)), "no stream state"),
        (lambda d: d.__setitem__("lead_png", np.frombuffer(b"not a png", np.uint8)), "not a PNG"),
    ],
)
def test_corrupt_frame_states_are_refused(pack_path: Path, tmp_path: Path, edit: Any, match: str) -> None:
    data = _arrays(pack_path)
    edit(data)
    with pytest.raises(FormatError, match=match):
        load_pack(_write(tmp_path / "bad.npz", data))


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda s, d: s.update(flow_primed="yes"), "flow_primed"),
        (lambda s, d: s["values"].update({"no such/path": 1}), "not an attribute path"),
        (lambda s, d: s["values"].update({"clock.t0": {"f": "zz"}}), "not an encoded value"),
        (lambda s, d: d.__setitem__("lead_png", np.zeros(0, np.uint8)), "no frame before the clip"),
        (lambda s, d: d.__setitem__("state:extractor.last_ego", np.array(["a"])), "expected numbers"),
    ],
)
def test_corrupt_stream_state_is_refused(mid_pack: Path, tmp_path: Path, edit: Any, match: str) -> None:
    data = _arrays(mid_pack)
    state = json.loads(str(data["stream_state"]))
    edit(state, data)
    data["stream_state"] = np.array(json.dumps(state))
    with pytest.raises(FormatError, match=match):
        load_pack(_write(tmp_path / "bad.npz", data))


def test_stream_state_of_another_layout_is_one_clear_error(mid_pack: Path, tmp_path: Path) -> None:
    """A state array the extractor does not keep (another pairedge): refused before any frame is compared."""
    from pairedge.compare.parity import check_pack

    data = _arrays(mid_pack)
    data["state:extractor.history.unknown"] = np.zeros(3)
    with pytest.raises(InputError, match="stream state of extractor.*make the pack with this pairedge"):
        check_pack(_write(tmp_path / "other.npz", data), default_model_dir())
