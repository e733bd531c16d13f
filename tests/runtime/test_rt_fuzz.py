"""Seeded mutation fuzzing of ``Pipeline.step`` (issue 9): malformed frames, detections, timestamps, frame
indices, image sizes and small or odd frame sizes, in episodes of many steps. Never an exception, no stage
failure, sane results, and every input detection either kept or counted as dropped.

15,000 steps over both feature specs and the opt-in ``pairedge`` v3 layout (DIS ``ultrafast`` at scale 0.5
on frames of at most 64 px, the cheapest setting), about 15-30 s on two cores. ``PAIREDGE_FUZZ_STEPS``
raises the count for a longer local run.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pairedge.core.types import Detections
from pairedge.runtime import FrameResult, Pipeline, PipelineConfig
from pairedge.runtime.flow import get_flow_backend
from rt_onnx_models import write_toy_model

STEPS = int(os.environ.get("PAIREDGE_FUZZ_STEPS", "5000"))  # per spec (and layout) run
EPISODE = 250


class _Raising:
    """Detections-like object whose attribute access raises."""

    def __init__(self, error: Exception) -> None:
        self._error = error

    def __getattr__(self, name: str) -> Any:
        raise self._error


class _Mutator:
    """Builds one malformed-or-not step at a time from a seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.t = 0.0
        self.size = (48, 40)

    def pick(self, options: list[Any]) -> Any:
        return options[int(self.rng.integers(0, len(options)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def frame(self) -> Any:
        r = self.rng
        if self.chance(0.05):  # a new camera resolution, sometimes below the flow's minimum
            self.size = (int(r.integers(1, 65)), int(r.integers(1, 65)))
        w, h = self.size
        kind = r.integers(0, 20)
        if kind == 0:
            return None
        if kind == 1:
            return r.integers(0, 255, (h, w, 3)).astype(self.pick(["float32", "int16", "bool", "float64"]))
        if kind == 2:
            return np.zeros(
                self.pick([(h, w, 4), (h, w, 2), (0, 0), (h,), (h, w, 3, 1), (0, w, 3)]), np.uint8
            )
        if kind == 3:
            return self.pick(["frame", 7, [[1, 2]], object()])
        if kind == 4:
            return r.integers(0, 255, (h * 2, w * 2, 3), dtype=np.uint8)[::2, ::2]  # non-contiguous view
        if kind == 5:
            return r.integers(0, 255, (h, w, 1), dtype=np.uint8)
        image = r.integers(0, 255, (h, w) if kind == 6 else (h, w, 3), dtype=np.uint8)
        return image

    def detections(self) -> tuple[Any, int | None]:
        """(detections, number of rows the pipeline must account for, or None when not checkable)."""
        r = self.rng
        n = int(r.integers(0, 9)) if not self.chance(0.005) else int(r.integers(101, 140))
        w, h = self.size
        boxes = np.column_stack(
            [r.uniform(-10, w, n), r.uniform(-10, h, n), r.uniform(0.5, w / 2 + 2, n), r.uniform(0.5, h, n)]
        )
        ids = np.arange(1, n + 1, dtype=np.float64) + 100 * int(r.integers(0, 3))
        scores = r.uniform(0, 1, n)
        for _ in range(int(r.integers(0, 4))):
            if n == 0:
                break
            row, col = int(r.integers(0, n)), int(r.integers(0, 4))
            what = r.integers(0, 9)
            if what == 0:
                boxes[row, col] = self.pick([np.nan, np.inf, -np.inf])
            elif what == 1:
                boxes[row, col] = self.pick([1e30, -1e30, 1e300, -1e300, 1e6])
            elif what == 2:
                boxes[row, 2 + col % 2] = self.pick([0.0, -5.0, 1e-9])
            elif what == 3:
                ids[row] = self.pick([-1, -2, -7, 2.0**31, 2.0**40, 1.5, np.nan, ids[(row + 1) % n]])
            elif what == 4:
                scores[row] = self.pick([np.nan, np.inf, -1.0, 1e300])
            elif what == 5:
                ids[:] = -1  # the tracker assigns ids
            elif what == 6:
                boxes[row, :2] = (-1e4, 1e4)  # outside the image
        with np.errstate(over="ignore"):  # 1e300 -> inf in float32 is part of the input here
            return self._wrap(int(r.integers(0, 40)), boxes, ids, scores, n)

    def _wrap(
        self, kind: int, boxes: np.ndarray, ids: np.ndarray, scores: np.ndarray, n: int
    ) -> tuple[Any, int | None]:
        if kind == 0:
            return None, 0
        if kind == 1:
            return _Raising(self.pick([RuntimeError("boom"), KeyError("k"), ZeroDivisionError()])), None
        if kind == 2:
            return Detections(boxes.astype(np.complex64), ids, scores), None  # type: ignore[arg-type]
        if kind == 3:
            return Detections(boxes[:, :3], ids, scores), None
        if kind == 4:
            return Detections(boxes, ids[: max(n - 1, 0)], scores), None
        if kind == 5:
            return Detections(boxes.tolist(), ids.tolist(), scores.tolist()), n  # type: ignore[arg-type]
        if kind == 6:
            return Detections(boxes.astype(object), ids, scores), n
        if kind == 7:
            strings = boxes.astype(str)
            strings[0:1, 0] = "x"
            return Detections(strings, ids, scores), None  # type: ignore[arg-type]
        dets = Detections(
            boxes.astype(np.float32), np.nan_to_num(ids, nan=-1).astype(np.int64), scores.astype(np.float32)
        )
        return dets, n

    def timestamp(self) -> Any:
        r = self.rng
        self.t += float(r.uniform(0.0, 0.2))
        kind = r.integers(0, 30)
        if kind == 0:
            return self.pick([np.nan, np.inf, -np.inf])
        if kind == 1:
            return 10**400
        if kind == 2:
            return self.pick(["soon", None, [1.0], b"1"])
        if kind == 3:
            return self.t - 5.0  # decreasing
        if kind == 4:
            return np.float32(self.t)
        return self.t

    def keywords(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.chance(0.05):
            out["frame_index"] = self.pick(["abc", 2.5, 10**30, -3, None, np.int64(5), [1]])
        if self.chance(0.2):
            out["image_size"] = (
                self.size if self.chance(0.5) else self.pick([("a", 3), (0, 5), (np.inf, 4), 7, (10**400, 2)])
            )
        return out


def _check(result: FrameResult, rows: int | None, seen: set[str]) -> None:
    diag = result.diagnostics
    seen.update(_kind(text) for text in (*diag.dropped, *diag.notes, diag.frame_dropped or ""))
    assert diag.stage_error is None, diag.frame_dropped  # nothing reached the last-resort guard
    assert math.isfinite(result.timestamp)
    assert (
        np.isfinite(result.p_interact).all() and ((result.p_interact >= 0) & (result.p_interact <= 1)).all()
    )
    assert np.isfinite(result.probs).all() and np.isfinite(result.boxes).all()
    inter = result.interacting
    np.testing.assert_allclose(result.probs[inter].sum(axis=1), 1.0, atol=1e-4)
    assert (result.label_ids[inter] >= 0).all() and (result.label_ids[~inter] == -1).all()
    ids = result.track_ids
    assert len(ids) == len(np.unique(ids)) == len(result.boxes) and (ids >= 0).all()
    assert np.isin(result.pairs, ids).all() and (result.pairs[:, 0] < result.pairs[:, 1]).all()
    coasted = result.coasted_mask  # people the tracker keeps through a miss: not input rows
    if rows is not None:  # every input row is kept or counted as dropped
        assert len(ids) - int(coasted.sum()) + sum(diag.dropped.values()) == rows, diag.dropped
    json.dumps(result.to_json_dict(), allow_nan=False)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # no numpy overflow / invalid-value warnings either
@pytest.mark.parametrize("spec", ["pairedge", "liang2026", "pairedge-v3"])
def test_pipeline_survives_seeded_mutations(tmp_path: Path, spec: str) -> None:
    name, _, version = spec.partition("-v")
    layout = {}
    if version:  # an older / opt-in layout: the widths of that version
        from pairedge.core.features import spec_layout

        v = spec_layout(name, version)
        layout = {
            st: {
                "feature_spec_version": version,
                "num_features": w,
                "norm_mean": (0.0,) * w,
                "norm_std": (1.0,) * w,
            }
            for st, w in ((1, v.stage1_dim), (2, v.stage2_dim))
        }
    write_toy_model(
        tmp_path / "m" / "stage1.onnx",
        stage=1,
        spec_name=name,
        thresholds={"p_interact": 0.3},
        **layout.get(1, {}),
    )
    write_toy_model(tmp_path / "m" / "stage2.onnx", stage=2, spec_name=name, **layout.get(2, {}))
    mutate = _Mutator(seed={"pairedge": 9, "liang2026": 10}.get(spec, 11))
    configs = [
        PipelineConfig(),
        PipelineConfig(tracking="always", max_people=5),
        PipelineConfig(tracking="never"),
    ]
    if name == "pairedge":  # far pairs skipped (the liang2026 spec refuses a radius)
        configs.append(PipelineConfig(pair_radius=2.0))
    steps = 0
    seen: set[str] = set()
    for episode in range(math.ceil(STEPS / EPISODE)):
        flow = get_flow_backend("dis", preset="ultrafast", scale=0.5)
        with Pipeline.load(tmp_path / "m", flow=flow, config=configs[episode % len(configs)]) as pipe:
            for _ in range(min(EPISODE, STEPS - steps)):
                frame, (dets, rows), t = mutate.frame(), mutate.detections(), mutate.timestamp()
                _check(pipe.step(frame, dets, t, **mutate.keywords()), rows, seen)
                steps += 1
                if mutate.chance(0.01):
                    pipe.reset()
    assert steps == STEPS
    assert seen >= set(KINDS), f"the fuzz never produced {set(KINDS) - seen}"


KINDS = {
    "non-finite": "non-finite box or score",
    "float32": "beyond the float32 range",
    "complex": "complex",
    "unusable": "detections unusable",
    "shape": "expected boxes of shape",
    "track id": "invalid track id",
    "duplicate": "duplicate track id",
    "outside": "outside the image",
    "small box": "smaller than min_box_side",
    "max_people": "over max_people",
    "timestamp": "timestamp",
    "frame_index": "frame_index",
    "image_size": "image_size",
    "flow too small": "per side that DISFlow needs",
    "bad frame": "expected a",
    "no frame": "no frame given",
}


def _kind(text: str) -> str:
    return next((kind for kind, marker in KINDS.items() if marker in text), "other")
