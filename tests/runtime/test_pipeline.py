"""The streaming pipeline end to end on tiny ONNX models of both feature specs."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnx
import pytest
from pairedge.core.bundled import default_model_dir
from pairedge.core.errors import FormatError, InputError, ModelError
from pairedge.core.features import get_spec
from pairedge.core.types import Detections
from pairedge.measure.sim import Scene
from pairedge.runtime import FlowConfig, FrameResult, Pipeline, PipelineConfig, SmoothingConfig
from pairedge.runtime.flow import FlowStream, get_flow_backend
from pairedge.runtime.pipeline import STAGES, softmax
from pairedge.runtime.runner.inputs import FrameSource, iso_bmff_problem, read_detections
from pairedge.runtime.runner.run import resolve_model
from pairedge.runtime.runner.stats import MAX_REASONS, RunStats
from pairedge.runtime.validate import cap_people
from rt_onnx_models import toy_metadata, toy_proto, toy_weights, write_toy_model
from rt_scenes import scene

SPECS = ["liang2026", "pairedge"]
NO_SMOOTHING = PipelineConfig(smoothing=SmoothingConfig(alpha=1.0))


def _model_dir(tmp_path: Path, spec: str, **stage1_overrides: object) -> tuple[Path, object, object]:
    folder = tmp_path / spec
    w1 = write_toy_model(folder / "stage1.onnx", stage=1, spec_name=spec, seed=1, **stage1_overrides)
    w2 = write_toy_model(folder / "stage2.onnx", stage=2, spec_name=spec, seed=2)
    return folder, w1, w2


@pytest.mark.parametrize("spec", SPECS)
def test_load_picks_the_flow_of_the_spec(tmp_path: Path, spec: str) -> None:
    folder, _, _ = _model_dir(tmp_path, spec)
    with Pipeline.load(folder) as pipe:
        expected = get_spec(spec)
        assert pipe.flow is not None and pipe.flow.name == expected.flow_backend
        assert pipe.flow.scale == expected.default_flow_scale
        assert pipe.labels == ("walking_together", "standing_together", "sitting_together")
        assert pipe.tau_interact == 0.5 and pipe.stage1.is_active
        assert pipe.describe()["feature_spec"].startswith(spec)
    assert not pipe.stage1.is_active


def test_load_accepts_two_files_and_flow_overrides(tmp_path: Path) -> None:
    folder, _, _ = _model_dir(tmp_path, "liang2026")
    config = PipelineConfig(tau_interact=0.3)
    with Pipeline.load([folder / "stage1.onnx", folder / "stage2.onnx"], flow="dis", config=config) as pipe:
        assert pipe.flow is not None and pipe.flow.name == "dis" and pipe.tau_interact == 0.3
    with Pipeline.load(folder, flow="none") as pipe:
        assert pipe.flow is None
    custom = get_flow_backend("dis", preset="ultrafast", scale=0.25)
    with Pipeline.load(folder, flow=custom) as pipe:
        assert pipe.flow is custom


def test_bad_model_directories(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="model directory"):
        Pipeline.load(tmp_path / "absent")
    write_toy_model(tmp_path / "a" / "stage1.onnx", stage=1)
    with pytest.raises(ModelError, match="not found"):
        Pipeline.load(tmp_path / "a")
    write_toy_model(tmp_path / "a" / "stage2.onnx", stage=2, spec_name="pairedge")
    with pytest.raises(ModelError, match="same spec"):
        Pipeline.load(tmp_path / "a")
    write_toy_model(tmp_path / "b" / "stage1.onnx", stage=2)
    write_toy_model(tmp_path / "b" / "stage2.onnx", stage=2)
    with pytest.raises(ModelError, match="stage-1 model"):
        Pipeline.load(tmp_path / "b")


@pytest.mark.parametrize("spec", SPECS)
def test_results_match_a_manual_reference(tmp_path: Path, spec: str) -> None:
    """Same features, same flow, numpy classifiers: the pipeline's wiring must agree exactly."""
    folder, w1, w2 = _model_dir(tmp_path, spec)
    extractor = get_spec(spec).make_extractor()
    with Pipeline.load(folder, config=NO_SMOOTHING) as pipe:
        flow_ref = get_flow_backend(pipe.flow.name, scale=pipe.flow.scale) if pipe.flow else None
        previous = None
        for f in scene(people=5, frames=5):
            result = pipe.step(f.image, f.detections, f.timestamp)
            gray = cv2.cvtColor(f.image, cv2.COLOR_BGR2GRAY)
            flow = flow_ref.compute(previous, gray).copy() if previous is not None else None
            previous = gray
            feats = extractor.step(f.detections, f.timestamp, (320, 240), flow, pipe.flow.scale)
            p = softmax(w1.reference(feats.stage1))[:, 1]
            np.testing.assert_array_equal(result.pairs, feats.pairs)
            np.testing.assert_allclose(result.p_interact, p, atol=1e-5)
            gated = p >= pipe.tau_interact
            assert (result.interacting == gated).all()
            probs = softmax(w2.reference(feats.stage2[gated]))
            np.testing.assert_allclose(result.probs[gated], probs, atol=1e-5)
            assert (result.label_ids[gated] == probs.argmax(axis=1)).all()
            assert (result.label_ids[~gated] == -1).all() and (result.probs[~gated] == 0).all()


