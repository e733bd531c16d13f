"""``pairedge``: this project's feature spec, built for a moving robot and for box-only data.

Per frame: optical flow once (at ``flow_scale`` of the image, any backend, DIS by default), camera
ego-motion estimated on the background (:mod:`pairedge.core.features.egomotion`) and removed, flow pooled per
**person** with integral images (O(1) per box), a short bounded track history
(:mod:`pairedge.core.features.history`), and pair values computed for all pairs at once. Motion is normalised
by the real time step and by the person's box height: velocities are in **body heights per second**, which
makes them independent of image resolution, distance to the camera and frame rate.

Layout (see ``docs/features.md`` for every formula):

* stage 2 = ``[a (Fp), b (Fp), pair (Fq)]``, so a relation network can form ``[a, b, |a-b|, a*b, pair]``;
  A is the pair's lower track id.
* stage 1 = the pair block (Fq values: geometry, relative motion, scene context;
  :mod:`pairedge.core.features.pairblock`). Every pair value is symmetric in A and B.
* versions: 1 = Fp 12, Fq 25; **2 (current)** = + body orientation
  (:mod:`pairedge.core.features.orientation`), Fp 15, Fq 31; 3 (opt-in) = version 2 + the long-horizon and
  group context (:mod:`pairedge.core.features.context`), Fp 15, Fq 45. Models of every version load with their
  own layout.

Motion sources: with flow (``motion="flow"`` and a flow given) the person motion ``vx, vy, speed, spread``
comes from ego-compensated flow pooled in the box; in **box-only mode** (``motion="boxes"``, or no flow this
frame) the same columns come from the track history (``spread`` = the spread of the per-step velocities),
and the column ``flow_valid`` says which (1 = flow). A model trained box-only should run with
``motion="boxes"`` (stored in its metadata) so its inputs keep their training meaning.
All values are finite (every divisor is guarded) and clamped to [-10, 10].
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import numpy as np
from pairedge.core.errors import InputError
from pairedge.core.features import context as ctx
from pairedge.core.features import egomotion, pairkernel
from pairedge.core.features import orientation as ori
from pairedge.core.features.base import (
    FeatureSpec,
    PairFeatures,
    check_image_size,
    pair_rows,
    usable_rows,
)
from pairedge.core.features.flowpool import (
    FlowMotion,
    PooledFlow,
    check_flow_result,
    ego_any,
    pool_flow,
    pool_flow_reference,
    pool_pooled,
)
from pairedge.core.features.history import TrackHistory, TrackMotion, wrap_delta
from pairedge.core.features.pairblock import PAIR_NAMES, Scene, pair_block, scene_context
from pairedge.core.features.pairkernel import finish
from pairedge.core.types import Detections

EPS = 1e-6
__all__ = [
    "SPEC",
    "FlowMotion",
    "PairedgeConfig",
    "PairedgeExtractor",
    "PairedgeSpec",
    "pair_block",
    "person_block",
    "pool_flow",
    "pool_flow_reference",
]

PERSON_NAMES = (
    "vx",
    "vy",
    "speed",
    "spread",
    "hist_vx",
    "hist_vy",
    "scale_rate",
    "aspect",
    "height",
    "bottom",
    "history_fill",
    "flow_valid",
)
#: Version 1 layout (no orientation): person block 12, pair block 25.
PERSON_NAMES_V1, PAIR_NAMES_V1 = PERSON_NAMES, PAIR_NAMES
#: Version 2 adds body orientation (:mod:`pairedge.core.features.orientation`): 3 person and 6 pair columns,
#: appended after the version-1 columns of each block.
PERSON_NAMES_V2 = PERSON_NAMES_V1 + ori.PERSON_NAMES
PAIR_NAMES_V2 = PAIR_NAMES_V1 + ori.PAIR_NAMES
#: Version 3 (opt-in, not the current version) adds the long-horizon and group context
#: (:mod:`pairedge.core.features.context`): 14 pair columns appended after the version-2 pair block.
PERSON_NAMES_V3 = PERSON_NAMES_V2
PAIR_NAMES_V3 = PAIR_NAMES_V2 + ctx.CONTEXT_NAMES


def _stage2_names(person: tuple[str, ...], pair: tuple[str, ...]) -> tuple[str, ...]:
    return (
        tuple(f"a_{n}" for n in person) + tuple(f"b_{n}" for n in person) + tuple(f"pair_{n}" for n in pair)
    )


#: The current version's names and block sizes.
CURRENT_VERSION = "2"
PERSON_NAMES = PERSON_NAMES_V2 if CURRENT_VERSION == "2" else PERSON_NAMES_V1
PAIR_NAMES = PAIR_NAMES_V2 if CURRENT_VERSION == "2" else PAIR_NAMES_V1
FP, FQ = len(PERSON_NAMES), len(PAIR_NAMES)
STAGE1_NAMES = PAIR_NAMES
STAGE2_NAMES = _stage2_names(PERSON_NAMES, PAIR_NAMES)
#: Absolute image height / position / width of the people (person block) and of the pair (pair block):
#: they encode the camera's height and tilt, not the interaction.
_VIEWPOINT_PERSON = ("height", "bottom")
_VIEWPOINT_PAIR = ("mean_height", "mean_bottom", "mean_width")
VIEWPOINT_NAMES = frozenset(
    _VIEWPOINT_PAIR
    + tuple(f"{who}_{n}" for who in "ab" for n in _VIEWPOINT_PERSON)
    + tuple(f"pair_{n}" for n in _VIEWPOINT_PAIR)
)


@dataclass(frozen=True)
class PairedgeConfig:
    """Options of the ``pairedge`` spec (stored in model metadata; defaults are the trained ones).

    Attributes:
        motion: "flow" (use the flow when given, fall back to box history when not) or "boxes" (box-only
            mode: never use flow; for models trained on data without video).
        history: K, samples of track history (>= 2).
        evict_after: frames a track may be missing before its history is dropped.
        ego_motion: "affine" (robust similarity fit), "median" (background translation) or "none".
        grid_step: spacing of background flow samples for ego-motion, in flow pixels.
        pool_inset: fraction of the box width / height trimmed on each side before pooling flow (keeps
            background pixels at the box edges out of the person's motion).
        nominal_dt: seconds between frames assumed when the real time step is unknown or not positive.
        min_speed: heights/s below which a velocity has no direction (cosines become 0).
        wrap: 360-degree panorama: horizontal distances and displacements wrap around.
        orientation_input: "use" (a detection's body orientation, when given, feeds the orientation columns)
            or "ignore" (they are computed as if no orientation were given: the motion-direction fallback).
            A model trained without orientation (``pairedge train --no-orientation``) records "ignore", so
            the runtime never feeds it an input it did not see in training.
    """

    motion: str = "flow"
    history: int = 8
    evict_after: int = 15
    ego_motion: str = "affine"
    grid_step: int = 8
    pool_inset: tuple[float, float] = (0.15, 0.05)
    nominal_dt: float = 1.0 / 30.0
    min_speed: float = 0.05
    wrap: bool = False
    orientation_input: str = "use"

    def __post_init__(self) -> None:
        if self.orientation_input not in ("use", "ignore"):
            raise InputError(
                "pairedge config: orientation_input must be 'use' or 'ignore', got "
                f"{self.orientation_input!r}"
            )
        if self.motion not in ("flow", "boxes"):
            raise InputError(f"pairedge config: motion must be 'flow' or 'boxes', got {self.motion!r}")
        if self.ego_motion not in egomotion.METHODS:
            raise InputError(
                f"pairedge config: ego_motion must be one of {egomotion.METHODS}, got {self.ego_motion!r}"
            )
        if self.history < 2 or self.evict_after < 0 or self.grid_step < 1:
            raise InputError(
                "pairedge config: expected history >= 2, evict_after >= 0, grid_step >= 1, got "
                f"{self.history}, {self.evict_after}, {self.grid_step}"
            )
        if not (self.nominal_dt > 0 and self.min_speed >= 0):
            raise InputError(f"pairedge config: expected nominal_dt > 0, got {self.nominal_dt}")
        if len(self.pool_inset) != 2 or not all(0 <= f < 0.5 for f in self.pool_inset):
            raise InputError(
                f"pairedge config: pool_inset must be two fractions in [0, 0.5), got {self.pool_inset}"
            )
        object.__setattr__(self, "pool_inset", tuple(float(f) for f in self.pool_inset))


def person_block(
    boxes: np.ndarray,
    width: float,
    height: float,
    hist: TrackMotion,
    flow: FlowMotion | None,
) -> np.ndarray:
    """Per-person values (:data:`PERSON_NAMES`), flow-derived where ``flow.valid``, else from history.

    Args:
        boxes: (N, 4) float ``x y w h``; hist: their :class:`TrackMotion`; flow: their :class:`FlowMotion`.

    Returns:
        (N, 12) float64, unclamped.
    """
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    n = len(b)
    v = hist.velocity.copy()
    spread = hist.unsteadiness.copy()
    valid = np.zeros(n, bool) if flow is None else flow.valid
    if flow is not None:
        v[valid] = flow.velocity[valid]
        spread[valid] = flow.spread[valid]
    return np.stack(
        [
            v[:, 0],
            v[:, 1],
            np.hypot(v[:, 0], v[:, 1]),
            spread,
            hist.velocity[:, 0],
            hist.velocity[:, 1],
            hist.scale_rate,
            b[:, 2] / np.maximum(b[:, 3], EPS),
            b[:, 3] / height,
            (b[:, 1] + b[:, 3]) / height,
            hist.fill,
            valid.astype(np.float64),
        ],
        axis=1,
    )


def within_radius(
    boxes: np.ndarray, ia: np.ndarray, ib: np.ndarray, radius: float, width: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The pairs ``(ia, ib)`` (M,) whose box centres are at most ``radius`` mean box heights apart (the pair
    block's ``distance`` column, before clamping), in their order.

    Args:
        boxes: (N, 4) float64 ``x y w h``; width: a panorama's width (horizontal distances wrap), else None.
    """
    cx, cy = boxes[:, 0] + boxes[:, 2] / 2, boxes[:, 1] + boxes[:, 3] / 2
    dx = wrap_delta(np.take(cx, ib) - np.take(cx, ia), width)
    dy = np.take(cy, ib) - np.take(cy, ia)
    mean_h = np.maximum((np.take(boxes[:, 3], ia) + np.take(boxes[:, 3], ib)) / 2, EPS)
    keep = np.hypot(dx, dy) / mean_h <= radius  # divided, not radius * mean_h: any finite radius, no overflow
    return ia[keep], ib[keep]


class PairedgeExtractor:
    """Per-stream state of the ``pairedge`` spec: track history, previous timestamp, frame counter."""

    #: The compiled pair block (:mod:`pairedge.core.features.pairkernel`), or None for the numpy one (the same
    #: values; tests set None on an instance to compare the two). A class attribute, not stream state: a
    #: stream
    #: snapshot (parity packs) must restore on a machine that runs the other implementation.
    kernel: ModuleType | None = pairkernel.KERNEL

    def __init__(
        self,
        config: PairedgeConfig,
        *,
        pooling: Callable[..., FlowMotion] = pool_flow,
        orientation: bool = CURRENT_VERSION == "2",
        context: bool = False,
    ) -> None:
        """``pooling``: the per-person flow pooling (integral images; :func:`pool_flow_reference` for checks).
        ``orientation``: the version-2 layout (orientation columns appended); False = version 1.
        ``context``: the version-3 layout (version 2 + :data:`pairedge.core.features.context.CONTEXT_NAMES`
        appended to the pair block; needs ``orientation``)."""
        if context and not orientation:
            raise InputError(
                "pairedge extractor: the context columns (version 3) need the orientation columns"
            )
        self.config = config
        self.orientation = orientation
        self.context = ctx.ContextHistory() if context else None
        self._fp = len(PERSON_NAMES_V2 if orientation else PERSON_NAMES_V1)
        self._fq = len(PAIR_NAMES_V3 if context else PAIR_NAMES_V2 if orientation else PAIR_NAMES_V1)
        self._pool = pooling
        self.history = TrackHistory(config.history, config.evict_after)
        #: a runtime work bound, not a feature option: pairs farther apart than this many mean box heights
        #: (centre distance / mean height) get no features and are not returned; None = every pair
        self.pair_radius: float | None = None
        self._last_t: float | None = None
        self._frame = 0
        self.last_ego = egomotion.identity()  # diagnostics: ego-motion of the last frame

    def reset(self) -> None:
        """Forget all tracks and the previous timestamp."""
        self.history.reset()
        if self.context is not None:
            self.context.reset()
        self._last_t = None
        self._frame = 0
        self.last_ego = egomotion.identity()

    def _dt(self, timestamp: float) -> float:
        if self._last_t is None:
            return self.config.nominal_dt
        dt = timestamp - self._last_t
        return dt if dt > 0 else self.config.nominal_dt

    def step(
        self,
        detections: Detections,
        timestamp: float,
        image_size: tuple[int, int],
        flow: np.ndarray | PooledFlow | None = None,
        flow_scale: float = 1.0,
    ) -> PairFeatures:
        """Features of all pairs of this frame (see :class:`pairedge.core.features.base.FeatureExtractor`).

        ``flow`` is a dense field or a :class:`PooledFlow` computed for this frame's usable rows.
        """
        cfg = self.config
        w, h = check_image_size(image_size)
        if not np.isfinite(timestamp):
            raise InputError(f"timestamp: expected a finite number of seconds, got {timestamp}")
        flow = None if cfg.motion == "boxes" else check_flow_result(flow, flow_scale, (w, h))
        rows = usable_rows(detections)
        boxes = np.asarray(detections.boxes, dtype=np.float64)[rows]
        ids = np.asarray(detections.track_ids, dtype=np.int64)[rows]
        dt = self._dt(timestamp)
        flow_motion = None
        if flow is not None:
            ego = ego_any(flow, boxes, flow_scale, cfg.ego_motion, cfg.grid_step)  # dense or PooledFlow
            self.last_ego = ego
            self.history.warp(ego)
            pool = pool_pooled if isinstance(flow, PooledFlow) else self._pool
            flow_motion = pool(flow, boxes, flow_scale, ego, dt, cfg.pool_inset)
        slots = self.history.observe(
            ids, boxes[:, :2] + boxes[:, 2:] / 2, boxes[:, 3], timestamp, self._frame
        )
        hist = self.history.motion(slots, float(w) if cfg.wrap else None)
        self.history.evict(self._frame)
        self._frame += 1
        self._last_t = timestamp
        person = person_block(boxes, w, h, hist, flow_motion)
        facing = None
        if self.orientation:
            given = cfg.orientation_input == "use" and detections.orientation is not None
            facing = ori.person_orientation(
                np.asarray(detections.orientation)[rows] if given else None,
                None
                if not given or detections.orientation_conf is None
                else np.asarray(detections.orientation_conf)[rows],
                hist.velocity,
                np.hypot(hist.velocity[:, 0], hist.velocity[:, 1]),
            )
            person = np.concatenate([person, ori.person_values(*facing)], axis=1)
        fp, fq = self._fp, self._fq
        ia, ib = pair_rows(len(rows))
        if self.pair_radius is not None and len(ia):
            ia, ib = within_radius(boxes, ia, ib, self.pair_radius, float(w) if cfg.wrap else None)
        context = None
        if self.context is not None:  # every frame, pairs or not: it records the observations
            context = self.context.step(ids, boxes, timestamp, dt, ia, ib, float(w) if cfg.wrap else None)
        if len(ia) == 0:
            return PairFeatures.empty(fq, 2 * fp + fq)
        scene = scene_context(person, boxes)
        if pairkernel.supports(fq, cfg.wrap, self.kernel):
            stage1, stage2 = pairkernel.pair_rows_compiled(
                boxes, person, facing, ia, ib, (w, h), scene, cfg.min_speed, fq, self.kernel
            )
        else:
            stage1, stage2 = self._numpy_rows(boxes, person, facing, ia, ib, (w, h), scene, context)
        index = np.stack([np.take(rows, ia), np.take(rows, ib)], axis=1).astype(np.int64)
        return PairFeatures(np.stack([np.take(ids, ia), np.take(ids, ib)], axis=1), index, stage1, stage2)

    def _numpy_rows(
        self,
        boxes: np.ndarray,
        person: np.ndarray,
        facing: tuple[np.ndarray, np.ndarray] | None,
        ia: np.ndarray,
        ib: np.ndarray,
        size: tuple[int, int],
        scene: Scene,
        context: np.ndarray | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Stage-1 (M, Fq) and stage-2 (M, 2 Fp + Fq) float32 rows by numpy: the definition of the pair block
        (and the path of the panorama wrap and the version-3 context columns, which the kernel lacks)."""
        cfg, fp, fq = self.config, self._fp, self._fq
        width = size[0] if cfg.wrap else None
        columns = pair_block(boxes, person, ia, ib, size, scene, cfg.min_speed, cfg.wrap)
        if facing is not None:
            columns += ori.frame_pair_values(boxes, facing, ia, ib, width)
        pair = np.array(columns).T  # (M, Fq) view of the (Fq, M) columns
        if context is not None:
            pair = np.concatenate([pair, context], 1)
        stage1 = finish(pair)
        person32 = finish(person)  # clamping is elementwise: clamp N people, not 2 M rows
        stage2 = np.empty((len(ia), 2 * fp + fq), np.float32)
        np.take(person32, ia, axis=0, out=stage2[:, :fp])
        np.take(person32, ib, axis=0, out=stage2[:, fp : 2 * fp])
        stage2[:, 2 * fp :] = stage1
        return stage1, stage2


class PairedgeSpec(FeatureSpec):
    """The ``pairedge`` feature spec (see the module docstring), in its current layout.

    Version 2 appends body orientation (:mod:`pairedge.core.features.orientation`) to both blocks; models of
    version 1 still load: :meth:`for_version` gives the version-1 layout they were trained with.

    Attributes:
        person_dim: Fp, values per person in stage 2 (``[a, b, pair]`` layout).
        pair_dim: Fq, values of the pair block (stage 1 = the pair block).
    """

    name = "pairedge"
    version = CURRENT_VERSION
    stage1_names = STAGE1_NAMES
    stage2_names = STAGE2_NAMES
    needs_flow = True
    flow_backend = "dis"
    default_flow_scale = 0.5
    config_type = PairedgeConfig
    viewpoint_names = VIEWPOINT_NAMES
    box_shape_names = frozenset({"a_aspect", "b_aspect"})
    person_dim = FP
    pair_dim = FQ

    def uses_flow(self, config: object = None) -> bool:
        """Whether an extractor with ``config`` uses optical flow (False in box-only mode)."""
        return bool(self.make_config(config).motion == "flow")

    def _new_extractor(self, config: PairedgeConfig) -> PairedgeExtractor:
        return PairedgeExtractor(config, orientation=self.version != "1", context=self.version == "3")

    @property
    def versions(self) -> tuple[str, ...]:
        return tuple(_VERSIONS)

    def for_version(self, version: str) -> PairedgeSpec | None:
        """The spec with the layout of ``version`` ("1": no orientation; "2": with; "3": with orientation
        and the long-horizon / group context), None when unknown."""
        return _VERSIONS.get(str(version))


def _layout(version: str, person_names: tuple[str, ...], pair_names: tuple[str, ...]) -> PairedgeSpec:
    """The spec with the column layout of ``version`` (its person block and pair block names)."""
    spec = PairedgeSpec()
    spec.version = version
    spec.stage1_names = pair_names
    spec.stage2_names = _stage2_names(person_names, pair_names)
    spec.person_dim, spec.pair_dim = len(person_names), len(pair_names)
    return spec


_VERSIONS: dict[str, PairedgeSpec] = {
    "1": _layout("1", PERSON_NAMES_V1, PAIR_NAMES_V1),
    "2": _layout("2", PERSON_NAMES_V2, PAIR_NAMES_V2),
    "3": _layout("3", PERSON_NAMES_V3, PAIR_NAMES_V3),
}
SPEC = _VERSIONS[CURRENT_VERSION]
