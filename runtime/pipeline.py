"""The streaming pipeline: frames and detections in, interactions and groups out, one frame at a time.

Per frame: validate -> track (when the detections carry no ids) -> optical flow, once (when the feature
spec uses it; the previous frame is kept in a reused buffer) -> pair features -> stage 1 on all pairs in one
batched call -> smoothing of ``p_interact`` -> gate ``p >= tau_interact`` -> stage 2 on the gated pairs in
one batched call -> smoothing of the class probabilities -> groups. Every stage is timed. Bad input never
raises mid-stream: it is dropped and reported in :attr:`FrameResult.diagnostics`.

The gate sees the *smoothed* stage-1 probability, so a pair does not flicker in and out of stage 2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from time import perf_counter_ns
from types import TracebackType
from typing import Any

import numpy as np
from pairedge.core.errors import BackendError, InputError, PairedgeError
from pairedge.core.features import PairFeatures
from pairedge.core.features.compiled import implementation as feature_kernels
from pairedge.core.types import Detections
from pairedge.runtime.backends import Backend, get_backend
from pairedge.runtime.backends.base import all_finite
from pairedge.runtime.backends.registry import canonical_backend_name
from pairedge.runtime.backends.tensorrt import TensorRTOptions
from pairedge.runtime.boxshape import BoxShapePolicy
from pairedge.runtime.config import PipelineConfig
from pairedge.runtime.decisions import gate_open, interact_probability, top1
from pairedge.runtime.flow import FlowBackend
from pairedge.runtime.flow.pooling import make_stream, pool_settings, push_frame
from pairedge.runtime.groups import groups_from_index
from pairedge.runtime.loading import ModelPair, find_models, make_flow_backend, spec_uses_flow
from pairedge.runtime.observers import FeatureObserver, FeatureObservers, Subscription
from pairedge.runtime.operating_point import OperatingPointPolicy
from pairedge.runtime.repair import InputRepair
from pairedge.runtime.smoothing import PairSmoother
from pairedge.runtime.streamstate import FrameState, StreamSnapshot, capture, decode, encode, restore
from pairedge.runtime.tracker import with_coasted
from pairedge.runtime.tracker_backends import make_tracker
from pairedge.runtime.types import Diagnostics, FrameResult
from pairedge.runtime.validate import shorten, validate_frame
from pairedge.runtime.viewpoint import SwitchLog

STAGES = ("validate", "track", "flow", "features", "stage1", "stage2", "smooth", "groups")
#: :meth:`Pipeline.describe` keys that change while a stream runs (not part of a results header).
RUN_KEYS = ("flow_frames", "flow_problem", "operating_point_switches")


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax of (N, C) logits as a new float32 array.

    The row max and sum run column by column (C is small): numpy's reductions along a short last axis are
    4-5x slower than C element-wise passes over the columns (46 vs 240 us for 4,950 x 3).
    """
    x = np.array(logits, np.float32)
    m = x[:, 0].copy()
    for k in range(1, x.shape[1]):
        np.maximum(m, x[:, k], out=m)
    x -= m[:, None]
    np.exp(x, out=x)
    total = x[:, 0].copy()
    for k in range(1, x.shape[1]):
        total += x[:, k]
    x /= total[:, None]
    return x