def test_one_batched_call_per_stage_and_one_flow_per_frame(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, _, _ = _model_dir(tmp_path, "pairedge", thresholds={"p_interact": 0.3, "tau_group": 0.5})
    with Pipeline.load(folder) as pipe:
        calls: dict[str, list[int]] = {"stage1": [], "stage2": [], "flow": []}
        for name, backend in (("stage1", pipe.stage1), ("stage2", pipe.stage2)):
            original = backend._infer
            monkeypatch.setattr(
                backend, "_infer", lambda x, o=original, n=name: calls[n].append(len(x)) or o(x)
            )
        flow_original = pipe.flow._flow
        monkeypatch.setattr(pipe.flow, "_flow", lambda *a: calls["flow"].append(1) or flow_original(*a))
        gated_total = 0
        for f in scene(people=8, frames=6):
            result = pipe.step(f.image, f.detections, f.timestamp)
            gated_total += int(result.interacting.sum())
        assert calls["stage1"] == [28] * 6
        assert len(calls["stage2"]) <= 6 and sum(calls["stage2"]) == gated_total > 0
        assert len(calls["flow"]) == 5  # no flow for the first frame


def test_frame_result_fields_and_json(tmp_path: Path) -> None:
    folder, _, _ = _model_dir(tmp_path, "pairedge", thresholds={"p_interact": 0.0, "tau_group": 0.0})
    with Pipeline.load(folder) as pipe:
        results = [pipe.step(f.image, f.detections, f.timestamp) for f in scene(people=4, frames=3)]
    r = results[-1]
    assert isinstance(r, FrameResult) and r.frame_index == 2 and r.timestamp == pytest.approx(0.2)
    assert r.pairs.shape == (6, 2) and r.interacting.all()  # gate at 0: every pair interacts
    np.testing.assert_allclose(r.probs.sum(axis=1), 1.0, atol=1e-5)
    assert set(STAGES) | {"total"} == set(r.timings_ms) and r.timings_ms["total"] > 0
    assert r.timings_ms["total"] >= max(v for k, v in r.timings_ms.items() if k != "total")
    assert len(r.groups) == 1 and r.groups[0].members == (1, 2, 3, 4)
    assert results[0].diagnostics.notes and "no previous frame" in results[0].diagnostics.notes[0]
    doc = r.to_json_dict()
    assert set(doc) >= {"frame", "timestamp", "interactions", "groups"}
    first = doc["interactions"][0]
    assert set(first) == {"ids", "label", "p_interact", "probs"} and first["ids"][0] < first["ids"][1]
    assert first["label"] in r.labels and len(first["probs"]) == 3
    assert set(doc["groups"][0]) == {"members", "activity", "vote_share"}
    assert r.interactions[0].ids == tuple(first["ids"])


def test_tracker_assigns_ids_when_detections_have_none(tmp_path: Path) -> None:
    folder, _, _ = _model_dir(tmp_path, "liang2026")
    with Pipeline.load(folder, flow="dis") as pipe:
        seen = []
        for f in scene(people=4, frames=5, seed=1):  # seed 1: no two boxes overlap
            anonymous = Detections.from_arrays(f.detections.boxes)
            result = pipe.step(f.image, anonymous, f.timestamp)
            seen.append(result.track_ids.tolist())
            assert len(result.pairs) == 6
    assert all(ids == seen[0] for ids in seen) and min(seen[0]) >= 1


def test_bad_input_never_raises(tmp_path: Path) -> None:
    folder, _, _ = _model_dir(tmp_path, "pairedge")
    frames = list(scene(people=3, frames=4))
    with Pipeline.load(folder) as pipe:
        good = pipe.step(frames[0].image, frames[0].detections, 0.0)
        assert good.diagnostics.frame_dropped is None
        boxes = np.vstack(
            [frames[1].detections.boxes, [[np.nan, 0, 10, 10], [5, 5, -3, 10], [1e9, 0, 10, 10]]]
        )
        ids = np.array([1, 2, 3, 4, 5, 1])
        bad = Detections.from_arrays(boxes, ids)
        r = pipe.step(frames[1].image.astype(np.float32), bad, float("nan"))
        assert r.diagnostics.frame_dropped is not None and "uint8" in r.diagnostics.frame_dropped
        assert sum(r.diagnostics.dropped.values()) == 3 and r.track_ids.tolist() == [1, 2, 3]
        assert any("timestamp" in n for n in r.diagnostics.notes) and r.timestamp > 0
        r = pipe.step("not an image", "not detections", 0.05)  # type: ignore[arg-type]
        assert len(r.pairs) == 0 and r.diagnostics.dropped
        r = pipe.step(frames[2].image, frames[2].detections, 0.01)  # decreasing timestamp is repaired
        assert r.timestamp > 0.05 and len(r.pairs) == 3
        r = pipe.step(frames[3].image[:, :100], frames[3].detections, 0.4)  # resolution change
        assert r.diagnostics.frame_dropped is None and len(r.track_ids) <= 3


def test_box_only_mode_needs_no_frames(tmp_path: Path) -> None:
    folder, _, _ = _model_dir(tmp_path, "pairedge")
    config = PipelineConfig(features={"motion": "boxes"})
    with Pipeline.load(folder, config=config) as pipe:
        assert pipe.flow is None
        for k, f in enumerate(scene(people=3, frames=4)):
            r = pipe.step(None, f.detections, f.timestamp, image_size=(320, 240) if k == 0 else None)
            assert len(r.pairs) == 3 and r.diagnostics.clean and r.timings_ms["flow"] < 1.0


def test_flow_buffers_are_reused_between_frames(tmp_path: Path) -> None:
    folder, _, _ = _model_dir(tmp_path, "pairedge")
    with Pipeline.load(folder) as pipe:
        frames = list(scene(people=3, frames=5))
        pipe.step(frames[0].image, frames[0].detections, 0.0)
        pipe.step(frames[1].image, frames[1].detections, 0.1)
        slots = [id(s) for s in pipe._stream._slots]
        out = id(pipe.flow._out)
        for f in frames[2:]:
            pipe.step(f.image, f.detections, f.timestamp)
        assert [id(s) for s in pipe._stream._slots] == slots and id(pipe.flow._out) == out


def test_reset_and_independent_instances(tmp_path: Path) -> None:
    folder, _, _ = _model_dir(tmp_path, "pairedge")
    frames = list(scene(people=3, frames=3))
    with Pipeline.load(folder) as a, Pipeline.load(folder) as b:
        for f in frames:
            ra = a.step(f.image, f.detections, f.timestamp)
        rb0 = b.step(frames[0].image, frames[0].detections, 0.0)
        a.reset()
        ra0 = a.step(frames[0].image, frames[0].detections, 0.0)
        np.testing.assert_allclose(ra0.p_interact, rb0.p_interact, atol=1e-6)
        assert len(ra.pairs) == 3


def test_softmax_and_interaction_probability_are_stable() -> None:
    from pairedge.runtime.decisions import interact_probability

    logits = np.array([[1000.0, -1000.0], [0.0, 0.0], [-5.0, 5.0]], np.float32)
    p = softmax(logits)
    assert p.dtype == np.float32 and np.isfinite(p).all()
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(interact_probability(logits), p[:, 1], atol=1e-6)
    np.testing.assert_allclose(interact_probability(np.array([[0.0], [50.0]], np.float32)), [0.5, 1.0])
    assert logits[0, 0] == 1000.0  # input untouched


# -- rt_close_flow: Pipeline.close releases the flow backend it built (a CUDA flow holds GPU memory), not one
# it was given.


class _Closable:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_close_releases_a_flow_backend_load_made_but_not_a_given_one(monkeypatch) -> None:
    model = resolve_model(None)
    with Pipeline.load(model) as pipe:
        assert pipe.flow is not None
        probe = _Closable()
        monkeypatch.setattr(pipe.flow, "close", probe.close, raising=False)
    assert probe.closed == 1
    given = get_flow_backend("dis", scale=0.5)
    probe = _Closable()
    monkeypatch.setattr(given, "close", probe.close, raising=False)
    with Pipeline.load(model, flow=given):
        pass
    assert probe.closed == 0


def test_a_failed_load_closes_the_flow_backend_it_made(monkeypatch) -> None:
    import pytest
    from pairedge.core.errors import InputError
    from pairedge.runtime import pipeline as pipeline_module

    made: list[_Closable] = []
    real = pipeline_module.make_flow_backend

    def make(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - wraps the real factory
        backend = real(*args, **kwargs)
        probe = _Closable()
        monkeypatch.setattr(backend, "close", probe.close, raising=False)
        made.append(probe)
        return backend

    monkeypatch.setattr(pipeline_module, "make_flow_backend", make)
    with pytest.raises(InputError, match="unknown classifier backend"):
        Pipeline.load(resolve_model(None), backend="no-such-backend")
    assert [p.closed for p in made] == [1]


# -- rt_pair_radius: PipelineConfig.pair_radius: far pairs skipped (features, classifiers, results), checked,
# liang2026 refused.


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), True, "3"])
def test_pair_radius_must_be_a_positive_number(bad) -> None:
    with pytest.raises(InputError, match="pair_radius"):
        PipelineConfig(pair_radius=bad)


