"""Run a clip through a device's own pipeline and keep, per pair-frame, what parity compares.

:func:`load_pipeline` builds the pipeline a robot would run (model folder, precision, classifier backend and
flow backend chosen by their registry names, so TensorRT engines and a CUDA flow plug in by name).
:func:`replay` steps it over the frames exactly as :meth:`Pipeline.step` does (validation, tracking, flow,
features, stage 1, smoothing, gate, stage 2, groups) and records, through the pipeline's feature observer
(:meth:`Pipeline.observe_features`), the features each pair got; it then runs both classifiers on every pair
(stage 2 included, gated or not) to get comparable logits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from pairedge.compare.parity.pack import PairRows
from pairedge.core.errors import BackendError, InputError
from pairedge.core.features import PairFeatures
from pairedge.core.types import Detections
from pairedge.runtime.config import FlowConfig, PipelineConfig
from pairedge.runtime.deployment import Deployment
from pairedge.runtime.observers import LastFeatures
from pairedge.runtime.pipeline import Pipeline
from pairedge.runtime.streamstate import FrameState, StreamSnapshot

#: ``(frame index, image or None, detections, timestamp)``.
ReplayItem = tuple[int, np.ndarray | None, Detections, float]


def load_pipeline(
    deployment: Deployment,
    *,
    config: PipelineConfig | None = None,
    flow_preset: str | None = None,
    flow_scale: float | None = None,
) -> Pipeline:
    """The pipeline of ``deployment`` with ``config``, its flow preset and scale replaced where given (a
    pack's reference records them).

    Raises:
        ModelError (missing precision files, integrity), BackendError (backend unavailable), InputError.
    """
    config = config or PipelineConfig()
    if flow_preset is not None or flow_scale is not None:
        flow_cfg = FlowConfig(
            preset=flow_preset or config.flow.preset,
            scale=flow_scale if flow_scale is not None else config.flow.scale,
        )
        config = replace(config, flow=flow_cfg)
    return deployment.load(config)


def flow_description(pipe: Pipeline) -> dict[str, Any]:
    """``{"name", "scale", "preset"}`` of the pipeline's flow backend (name "none" without flow)."""
    f = pipe.flow
    if f is None:
        return {"name": "none", "scale": None, "preset": None, "repr": "none"}
    return {
        "name": type(f).name or type(f).__name__,
        "scale": float(f.scale),
        "preset": f.preset,
        "repr": repr(f),
    }


@dataclass(frozen=True)
class ReplayResult:
    """What a replay produced: the pair rows, the detections as the pipeline kept them (with ids) and the
    decisions in force at each frame (:meth:`Pipeline.frame_state`)."""

    rows: PairRows
    detections: tuple[Detections, ...]
    states: tuple[FrameState, ...] = ()


@dataclass(frozen=True)
class StreamStart:
    """Where a replayed clip starts: ``snapshot`` of the stream before its first frame and ``previous``, the
    frame before it (for the flow; None when the flow had none). None in :func:`replay`: the stream's
    start."""

    snapshot: StreamSnapshot
    previous: np.ndarray | None = None


def replay(
    pipe: Pipeline,
    items: Iterable[ReplayItem],
    image_size: tuple[int, int] | None = None,
    *,
    states: Sequence[FrameState] | None = None,
    start: StreamStart | None = None,
    reset: bool = True,
) -> ReplayResult:
    """Step ``pipe`` over ``items`` and record every pair-frame.

    Args:
        pipe: the pipeline; a feature observer is registered on it for the duration of the call.
        items: the frames in order; an image of None needs ``image_size`` (box-only clips).
        image_size: ``(W, H)`` for box-only clips.
        states: the decisions of each frame (by position in ``items``) as a recorded run had them: an exact
            replay of that run (the monitors do not decide again). None: the pipeline decides.
        start: the stream state before the first item (a clip cut from the middle of a stream).
        reset: start from :meth:`Pipeline.reset` (False: continue the pipeline's stream as it is). A
            ``start`` resets and restores in any case.

    Returns:
        Rows (M pair-frames over the clip), the kept detections and the decisions of each frame.

    Raises:
        InputError: ``states`` shorter than the clip, or a ``start`` that does not fit this pipeline.
    """
    seen = LastFeatures()
    parts: list[tuple[np.ndarray, ...]] = []
    kept: list[Detections] = []
    decided: list[FrameState] = []
    if reset:
        pipe.reset()
    if start is not None:
        pipe.restore(start.snapshot, start.previous)
    with pipe.observe_features(seen):
        for pos, (index, image, dets, t) in enumerate(items):
            seen.clear()
            given = _state_at(states, pos)
            result = pipe.step(image, dets, t, frame_index=index, image_size=image_size, state=given)
            decided.append(pipe.frame_state())
            people = seen.detections  # what the extractor saw (orientation included)
            if people is None or not np.array_equal(people.track_ids, result.track_ids):
                people = Detections.from_arrays(result.boxes, result.track_ids)
            kept.append(people)
            if not len(result.pairs):
                continue
            feats = _aligned(seen.features, result.pairs, index)
            logits1 = pipe.stage1.infer(feats.stage1)
            logits2 = pipe.stage2.infer(np.ascontiguousarray(feats.stage2))
            parts.append(
                (
                    np.full(len(result.pairs), index, np.int64),
                    result.pairs,
                    feats.stage1,
                    feats.stage2,
                    logits1,
                    logits2,
                    result.p_interact,
                    result.label_ids,
                )
            )
    return ReplayResult(_stack(parts, pipe), tuple(kept), tuple(decided))


def _state_at(states: Sequence[FrameState] | None, pos: int) -> FrameState | None:
    if states is None:
        return None
    if pos >= len(states):
        raise InputError(
            f"replay: {len(states)} recorded frame states for a clip of more frames; the pack is corrupt"
        )
    return states[pos]


def _aligned(feats: PairFeatures | None, pairs: np.ndarray, index: int) -> PairFeatures:
    """The observed features of exactly ``pairs`` (stage 1 or 2 drop pairs whose logits are not finite)."""
    if feats is None:
        raise BackendError(f"frame {index}: the pipeline scored pairs without computing features")
    if len(feats.pairs) == len(pairs) and np.array_equal(feats.pairs, pairs):
        return feats
    raise BackendError(f"frame {index}: the pipeline's pairs do not match the features it computed")


def _stack(parts: Sequence[tuple[np.ndarray, ...]], pipe: Pipeline) -> PairRows:
    spec = pipe.models.spec
    widths = (
        (),
        (2,),
        (spec.stage1_dim,),
        (spec.stage2_dim,),
        (pipe.stage1.num_classes,),
        (len(pipe.labels),),
        (),
        (),
    )
    dtypes = (np.int64, np.int64, np.float32, np.float32, np.float32, np.float32, np.float32, np.int64)
    cols = [
        np.concatenate([p[k] for p in parts]).astype(dtypes[k])
        if parts
        else np.zeros((0, *widths[k]), dtypes[k])
        for k in range(8)
    ]
    return PairRows(*cols)


def model_only_logits(
    pipe: Pipeline, stage1: np.ndarray, stage2: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Both classifiers of ``pipe`` on given features ((M, F1), (M, F2) float32), in chunks of 8192 pairs."""
    out1, out2 = [], []
    for lo in range(0, max(len(stage1), 1), 8192):
        out1.append(pipe.stage1.infer(np.ascontiguousarray(stage1[lo : lo + 8192], np.float32)))
        out2.append(pipe.stage2.infer(np.ascontiguousarray(stage2[lo : lo + 8192], np.float32)))
    return np.concatenate(out1), np.concatenate(out2)
