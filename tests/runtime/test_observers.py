"""``Pipeline.observe_features``: the features each step classifies, without swapping the extractor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pairedge.core.features import PairFeatures
from pairedge.core.types import Detections
from pairedge.runtime import Pipeline, PipelineConfig
from pairedge.runtime.observers import LastFeatures
from rt_onnx_models import write_toy_model
from rt_scenes import scene


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    out = tmp_path / "m"
    write_toy_model(out / "stage1.onnx", stage=1, spec_name="pairedge", seed=1)
    write_toy_model(out / "stage2.onnx", stage=2, spec_name="pairedge", seed=2)
    return out


def test_observers_see_each_steps_features_once_and_are_removed(folder: Path) -> None:
    calls: list[tuple[Detections, PairFeatures]] = []
    frames = list(scene(people=4, frames=3, size=(160, 120)))
    with Pipeline.load(folder, config=PipelineConfig(box_shape="ignore")) as pipe:
        stage1 = pipe.stage1.infer
        given: list[np.ndarray] = []
        pipe.stage1.infer = lambda x: (given.append(x), stage1(x))[1]  # type: ignore[method-assign]
        extractor = pipe.extractor
        with pipe.observe_features(lambda d, f: calls.append((d, f))) as handle:
            results = [pipe.step(f.image, f.detections, f.timestamp) for f in frames]
        assert pipe.extractor is extractor  # nothing swapped
        assert len(calls) == 3 and all(
            d.track_ids.tolist() == r.track_ids.tolist() for (d, _), r in zip(calls, results, strict=True)
        )
        for (_, feats), result, x in zip(calls, results, given, strict=True):
            assert feats.stage1 is x  # the very array stage 1 was given, no copy
            np.testing.assert_array_equal(feats.pairs, result.pairs)
            cols = pipe.box_shape.columns
            np.testing.assert_array_equal(
                feats.stage2[:, cols], np.tile(pipe.box_shape.means, (len(feats), 1))
            )
        handle.remove()
        handle.remove()  # idempotent
        pipe.step(frames[0].image, frames[0].detections, 1.0)
    assert len(calls) == 3  # removed on leaving the block


def test_last_features_is_cleared_and_not_called_without_features(folder: Path) -> None:
    seen = LastFeatures()
    boxes = np.array([[10, 10, 20, 40], [40, 10, 20, 40]], np.float32)
    dets = Detections.from_arrays(boxes, track_ids=np.arange(2))
    with Pipeline.load(folder, flow="none") as pipe, pipe.observe_features(seen):
        pipe.step(None, dets, 0.0)  # no image size known: no features computed, no call
        assert seen.features is None and seen.detections is None
        result = pipe.step(None, dets, 0.1, image_size=(160, 120))
        assert seen.features is not None and seen.detections is not None
        np.testing.assert_array_equal(seen.features.pairs, result.pairs)
        seen.clear()
        assert seen.features is None