def test_far_pairs_are_not_in_the_results_and_near_ones_are_unchanged() -> None:
    frames = list(Scene("surveillance", 1000).frames(40))
    results = {}
    for radius in (None, 2.0):
        with Pipeline.load(default_model_dir(), config=PipelineConfig(pair_radius=radius)) as pipe:
            results[radius] = [pipe.step(f.image, f.truth, f.timestamp) for f in frames]
    fewer = 0
    for full, near in zip(results[None], results[2.0], strict=True):
        row = {int(k): n for n, k in enumerate(full.track_ids.tolist())}
        b = full.boxes.astype(np.float64)
        c = b[:, :2] + b[:, 2:] / 2
        want = []
        for a, x in full.pairs.tolist():
            i, j = row[a], row[x]
            if np.hypot(*(c[j] - c[i])) <= 2.0 * max((b[i, 3] + b[j, 3]) / 2, 1e-6):
                want.append((a, x))
        assert [tuple(p) for p in near.pairs.tolist()] == want
        fewer += len(full.pairs) - len(near.pairs)
    assert fewer > 0


def test_liang2026_models_are_refused() -> None:
    """The paper's spec computes every pair: a radius there is an error, not silently ignored."""
    from pairedge.core.features import get_spec
    from pairedge.runtime.pipeline import apply_pair_radius

    extractor = get_spec("liang2026").make_extractor()
    with pytest.raises(InputError, match="pair_radius: the 'liang2026' feature spec computes every pair"):
        apply_pair_radius(extractor, "liang2026", 3.0)
    apply_pair_radius(extractor, "liang2026", None)  # no radius: nothing to refuse
    mine = get_spec("pairedge").make_extractor()
    apply_pair_radius(mine, "pairedge", 4)
    assert mine.pair_radius == 4.0


