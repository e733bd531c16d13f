"""The streaming pipeline end to end on tiny ONNX models of both feature specs."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from pairedge.core.errors import ModelError
from pairedge.core.features import get_spec
from pairedge.core.types import Detections
from pairedge.runtime import FrameResult, Pipeline, PipelineConfig, SmoothingConfig
from pairedge.runtime.flow import get_flow_backend
from pairedge.runtime.pipeline import STAGES, softmax
from rt_onnx_models import write_toy_model
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
