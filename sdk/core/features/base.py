"""The feature-spec interface shared by every feature definition, and the registry of specs by name.

A *feature spec* turns the tracked boxes of a frame (and, optionally, the dense optical flow from the
previous frame) into two float32 vectors per unordered pair of people:

* stage 1 (``stage1``, (M, F1)): is the pair interacting?
* stage 2 (``stage2``, (M, F2)): which interaction?

Contract (the runtime, the trainer and the exporter rely on it):

* ``get_spec(name)`` returns the :class:`FeatureSpec`; an unknown name raises :class:`ModelError`.
* ``spec.make_extractor(config)`` returns a fresh, stateful, per-stream :class:`FeatureExtractor`
  (instances are independent; no global state). ``config`` is ``None`` (defaults), the spec's own frozen
  config dataclass, or a plain mapping of its fields (as stored in model metadata).
* ``extractor.step(detections, timestamp, image_size, flow, flow_scale) -> PairFeatures`` once per frame,
  in time order. ``flow`` is (h, w, 2) float32, the flow from the previous to the current frame computed on
  the image resized by ``flow_scale`` (h ~= H * flow_scale), in pixels of that resized image; ``None`` for
  the first frame or in box-only mode. ``extractor.reset()`` forgets all history (new stream / scene cut).
* Pairs are all unordered pairs of the frame's *usable* detections: track id >= 0, finite box, w > 0 and
  h > 0. When a track id occurs twice in a frame only its first row is used. Pairs are sorted by
  ``(id_a, id_b)`` with ``id_a < id_b``; ``index`` gives the detection rows of A and B.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from pairedge.core.errors import InputError, ModelError
from pairedge.core.types import Detections

#: Registered specs: name -> "module:attribute" of the spec object (imported lazily).
_SPECS: Mapping[str, str] = {
    "liang2026": "pairedge.core.features.liang2026:SPEC",
    "pairedge": "pairedge.core.features.edge:SPEC",
}


@dataclass(frozen=True)
class PairFeatures:
    """The pair features of one frame.

    Attributes:
        pairs: (M, 2) int64 track ids ``(id_a, id_b)``, ``id_a < id_b``, sorted lexicographically.
        index: (M, 2) int64 row indices of A and B into the frame's :class:`Detections`.
        stage1: (M, F1) float32 stage-1 features.
        stage2: (M, F2) float32 stage-2 features.
    """

    pairs: np.ndarray
    index: np.ndarray
    stage1: np.ndarray
    stage2: np.ndarray

    def __len__(self) -> int:
        return len(self.pairs)

    @classmethod
    def empty(cls, stage1_dim: int, stage2_dim: int) -> PairFeatures:
        """No pairs (fewer than two usable detections)."""
        z = np.zeros((0, 2), np.int64)
        return cls(z, z.copy(), np.zeros((0, stage1_dim), np.float32), np.zeros((0, stage2_dim), np.float32))


@runtime_checkable
class FeatureExtractor(Protocol):
    """Per-stream state of a spec (track history, previous timestamp). Not thread-safe; one per stream."""

    def step(
        self,
        detections: Detections,
        timestamp: float,
        image_size: tuple[int, int],
        flow: np.ndarray | None = None,
        flow_scale: float = 1.0,
    ) -> PairFeatures:
        """Features of all pairs of this frame.

        Args:
            detections: the frame's tracked boxes (x y w h, pixels of the full image).
            timestamp: seconds, increasing along the stream.
            image_size: ``(W, H)`` of the full image in pixels.
            flow: (h, w, 2) float32 previous -> current frame, pixels of the resized image, or None.
            flow_scale: the resize factor the flow was computed at (h ~= H * flow_scale).
        """
        ...

    def reset(self) -> None:
        """Forget all per-track history."""
        ...


class FeatureSpec:
    """Base class of a feature specification. Subclasses set the class attributes and implement
    :meth:`_new_extractor`.

    Attributes:
        name: registry name stored in model metadata ("liang2026", "pairedge").
        version: version of the definition; a model trained on another version is refused.
        stage1_names, stage2_names: one name per feature column, in order.
        needs_flow: the runtime should compute optical flow for this spec (stage 2 uses it).
        flow_backend: the flow algorithm the spec was defined with ("farneback" or "dis").
        default_flow_scale: the resize factor the runtime should compute flow at.
        config_type: the frozen dataclass of the spec's options.
        viewpoint_names: the columns (of either stage) that depend on where the camera is rather than on
            what the people do: absolute image position and size. A model trained with them ignored
            (``pairedge train --ignore-features viewpoint``) transfers to a camera at another height.
        box_shape_names: the stage-2 columns computed from each box's width-to-height ratio alone (posture
            evidence: a seated person's box is wider). A sliding-window detector (ACF, HOG, DPM) draws every
            box at one ratio, so these columns then say nothing about the person; the runtime sets them to
            the model's training mean (``PipelineConfig.box_shape``).
    """

    name: str = ""
    version: str = ""
    stage1_names: tuple[str, ...] = ()
    stage2_names: tuple[str, ...] = ()
    needs_flow: bool = True
    flow_backend: str = "farneback"
    default_flow_scale: float = 1.0
    config_type: type = object
    viewpoint_names: frozenset[str] = frozenset()
    box_shape_names: frozenset[str] = frozenset()

    @property
    def stage1_dim(self) -> int:
        return len(self.stage1_names)

    @property
    def stage2_dim(self) -> int:
        return len(self.stage2_names)

    def make_config(self, config: Any = None) -> Any:
        """Normalise ``config`` (None, the config dataclass, or a mapping of its fields) to the dataclass."""
        if config is None:
            return self.config_type()
        if isinstance(config, self.config_type):
            return config
        if isinstance(config, Mapping):
            known = {f.name for f in dataclasses.fields(self.config_type)}
            unknown = sorted(set(config) - known)
            if unknown:
                raise InputError(
                    f"feature spec {self.name!r}: unknown config keys {unknown}; expected a subset of "
                    f"{sorted(known)}"
                )
            return self.config_type(**config)
        raise InputError(
            f"feature spec {self.name!r}: expected None, a mapping or {self.config_type.__name__} as config, "
            f"got {type(config).__name__}"
        )

    def for_version(self, version: str) -> FeatureSpec | None:
        """This spec with the layout of an older (or newer) ``version`` of its definition, so models trained
        on it still load; None when this pairedge does not implement that version."""
        return self if str(version) == self.version else None

    @property
    def versions(self) -> tuple[str, ...]:
        """Every version of this spec that :meth:`for_version` builds (for messages)."""
        return (self.version,)

    def make_extractor(self, config: Any = None) -> FeatureExtractor:
        """A fresh per-stream extractor with ``config`` (see :meth:`make_config`)."""
        return self._new_extractor(self.make_config(config))

    def _new_extractor(self, config: Any) -> FeatureExtractor:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, version={self.version!r}, "
            f"stage1_dim={self.stage1_dim}, stage2_dim={self.stage2_dim})"
        )


def spec_names() -> tuple[str, ...]:
    """Names of all known feature specs."""
    return tuple(_SPECS)


def get_spec(name: str) -> FeatureSpec:
    """The feature spec registered as ``name``; raises :class:`ModelError` for an unknown name."""
    try:
        target = _SPECS[name]
    except (KeyError, TypeError):
        raise ModelError(
            f"unknown feature spec {name!r}; expected one of {sorted(_SPECS)} "
            "(a model trained with another spec needs a pairedge version that defines it)"
        ) from None
    module, attr = target.split(":")
    spec: FeatureSpec = getattr(importlib.import_module(module), attr)
    return spec


def spec_layout(name: str, version: str | None = None) -> FeatureSpec:
    """The feature spec ``name`` in the layout of ``version`` (None: the current one), e.g. to build rows
    for an older model; raises :class:`InputError` for a version this pairedge does not implement."""
    spec = get_spec(name)
    if version is None or str(version) == spec.version:
        return spec
    layout = spec.for_version(str(version))
    if layout is None:
        raise InputError(
            f"feature spec {name!r} has no version {version!r}; this pairedge implements "
            f"{', '.join(spec.versions)} (current: {spec.version})"
        )
    return layout


def usable_rows(detections: Detections) -> np.ndarray:
    """Row indices of the detections that take part in pairs, ordered by track id.

    A row is usable when its track id is >= 0, its box is finite and has w > 0 and h > 0; when a track id
    occurs more than once, only its first usable row is kept.

    Returns:
        (K,) int64 row indices, sorted by their (unique, increasing) track ids.
    """
    boxes = np.asarray(detections.boxes, dtype=np.float64).reshape(-1, 4)
    ids = np.asarray(detections.track_ids, dtype=np.int64).reshape(-1)
    ok = (ids >= 0) & np.isfinite(boxes).all(axis=1) & (boxes[:, 2] > 0) & (boxes[:, 3] > 0)
    rows = np.flatnonzero(ok)
    _, first = np.unique(ids[rows], return_index=True)  # sorted unique ids, first occurrence
    return rows[first].astype(np.int64)


@functools.lru_cache(maxsize=64)
def pair_rows(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(n, k=1)``: the rows ``(ia, ib)`` (M,) int64 of all unordered pairs of ``n`` people in
    pair order; cached per ``n`` (a stream's head count changes rarely) and read-only."""
    ia, ib = np.triu_indices(n, k=1)
    for a in (ia, ib):
        a.flags.writeable = False
    return ia, ib