# -- rt_bounds: Regression tests of issue 9: inputs that made ``Pipeline.step`` raise, non-finite model
# outputs, and the bound on the work per frame (``PipelineConfig.max_people``). Timings live in
# ``benchmarks/bench_soak.py``.


def _models(tmp_path: Path, spec: str = "pairedge", **stage1: object) -> Path:
    folder = tmp_path / spec
    write_toy_model(folder / "stage1.onnx", stage=1, spec_name=spec, seed=1, **stage1)
    write_toy_model(folder / "stage2.onnx", stage=2, spec_name=spec, seed=2)
    return folder


def _two_people() -> Detections:
    return Detections.from_arrays(np.array([[1, 1, 5, 8], [8, 2, 5, 8]], np.float32), np.array([1, 2]))


@pytest.fixture
def pipe(tmp_path: Path) -> Any:
    with Pipeline.load(_models(tmp_path), flow="dis") as p:
        yield p


def test_consecutive_tiny_frames_give_no_flow_with_the_reason(pipe: Pipeline) -> None:
    image = np.full((20, 20, 3), 90, np.uint8)
    for t in (0.0, 0.1, 0.2):
        result = pipe.step(image, _two_people(), t)
        assert any("below the 12 px per side" in n for n in result.diagnostics.notes)
        assert result.diagnostics.stage_error is None and len(result.track_ids) == 2
    frames = list(scene(people=3, frames=2))  # the flow comes back at a usable size
    pipe.step(frames[0].image, frames[0].detections, 1.0)
    assert pipe.step(frames[1].image, frames[1].detections, 1.1).diagnostics.notes == ()