class Pipeline:
    """A per-stream pipeline. Instances are independent (no global state) and not thread-safe.

    Build it with :meth:`load`; use it as a context manager or call :meth:`close` to release the backends.
    The step runs three named policies, each owning its state: :attr:`repair` (input repair:
    :class:`~pairedge.runtime.repair.InputRepair`), :attr:`box_shape` (the fixed-ratio detector monitor:
    :class:`~pairedge.runtime.boxshape.BoxShapePolicy`) and :attr:`points` (operating-point switching:
    :class:`~pairedge.runtime.operating_point.OperatingPointPolicy`). :meth:`observe_features` shows the
    features each step classifies.
    """

    def __init__(
        self,
        models: ModelPair,
        stage1: Backend,
        stage2: Backend,
        flow: FlowBackend | None,
        config: PipelineConfig | None = None,
    ) -> None:
        self.config = config or PipelineConfig()
        self.models = models
        self.flow = flow
        self._owns_flow = False  # set by load(), which builds the flow backend from a name
        self.labels = models.labels
        cfg = self.config
        self.points = OperatingPointPolicy(models, cfg)
        self.tau_group = cfg.tau_group if cfg.tau_group is not None else models.threshold("tau_group")
        self.feature_config = cfg.features if cfg.features is not None else models.feature_config()
        self.extractor = models.spec.make_extractor(self.feature_config)
        apply_pair_radius(self.extractor, models.spec.name, cfg.pair_radius)
        self._pool = pool_settings(models.spec.make_config(self.feature_config))  # None: dense flow features
        self._stream = make_stream(flow, self._pool) if flow is not None else None
        self.box_shape = BoxShapePolicy(cfg.box_shape, models.spec, models.stage2.metadata.norm_mean)
        self.repair = InputRepair(cfg.validation, cfg.max_people)
        self._observers = FeatureObservers()
        self._tracker = make_tracker(cfg.tracker, cfg.tracker_config)
        self._tracking = False  # the built-in tracker gives this stream's ids
        self._smoother = PairSmoother(len(self.labels), cfg.smoothing)
        #: Frames whose flow field was computed, since load (0 when the flow never ran; see ``flow_problem``).
        self.flow_frames = 0
        #: Why the flow was last unavailable (a frame below the backend's minimum size, ...), or None.
        self.flow_problem: str | None = None
        # last: everything above may refuse the model or the config without sessions left open
        self.stage1, self.stage2 = stage1.activate(), stage2.activate()

    # -- the policies' decisions, as attributes of the pipeline -------------------------------------------
    @property
    def tau_interact(self) -> float:
        """The stage-1 gate threshold in force (the operating point's, or the config's)."""
        return self.points.tau_interact

    @property
    def confirm_s(self) -> float:
        """The link confirmation time in force, seconds."""
        return self.points.confirm_s

    @property
    def operating_point(self) -> str:
        """The configured operating point ("auto", "default" or a model's point name)."""
        return self.points.name

    @property
    def switches(self) -> SwitchLog:
        """The changes of the automatic operating point (``operating_point="auto"``) since load."""
        return self.points.switches

    @property
    def fixed_ratio_detector(self) -> float | None:
        """The width / height ratio at which the detector draws every box, once ``box_shape="auto"`` has
        judged it a fixed-ratio detector (box shape then ignored); None otherwise."""
        return self.box_shape.fixed_ratio

    def observe_features(self, observer: FeatureObserver) -> Subscription:
        """Call ``observer(detections, features)`` once per step that computes features, with the features
        stage 1 and stage 2 are given (see :data:`~pairedge.runtime.observers.FeatureObserver` for shapes).

        Returns:
            The handle that unregisters it: ``.remove()``, or use it as a context manager.
        """
        return self._observers.add(observer)

    @classmethod
    def load(
        cls,
        model: str | Path | Sequence[str | Path],
        backend: str = "auto",
        flow: str | FlowBackend | None = "auto",
        config: PipelineConfig | None = None,
        *,
        precision: str = "fp32",
    ) -> Pipeline:
        """Load a model and build the pipeline: what :meth:`pairedge.runtime.Deployment.load` calls.

        Open a model through :class:`~pairedge.runtime.Deployment` (``Deployment(folder, precision=...,
        backend=..., flow=...).load(config)``); call this directly only for what a Deployment cannot name:
        the two classifier files given one by one, or a :class:`FlowBackend` object the caller keeps.

        Args:
            model: a model folder with ``stage1.onnx`` and ``stage2.onnx`` (verified against its
                ``manifest.json`` when present; see :func:`pairedge.runtime.loading.find_models`), or those
                two files.
            backend: classifier backend name ("auto", "onnxruntime", "onnxruntime-cuda", ...).
            flow: "auto" (the backend the model's feature spec was defined with), a registered flow backend
                name, a :class:`FlowBackend`, or "none" (box-only).
            config: :class:`PipelineConfig`; None for the defaults.
            precision: "fp32" (``stage{1,2}.onnx``), "fp16" or "int8" (``stage{1,2}.{precision}.onnx``, made
                by ``pairedge calibrate``). ``pipeline.models.integrity`` says whether the files were
                verified.

        Raises:
            ModelError, BackendError, InputError: with the reason and how to fix it (ModelIntegrityError
                when a file does not match the folder's manifest).
        """
        config = config or PipelineConfig()
        models = find_models(model, precision=precision)
        feature_config = config.features if config.features is not None else models.feature_config()
        uses_flow = spec_uses_flow(models.spec, feature_config)
        flow_backend = make_flow_backend(flow, models.spec, uses_flow, config)
        owns_flow = not isinstance(flow, FlowBackend)  # a backend the caller passed stays theirs
        one_by_one = isinstance(model, Sequence) and not isinstance(model, str)
        try:
            options = config.backend_options
            if canonical_backend_name(backend) == "tensorrt" and not one_by_one:
                # a folder's files of one precision: their engines are that precision's (two files given
                # one by one: the backend reads each file's precision from the artefact table)
                options = TensorRTOptions.with_precision(options, models.precision)
            stage1 = get_backend(backend, models.stage1, options)
            stage2 = get_backend(backend, models.stage2, options)
            pipe = cls(models, stage1, stage2, flow_backend, config)
        except BaseException:
            if owns_flow and flow_backend is not None:
                flow_backend.close()  # the flow backend made here (GPU memory) does not outlive a failed load
            raise
        pipe._owns_flow = owns_flow
        return pipe

    # -- lifecycle ----------------------------------------------------------------------------------------
    def close(self) -> None:
        """Release the classifier backends, and the flow backend when :meth:`load` made it (GPU memory)."""
        self.stage1.deactivate()
        self.stage2.deactivate()
        if self._owns_flow and self.flow is not None:
            self.flow.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def warm_up(self, frame_size: tuple[int, int] | None = None, pairs: int = 64) -> None:
        """Run each classifier once on a batch of ``pairs`` zero rows, and the flow backend once on two blank
        frames of ``frame_size`` (W, H) when given, so that the first frames of a live source do not pay for
        the backends' first calls (lazy allocation, kernel selection). The stream state is not touched."""
        for backend, meta in (
            (self.stage1, self.models.stage1.metadata),
            (self.stage2, self.models.stage2.metadata),
        ):
            backend.infer(np.zeros((pairs, meta.num_features), np.float32))
        if self.flow is not None and frame_size is not None:
            w, h = frame_size
            blank = np.zeros((h, w), np.uint8)
            try:
                self.flow.compute(blank, blank)
            except (InputError, BackendError):
                pass  # the stream's own first frames will say why

    def reset(self) -> None:
        """Start a new stream (scene cut): forget flow, tracks, feature history and smoothing."""
        if self._stream is not None:
            self._stream.reset()
        self.extractor.reset()
        self._tracker.reset()
        self._tracking = False
        self._smoother.reset()
        self.repair.restart_clock()
        self.box_shape.reset()
        self.points.reset()

    # -- exact replay (parity): the decisions of a frame and the stream state at a point -----------------
    def frame_state(self) -> FrameState:
        """The decisions in force for the last frame stepped: box shape ignored or not (and the detector's
        fixed ratio), gate threshold and confirmation time. A replay gives them back with ``step(state=)``."""
        ratio = self.box_shape.fixed_ratio
        return FrameState(
            self.box_shape.ignored,
            float("nan") if ratio is None else ratio,
            float(self.tau_interact),
            float(self.confirm_s),
        )

    def snapshot(self) -> StreamSnapshot:
        """The stream state the next frame starts from: clock, feature history, smoothing, flow primed.

        With :meth:`restore`, the image of the last frame, the detections with the ids this stream gave
        them and a :class:`FrameState` per frame, a replay of a clip cut from the middle of a stream gives the
        features and outputs of the stream itself (the tracker and the monitors are not part of it: their
        results are what a replay is given).
        """
        values = {"clock.t0": _clock(self.repair.t0), "clock.last_t": _clock(self.repair.last_t)}
        arrays: dict[str, np.ndarray] = {}
        for prefix, obj in (("extractor", self.extractor), ("smoother", self._smoother)):
            v, a = capture(obj, prefix)
            values.update(v)
            arrays.update(a)
        primed = self._stream is not None and self._stream.primed
        return StreamSnapshot(values, arrays, primed)

    def restore(self, snapshot: StreamSnapshot, previous: np.ndarray | None = None) -> None:
        """Continue from ``snapshot`` (after :meth:`reset`); ``previous``: the frame before the next one, for
        the flow (required when ``snapshot.flow_primed``).

        Raises:
            InputError: the snapshot does not fit this pipeline (another spec or version), or the previous
                frame is missing or not a frame.
        """
        self.reset()
        restore(self.extractor, "extractor", snapshot.values, snapshot.arrays)
        restore(self._smoother, "smoother", snapshot.values, snapshot.arrays)
        t0, last = (decode(snapshot.values.get(k)) for k in ("clock.t0", "clock.last_t"))
        self.repair.t0, self.repair.last_t = _clock_value(t0, "t0"), _clock_value(last, "last_t")
        if self._stream is None or not snapshot.flow_primed:
            return
        image, reason = validate_frame(previous, self.config.validation)
        if image is None:
            raise InputError(f"restore: the stream's flow had a previous frame; give it ({reason})")
        push_frame(self._stream, image, Detections.empty(), self._pool)

    def describe_start(self) -> dict[str, Any]:
        """:meth:`describe` for a results header written before the stream: without the labels and the
        :data:`RUN_KEYS`, and an automatic operating point said as where it starts."""
        out = {k: v for k, v in self.describe().items() if k not in (*RUN_KEYS, "labels")}
        out["operating_point"] = self.points.describe_start()
        return out

    def describe(self) -> dict[str, Any]:
        """What this pipeline runs and, for summaries, what it did: ``flow_frames`` (frames with a flow field
        since load; None without flow), ``flow_problem``, ``operating_point_switches``."""
        return {
            "feature_spec": f"{self.models.spec.name} v{self.models.spec.version}",
            "feature_kernels": feature_kernels(),
            "flow": repr(self.flow) if self.flow is not None else "none",
            "stage1": repr(self.stage1),
            "stage2": repr(self.stage2),
            "labels": list(self.labels),
            "operating_point": self.points.describe(),
            "tau_interact": self.tau_interact,
            "tau_group": self.tau_group,
            "confirm_s": self.confirm_s,
            "box_shape": self.box_shape.describe(),
            "precision": self.models.precision,
            "model_integrity": self.models.integrity,
            "flow_frames": self.flow_frames if self._stream is not None else None,
            "flow_problem": self.flow_problem,
            "operating_point_switches": list(self.switches.records),
        }

    # -- the step -----------------------------------------------------------------------------------------
    def step(
        self,
        frame: np.ndarray | None,
        detections: Detections | None,
        timestamp: float,
        *,
        frame_index: int | None = None,
        image_size: tuple[int, int] | None = None,
        frame_problem: str | None = None,
        state: FrameState | None = None,
    ) -> FrameResult:
        """Process one frame.

        Args:
            frame: (H, W, 3) uint8 BGR or (H, W) uint8 gray; None in box-only mode (then give ``image_size``
                once, or keep passing it).
            detections: the frame's boxes; ``track_ids`` all -1 lets the built-in tracker assign ids.
            timestamp: seconds, increasing (a non-finite or decreasing value is repaired and reported). Any
                origin: the stages (tracker, features, link confirmation) see seconds since the stream's first
                frame, so epoch stamps (~1.7e9 s, as on a robot) give the results of the same clip from 0.
            frame_index: recorded in the result (default: the number of frames seen before this one).
            image_size: ``(W, H)`` when no frame is given.
            frame_problem: why ``frame`` is None when the caller had one to give (e.g. an image file refused
                before decoding): the frame's ``frame_dropped`` reason instead of "no frame given" (a note
                for a box-only pipeline, which needs no frame).
            state: the decisions to use for this frame instead of the monitors' (an exact replay of a recorded
                stream, :meth:`frame_state`): give one for every frame of such a replay, or none at all.

        Returns:
            The :class:`FrameResult`. Never raises for malformed frames or detections.
        """
        clock = _Clock()
        notes: list[str] = []
        index, timestamp, elapsed = self.repair.clock(frame_index, timestamp, notes)
        try:
            box_only = self._stream is None
            image, frame_reason, size = self.repair.frame(frame, image_size, frame_problem, box_only, notes)
            dets, dropped = self.repair.detections(detections, size)
            self._decide(dets, size, state, notes)
            clock.lap("validate")
            clock.stage = "track"
            dets, coasted = self._assign_ids(dets, elapsed, dropped, size, image)
            clock.lap("track")
            clock.stage = "flow"
            flow = self._flow(image, notes, dets)
            clock.lap("flow")
            clock.gpu_ms = self.flow.gpu_ms() if flow is not None and self.flow is not None else None
            clock.stage = "features"
            features = self._features(dets, elapsed, size, flow, notes)
            clock.lap("features")
            clock.stage = "stage1"
            features, p, label_ids, probs, pending, non_finite = self._classify(features, elapsed, clock)
            clock.stage = "groups"
            groups = groups_from_index(
                features.index, dets.track_ids, p, label_ids, probs, self.tau_group, self.labels, pending
            )
            clock.lap("groups")
            self.points.record(index)
        except Exception as exc:  # noqa: BLE001 - last resort: report the frame as dropped, keep the stream
            return self._failed(index, timestamp, clock, notes, exc)
        diagnostics = Diagnostics(
            frame_dropped=frame_reason, dropped=dropped, notes=tuple(notes), non_finite_outputs=non_finite
        )
        return FrameResult(
            frame_index=index,
            timestamp=timestamp,
            track_ids=dets.track_ids.copy(),
            boxes=dets.boxes.copy(),
            coasted=coasted,
            pairs=features.pairs,
            p_interact=p,
            interacting=label_ids >= 0,
            label_ids=label_ids,
            probs=probs,
            labels=self.labels,
            groups=groups,
            timings_ms=clock.result(),
            diagnostics=diagnostics,
        )

    def _decide(
        self, dets: Detections, size: tuple[int, int] | None, state: FrameState | None, notes: list[str]
    ) -> None:
        """This frame's policy decisions: the replay's ``state`` when given, else the operating point and the
        box-shape monitor judge the validated detector boxes (not the tracker's coasted ones)."""
        if state is not None:
            self.box_shape.give(state.box_shape_ignored, state.aspect)
            self.points.give(state.tau_interact, state.confirm_s)
            return
        for note in (self.points.observe(dets.boxes, size), self.box_shape.observe(dets.boxes, size)):
            if note is not None:
                notes.append(note)

    def _failed(
        self,
        index: int,
        timestamp: float,
        clock: _Clock,
        notes: list[str],
        exc: Exception,
    ) -> FrameResult:
        """The result of a frame whose ``clock.stage`` raised unexpectedly: no people, no pairs, reported.

        The stream state the stage may have left half-updated is reset (as at a scene cut; track ids keep
        increasing), so the next frame starts clean instead of building on a possibly wrong state.
        """
        stage = clock.stage
        self.reset()
        self.repair.restart_clock(last_t=timestamp)
        message = shorten(exc, 200, text=True)
        error = f"{stage}: {type(exc).__name__}: {message}; frame dropped, stream state reset"
        empty = self._no_pairs()
        m = 0
        return FrameResult(
            frame_index=index,
            timestamp=timestamp,
            track_ids=np.zeros(0, np.int64),
            boxes=np.zeros((0, 4), np.float32),
            pairs=empty.pairs,
            p_interact=np.zeros(m, np.float32),
            interacting=np.zeros(m, bool),
            label_ids=np.zeros(m, np.int64),
            probs=np.zeros((m, len(self.labels)), np.float32),
            labels=self.labels,
            groups=(),
            timings_ms=clock.result(),
            diagnostics=Diagnostics(
                frame_dropped=error, notes=tuple(notes), stage_error=f"{stage}: {type(exc).__name__}"
            ),
        )

    def _assign_ids(
        self,
        dets: Detections,
        timestamp: float,
        dropped: dict[str, int],
        size: tuple[int, int] | None,
        image: np.ndarray | None = None,
    ) -> tuple[Detections, np.ndarray]:
        """Ids from the built-in tracker when the detections carry none, plus the tracks it coasts through a
        short detection gap (``TrackerConfig.coast_frames``).

        Returns:
            The detections with ids (rows without one dropped and counted), coasted people appended, and an
            (N,) bool mask of the coasted rows.
        """
        mode = self.config.tracking
        missing = dets.track_ids < 0
        untracked = len(dets) == 0 and self._tracking  # an empty frame still ages the tracks
        if mode == "always" or (mode == "auto" and (untracked or (len(dets) > 0 and missing.all()))):
            ids = self._tracker.step(dets.boxes, timestamp, dets.scores, image)  # image: camera-motion comp.
            self._tracking = True
            dets = Detections(dets.boxes, ids, dets.scores, dets.orientation, dets.orientation_conf)
            missing = ids < 0
            reason = "suppressed by the tracker (duplicate or low score)"
        else:
            self._tracking = False
            reason = "no track id (mixed with detections that have ids)"
        if missing.any():
            dropped[reason] = int(missing.sum())
            dets = dets.subset(~missing)
        coasted = np.zeros(len(dets), bool)
        if self._tracking and self.config.tracker_config.coast_frames > 0:
            dets, coasted = with_coasted(self._tracker, dets, timestamp, size, self.config.max_people)
        return dets, coasted

    def _flow(self, image: np.ndarray | None, notes: list[str], dets: Detections) -> Any:
        """Dense (h, w, 2) flow, a PooledFlow (fusing backends, e.g. flow='cuda'), or None."""
        if self._stream is None:
            return None
        if image is None:
            self._stream.reset()
            return None
        flow = push_frame(self._stream, image, dets, self._pool)
        if flow is None:
            reason = self._stream.reason or "flow not available for this frame"
            notes.append(reason)
            if self.flow_problem is None or not reason.startswith("no previous frame"):
                self.flow_problem = reason  # the first frame's reason only until a real one comes
        else:
            self.flow_frames += 1
        return flow

    def _features(
        self,
        dets: Detections,
        timestamp: float,
        size: tuple[int, int] | None,
        flow: np.ndarray | None,
        notes: list[str],
    ) -> PairFeatures:
        """The pairs' features as stage 1 and stage 2 get them: pairs with non-finite features dropped, box
        shape neutralised when ignored; shown to the feature observers. No pairs when none can be computed."""
        if size is None:
            if len(dets) > 1:
                notes.append("image size unknown (no frame and no image_size): pairs skipped")
            return self._no_pairs()
        scale = self.flow.scale if self.flow is not None else 1.0
        try:
            features = self.extractor.step(dets, timestamp, size, flow, scale)
        except PairedgeError as exc:  # defensive: validated input should never get here
            notes.append(f"features failed ({exc}); frame skipped")
            return self._no_pairs()
        if not (all_finite(features.stage1) and all_finite(features.stage2)):
            finite = np.isfinite(features.stage1).all(axis=1) & np.isfinite(features.stage2).all(axis=1)
            if not finite.all():
                notes.append(f"{int((~finite).sum())} pair(s) with non-finite features dropped")
                features = _subset(features, finite)
        self.box_shape.neutralise(features)
        if self._observers:
            self._observers.notify(dets, features)
        return features

    def _no_pairs(self) -> PairFeatures:
        return PairFeatures.empty(self.models.spec.stage1_dim, self.models.spec.stage2_dim)

    def _classify(
        self, features: PairFeatures, timestamp: float, clock: _Clock
    ) -> tuple[PairFeatures, np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
        """Stage 1 on all pairs, smoothing, gate (held for ``confirm_s``), stage 2 on the gated pairs,
        smoothing.

        Pairs whose stage-1 or stage-2 logits are NaN / inf are removed from the frame (their probability is
        unknown) and counted per stage; they never reach the smoothing state.

        Returns:
            The kept pairs' features, (M,) smoothed p, (M,) label ids, (M, C) probs, (M,) bool pending (gate
            open for less than ``confirm_s``: not reported, not grouped), stage -> pairs removed.
        """
        non_finite: dict[str, int] = {}
        logits = self.stage1.infer(features.stage1) if len(features) else np.zeros((0, 2), np.float32)
        bad = ~np.isfinite(logits).all(axis=1)
        if bad.any():
            non_finite["stage1"] = int(bad.sum())
            features, logits = _subset(features, ~bad), logits[~bad]
        p_raw = interact_probability(logits) if len(features) else np.zeros(0, np.float32)
        clock.lap("stage1")
        clock.stage = "smooth"
        m = len(features)
        p = self._smoother.smooth_interact(features.pairs, p_raw)
        above = gate_open(p, self.tau_interact)
        confirmed = self._smoother.confirm(above, timestamp, self.confirm_s) if self.confirm_s > 0 else above
        gated = np.flatnonzero(confirmed)
        clock.lap("smooth")
        clock.stage = "stage2"
        raw_probs = None
        if len(gated):
            logits2 = self.stage2.infer(np.ascontiguousarray(features.stage2[gated]))
            ok = np.isfinite(logits2).all(axis=1)
            if not ok.all():
                non_finite["stage2"] = int((~ok).sum())
            gated, logits2 = gated[ok], logits2[ok]
            raw_probs = softmax(logits2) if len(gated) else None
        clock.lap("stage2")
        clock.stage = "smooth"
        label_ids = np.full(m, -1, np.int64)
        probs = np.zeros((m, len(self.labels)), np.float32)
        if raw_probs is not None:
            smoothed = self._smoother.smooth_probs(gated, raw_probs)
            probs[gated] = smoothed
            label_ids[gated] = top1(smoothed)
        clock.lap("smooth")
        pending = above & ~confirmed
        if "stage2" in non_finite:  # gated pairs without a valid class: not reported as interacting
            keep = ~confirmed | (label_ids >= 0)
            features, p, label_ids, probs = _subset(features, keep), p[keep], label_ids[keep], probs[keep]
            pending = pending[keep]
        return features, p, label_ids, probs, pending, non_finite


def apply_pair_radius(extractor: Any, spec_name: str, radius: float | None) -> None:
    """Give ``extractor`` the config's ``pair_radius`` (only the ``pairedge`` spec's extractor takes one).

    Raises:
        InputError: a radius for a spec that computes every pair.
    """
    if radius is None:
        return
    if not hasattr(extractor, "pair_radius"):
        raise InputError(
            f"pair_radius: the {spec_name!r} feature spec computes every pair; only the pairedge "
            "spec takes a radius"
        )
    extractor.pair_radius = float(radius)


def _clock(t: float | None) -> Any:
    return encode(None if t is None else float(t))


def _clock_value(value: Any, name: str) -> float | None:
    """A restored clock value: None (not started) or a finite float."""
    if value is None or (isinstance(value, float) and math.isfinite(value)):
        return value
    raise InputError(
        f"stream state clock.{name}: expected a finite time in seconds or none, got {value!r:.40}"
    )


def _subset(features: PairFeatures, keep: np.ndarray) -> PairFeatures:
    """The pairs selected by a (M,) bool mask."""
    rows = np.flatnonzero(keep)
    return PairFeatures(
        features.pairs[rows], features.index[rows], features.stage1[rows], features.stage2[rows]
    )


class _Clock:
    """Per-stage wall time with ``perf_counter_ns``; a stage lapped twice accumulates."""

    def __init__(self) -> None:
        self._start = self._last = perf_counter_ns()
        self._ns = dict.fromkeys(STAGES, 0)
        self.stage = "validate"  # the stage running now (named in the report if it raises)
        self.gpu_ms: float | None = None  # GPU time of the flow stage (CUDA events), when on a GPU

    def lap(self, stage: str) -> None:
        now = perf_counter_ns()
        self._ns[stage] += now - self._last
        self._last = now

    def result(self) -> dict[str, float]:
        out = {k: v / 1e6 for k, v in self._ns.items()}
        out["total"] = (self._last - self._start) / 1e6
        if self.gpu_ms is not None:
            out["flow_gpu"] = self.gpu_ms
        return out