def frame_pairs(detections: Detections) -> tuple[np.ndarray, np.ndarray]:
    """All unordered pairs of usable detections (see :func:`usable_rows`), vectorised.

    Returns:
        pairs: (M, 2) int64 track ids with ``id_a < id_b``, sorted lexicographically.
        index: (M, 2) int64 detection rows of A and B.
    """
    rows = usable_rows(detections)
    ia, ib = pair_rows(len(rows))
    index = np.stack([rows[ia], rows[ib]], axis=1).astype(np.int64).reshape(-1, 2)
    pairs = np.asarray(detections.track_ids, dtype=np.int64)[index].reshape(-1, 2)
    return pairs, index


def check_flow(flow: np.ndarray | None, flow_scale: float, image_size: tuple[int, int]) -> np.ndarray | None:
    """Validate a flow field; returns it as float32 (h, w, 2) (non-finite vectors set to 0) or None.

    Raises:
        InputError: wrong shape or dtype, non-positive scale, or a size inconsistent with the image.
    """
    if flow is None:
        return None
    flow = np.asarray(flow)
    if flow.ndim != 3 or flow.shape[2] != 2 or flow.shape[0] < 1 or flow.shape[1] < 1:
        raise InputError(f"flow: expected an (h, w, 2) array, got shape {flow.shape}")
    if not np.isfinite(flow_scale) or flow_scale <= 0:
        raise InputError(f"flow_scale: expected a positive number, got {flow_scale}")
    w_img, h_img = image_size
    exp_h, exp_w = h_img * flow_scale, w_img * flow_scale
    if abs(flow.shape[0] - exp_h) > 1.5 or abs(flow.shape[1] - exp_w) > 1.5:
        raise InputError(
            f"flow: expected about {exp_h:.0f} x {exp_w:.0f} (image {h_img} x {w_img} at scale "
            f"{flow_scale}), got {flow.shape[0]} x {flow.shape[1]}; pass the scale the flow was computed at"
        )
    flow = flow.astype(np.float32, copy=False)
    if not np.isfinite(flow).all():  # NaN / inf vectors count as no motion
        flow = np.nan_to_num(flow, nan=0.0, posinf=0.0, neginf=0.0)
    return flow


def check_image_size(image_size: tuple[int, int]) -> tuple[int, int]:
    """``(W, H)`` as positive ints; raises InputError otherwise."""
    try:
        w, h = (int(v) for v in image_size)
    except (TypeError, ValueError):
        raise InputError(f"image_size: expected (W, H), got {image_size!r}") from None
    if w <= 0 or h <= 0:
        raise InputError(f"image_size: expected positive (W, H), got {image_size!r}")
    return w, h