@pytest.mark.parametrize("spec", ["pairedge", "liang2026"])
def test_a_tiny_flow_scale_never_raises(tmp_path: Path, spec: str) -> None:
    config = PipelineConfig(flow=FlowConfig(scale=0.01))
    with Pipeline.load(_models(tmp_path, spec), flow="dis", config=config) as pipe:
        for f in scene(people=3, frames=3):
            result = pipe.step(f.image, f.detections, f.timestamp)
            assert "3x2 px" in result.diagnostics.notes[0] and len(result.pairs) == 3


def test_flow_backend_refuses_and_stream_reports_too_small_frames() -> None:
    backend = get_flow_backend("dis", preset="ultrafast", scale=0.5)
    small = np.zeros((20, 20), np.uint8)
    assert backend.size_problem(20, 20) is not None and backend.size_problem(24, 24) is None
    with pytest.raises(InputError, match="at least 12 px"):
        backend.compute(small, small)
    stream = FlowStream(backend)
    assert stream.push(small) is None and stream.push(small) is None
    assert stream.reason is not None and "10x10 px" in stream.reason


class _Raising:
    """A detections-like object whose attribute access raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    @property
    def boxes(self) -> np.ndarray:
        raise self.error


class _BadArray:
    def __array__(self, *args: object, **kwargs: object) -> np.ndarray:
        raise KeyError("no array here")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"timestamp": 10**400},
        {"timestamp": "soon"},
        {"timestamp": float("nan")},
        {"frame_index": "abc"},
        {"frame_index": 2.5},
        {"frame_index": [1]},
        {"image_size": ("a", 3)},
        {"image_size": (0, 10)},
        {"image_size": (10**400, 10)},
        {"image_size": 7},
        {"detections": _Raising(RuntimeError("boom"))},
        {"detections": _Raising(KeyError("k"))},
        {"detections": _Raising(ZeroDivisionError())},
        {"detections": Detections(_BadArray(), np.zeros(0), np.zeros(0))},  # type: ignore[arg-type]
    ],
)
def test_malformed_arguments_are_repaired_or_dropped_and_reported(pipe: Pipeline, kwargs: dict) -> None:
    args: dict[str, Any] = {"frame": None, "detections": _two_people(), "timestamp": 1.0}
    args["image_size"] = (64, 48)
    pipe.step(**args)  # a known image size and time before the bad call
    args.update(kwargs, timestamp=kwargs.get("timestamp", 2.0))
    result = pipe.step(args.pop("frame"), args.pop("detections"), args.pop("timestamp"), **args)
    diag = result.diagnostics
    assert diag.stage_error is None and np.isfinite(result.timestamp)
    assert diag.notes or diag.dropped
    again = pipe.step(None, _two_people(), 3.0, image_size=(64, 48))  # the stream goes on
    assert len(again.pairs) == 1 and again.diagnostics.stage_error is None


def test_complex_and_float32_overflowing_detections_are_dropped_without_warnings(pipe: Pipeline) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        boxes = np.array([[1, 1, 5, 8], [8, 2, 5, 8]], np.complex128)
        result = pipe.step(None, Detections(boxes, np.array([1, 2]), np.ones(2)), 0.0, image_size=(64, 48))
        assert "complex boxes" in next(iter(result.diagnostics.dropped))
        huge = np.array([[1, 1, 5, 8], [8, 2, 1e300, 8]])
        pipe2 = Pipeline(pipe.models, pipe.stage1, pipe.stage2, None)
        result = pipe2.step(None, Detections(huge, np.array([1, 2]), np.ones(2)), 0.0)
        assert result.diagnostics.dropped == {"box or score beyond the float32 range": 1}


def test_unusable_orientation_is_ignored_and_reported_not_a_stage_error(pipe: Pipeline) -> None:
    class Raising:
        boxes, track_ids, scores = (
            np.array([[1, 1, 5, 8], [8, 2, 5, 8]], np.float32),
            np.array([1, 2]),
            np.ones(2),
        )

        @property
        def orientation(self) -> Any:
            raise RuntimeError("sensor gone")

    class Complex(Raising):
        orientation = np.array([0.1, 0.2])  # type: ignore[assignment]
        orientation_conf = np.array([1 + 2j, 1])

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning either
        for dets in (Raising(), Complex()):
            result = pipe.step(None, dets, 0.0, image_size=(64, 48))
            assert result.diagnostics.stage_error is None and len(result.track_ids) == 2
            assert next(iter(result.diagnostics.dropped)).startswith("orientation ignored")


@pytest.mark.parametrize(
    "args",
    [
        ([["a", "b", "c", "d"]],),  # text boxes
        (np.ones((2, 4)), [10**30, 2]),  # ids beyond int64 (an object array)
        (np.ones((2, 4)), None, ["x", "y"]),  # text scores
        ([[1, 2, 3, 4]], [object()]),
    ],
)
def test_from_arrays_refuses_non_numbers_with_an_input_error(args: tuple[Any, ...]) -> None:
    with pytest.raises(InputError, match="detections: "):  # not ValueError / TypeError / OverflowError
        Detections.from_arrays(*args)


def test_an_unexpected_stage_exception_drops_the_frame_and_the_stream_goes_on(
    pipe: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    frames = list(scene(people=3, frames=4))
    pipe.step(frames[0].image, frames[0].detections, frames[0].timestamp)
    real = pipe.extractor.step
    monkeypatch.setattr(pipe.extractor, "step", lambda *a, **k: 1 / 0)
    failed = pipe.step(frames[1].image, frames[1].detections, frames[1].timestamp)
    assert failed.diagnostics.stage_error == "features: ZeroDivisionError"
    assert "frame dropped" in (failed.diagnostics.frame_dropped or "") and len(failed.pairs) == 0
    assert failed.to_json_dict()["diagnostics"]["stage_error"] == "features: ZeroDivisionError"
    monkeypatch.setattr(pipe.extractor, "step", real)
    ok = pipe.step(frames[2].image, frames[2].detections, frames[2].timestamp)
    assert ok.diagnostics.stage_error is None and len(ok.pairs) == 3


def test_non_finite_model_outputs_are_reported_not_silently_zero(tmp_path: Path) -> None:
    folder = _models(tmp_path)
    meta = toy_metadata(1, "pairedge")
    weights = toy_weights(meta.num_features, 2, seed=1)
    broken = type(weights)(weights.mean, np.zeros_like(weights.std), weights.weight, weights.bias)  # x / 0
    onnx.save_model(toy_proto(broken, meta), str(folder / "stage1.onnx"))
    with Pipeline.load(folder, flow="none") as pipe:
        result = pipe.step(None, _two_people(), 0.0, image_size=(64, 48))
    assert result.diagnostics.non_finite_outputs == {"stage1": 1}
    assert len(result.pairs) == 0 and not result.diagnostics.clean
    assert result.to_json_dict()["diagnostics"]["non_finite_outputs"] == {"stage1": 1}


def _crowd(n: int, seed: int = 0) -> Detections:
    rng = np.random.default_rng(seed)
    h = rng.uniform(20, 200, n)
    boxes = np.column_stack([rng.uniform(0, 1700, n), rng.uniform(0, 800, n), 0.4 * h, h])
    return Detections.from_arrays(boxes, np.arange(1, n + 1), rng.uniform(0.2, 1.0, n))


def test_cap_keeps_the_most_confident_then_the_largest() -> None:
    boxes = np.array([[0, 0, 5, 10], [0, 0, 5, 40], [0, 0, 5, 20], [0, 0, 5, 30]], np.float32)
    dets = Detections.from_arrays(boxes, np.arange(4), np.array([0.5, 0.9, 0.9, 0.5]))
    kept, dropped = cap_people(dets, 3)
    assert kept.track_ids.tolist() == [1, 2, 3] and dropped == 1  # original order kept
    assert cap_people(dets, None) == (dets, 0)
    with pytest.raises(InputError, match="max_people"):
        PipelineConfig(max_people=1)
    with pytest.raises(InputError, match="max_people"):
        PipelineConfig(max_people=2.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("n", [1_000, 10_000])
def test_huge_crowds_are_capped_and_memory_stays_small(tmp_path: Path, n: int) -> None:
    image = np.random.default_rng(0).integers(0, 255, (1080, 1920, 3), np.uint8)
    with Pipeline.load(_models(tmp_path), flow="dis") as pipe:
        dets = _crowd(n)
        pipe.step(image, dets, 0.0)
        tracemalloc.start()
        result = pipe.step(image, dets, 0.1)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert len(result.track_ids) == 100 and len(result.pairs) == 100 * 99 // 2
    assert result.diagnostics.dropped == {"over max_people=100 (kept the most confident)": n - 100}
    kept_scores = np.sort(dets.scores)[-100:]
    np.testing.assert_array_equal(
        np.sort(dets.scores[np.isin(dets.track_ids, result.track_ids)]), kept_scores
    )
    assert peak < 150 * 2**20  # the uncapped 10,000-person step needed 8.7 GB


# -- inputs of pairedge run: corrupt / truncated video, empty detection files
# ---------------------------------


def _mp4(path: Path, frames: int = 30) -> bytes:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), 30, (64, 48))
    if not writer.isOpened():
        pytest.skip("OpenCV cannot write mp4v here")
    rng = np.random.default_rng(0)
    for _ in range(frames):
        writer.write(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    writer.release()
    return path.read_bytes()


def test_a_video_cut_short_is_reported_as_truncated(tmp_path: Path) -> None:
    data = _mp4(tmp_path / "full.mp4")
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError, match="looks truncated .*no 'moov' index"):
        FrameSource(cut)


def test_iso_bmff_atom_walk() -> None:
    def atom(kind: bytes, payload: int) -> bytes:
        return (8 + payload).to_bytes(4, "big") + kind + bytes(payload)

    def problem(data: bytes) -> str | None:
        path = Path(tempfile.mkstemp(suffix=".mp4")[1])
        try:
            path.write_bytes(data)
            return iso_bmff_problem(path)
        finally:
            path.unlink()

    ftyp = atom(b"ftyp", 12)
    assert problem(ftyp + atom(b"moov", 20) + atom(b"mdat", 100)) is None
    assert problem(ftyp + atom(b"mdat", 100)) == "no 'moov' index atom"
    cut = problem(ftyp + atom(b"moov", 20) + atom(b"mdat", 100)[:50])
    assert cut is not None and "'mdat' at byte 48 declares 108 bytes" in cut and "moov" not in cut
    assert problem(b"RIFF....AVI LIST") is None  # not an MP4: not judged


def test_ffmpeg_log_is_silenced_on_a_corrupt_video(tmp_path: Path) -> None:
    data = bytearray(_mp4(tmp_path / "v.mp4", frames=60))
    for i in range(2000, len(data) - 3000, 997):
        data[i] ^= 0xFF
    (tmp_path / "bad.mp4").write_bytes(bytes(data))
    code = (
        "import sys; from pairedge.runtime.runner.inputs import FrameSource\n"
        "s = FrameSource(sys.argv[1]); n = sum(1 for _ in s); print(n, s.error)"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENCV_FFMPEG_LOGLEVEL"}
    run = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "bad.mp4")], capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""  # FFmpeg's "ac-tex damaged" / "Error at MB" flood is gone


@pytest.mark.parametrize(
    ("name", "text"),
    [("det.txt", ""), ("det.txt", "# only a comment\n\n"), ("det.json", '{"labels": {}}'), ("det.xml", "")],
)
def test_a_detection_file_without_boxes_is_an_error_naming_it(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(FormatError) as info:
        read_detections(path)
    assert name in str(info.value)


def test_run_stats_memory_is_bounded_on_endless_streams(pipe: Pipeline) -> None:
    stats = RunStats(pipe.labels, max_samples=8)
    for k in range(150):
        result = pipe.step(np.zeros((k % 7 + 1, 5, 3), np.uint8), _two_people(), k / 10)
        stats.add(result)
    summary = stats.summary()
    assert summary.frames == 150 and stats._window.shape[0] == 8
    assert len(summary.frames_dropped) == 7  # image heights 1..7: each a distinct reason, all below the cap
    assert summary.latency_ms["total"]["mean"] > 0
    for k in range(150):
        stats.add(pipe.step(None, _Raising(RuntimeError(f"boom {k}")), 20 + k / 10, image_size=(64, 48)))
    dropped = stats.summary().detections_dropped
    assert len(dropped) == MAX_REASONS + 1 and dropped["other reasons (more than 100 distinct)"] == 50
