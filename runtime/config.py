"""Configuration of the streaming pipeline: frozen dataclasses, ``None`` meaning "the model's default"."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, is_dataclass
from typing import Any

from pairedge.core.errors import InputError
from pairedge.core.settings import setting
from pairedge.runtime.boxshape import MODES as BOX_SHAPE_MODES
from pairedge.runtime.flow.dis import PRESETS as DIS_PRESETS
from pairedge.runtime.tracker import TrackerConfig
from pairedge.runtime.tracker_backends import DEFAULT_TRACKER, TRACKER_NAMES, check_tracker_name

#: When the tracker gives the ids (``PipelineConfig.tracking``).
TRACKING_MODES = ("auto", "always", "never")


@dataclass(frozen=True)
class FlowConfig:
    """Optical-flow settings (which flow backend runs is the deployment's: ``Deployment.flow``).

    Attributes:
        preset: DIS preset ("ultrafast", "fast", "medium"); None = "fast". Ignored by other backends.
        scale: resize factor in (0, 1]; None = the feature spec's ``default_flow_scale``.
    """

    preset: str | None = field(
        default=None,
        metadata=setting(
            "DIS preset: ultrafast, fast or medium; default: fast (other flow backends ignore it).",
            name="flow_preset",
            choices=tuple(DIS_PRESETS),
        ),
    )
    scale: float | None = field(
        default=None,
        metadata=setting(
            "Flow resize factor in (0, 1]; default: the model's feature spec's.", name="flow_scale", high=1.0
        ),
    )


@dataclass(frozen=True)
class SmoothingConfig:
    """Per-pair temporal smoothing (exponential moving average, per frame).

    Attributes:
        alpha: weight of the newest value in (0, 1]; 1.0 turns smoothing off.
        grace_frames: frames a pair's state (smoothed probabilities, link confirmation) survives while one of
            its tracks is missing (0: evicted at once). The default 8 is chosen with
            ``TrackerConfig.coast_frames`` on simulator validation scenes (``benchmarks/bench_tracker.py``):
            a detector's short misses then no longer restart a pair's confirmation.
        max_pairs: capacity; the least recently seen pairs are evicted beyond it.
    """

    alpha: float = 0.6
    grace_frames: int = 8
    max_pairs: int = 20_000

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha <= 1.0:
            raise InputError(f"smoothing alpha: expected a number in (0, 1], got {self.alpha}")
        if self.grace_frames < 0 or self.max_pairs < 1:
            raise InputError(f"smoothing: expected grace_frames >= 0 and max_pairs >= 1, got {self}")


@dataclass(frozen=True)
class ValidationConfig:
    """What counts as a malformed detection (dropped and reported, never raised).

    Attributes:
        max_box_factor: boxes wider or taller than this many image widths / heights are dropped as huge.
        min_box_side: boxes narrower or shorter than this (pixels) are dropped.
        min_image_side: frames smaller than this (pixels) on a side are dropped.
    """

    max_box_factor: float = 4.0
    min_box_side: float = 1.0
    min_image_side: int = 16


@dataclass(frozen=True)
class PipelineConfig:
    """Everything :class:`~pairedge.runtime.pipeline.Pipeline` can be told.

    Attributes:
        tau_interact: stage-1 gate on the (smoothed) interaction probability; None = model metadata
            ``thresholds["p_interact"]`` or 0.5.
        tau_group: pairs with ``p_interact >= tau_group`` join groups; None = metadata ``tau_group`` or 0.5.
        confirm_s: seconds a pair's gate must stay open, without a break, before the pair is reported as
            interacting (and joins groups): people who cross or pass each other for a moment are not linked.
            None = the model's ``extra["confirm_s"]`` (the bundled model's is chosen on simulator validation
            clips, see docs/training.md) or 0 (report at once).
        operating_point: a named operating point of the model (its own ``p_interact`` threshold and
            ``confirm_s``, e.g. the bundled model's ``"surveillance"`` for elevated cameras with many
            strangers near each other); "default" = the model's main thresholds; None or "auto" = the main
            ones until the camera height estimated from the boxes (:mod:`pairedge.runtime.viewpoint`) reaches
            a point's ``min_camera_height`` (the bundled model: 1.3 body heights), then that point.
            ``tau_interact`` and ``confirm_s``, when given, still win.
        tracking: when the tracker gives the ids: "auto" (when the detections carry none), "always" (given
            ids are ignored) or "never".
        tracker: which tracker gives the ids (:mod:`pairedge.runtime.tracker_backends`): "iou" (the built-in
            one, the default), "bytetrack", "ocsort" or "botsort" (camera-motion compensation; these three
            need the ``trackers`` library and run with its defaults; ``tracker_config`` is the built-in one's
            only). The same name as ``pairedge run --tracker`` and the ROS parameter ``tracker``.
        tracker_config: options of the built-in tracker.
        flow: optical-flow options.
        smoothing: per-pair smoothing options.
        validation: input sanitising options.
        max_people: at most this many detections per frame go on to tracking and pairing (the most confident
            ones; ties go to the larger, i.e. usually nearer, box); the rest are dropped and counted in the
            diagnostics. It bounds the work per frame: at most ``n (n - 1) / 2`` pairs (4,950 at the default
            100). None = no cap (the work then grows with the square of the people in a frame).
        features: options of the feature spec (a mapping of its config fields); None = those stored in the
            model metadata (``extra["feature_config"]``), else the spec's defaults.
        box_shape: what to do with the spec's box-shape columns (width-to-height ratio, a posture cue;
            :mod:`pairedge.runtime.boxshape`): "auto" sets them to the model's training mean once the
            detector is seen to draw every box at one ratio (a sliding-window detector such as ACF or HOG,
            whose box shape says nothing about the person), "off" always uses them, "ignore" never does.
        pair_radius: pairs whose box centres are farther apart than this many mean box heights get no features
            and no classifier call, and are not in the frame's results (``pairedge`` spec only); None (the
            default) = every pair. A work bound for sparse crowds: ``benchmarks/bench_pair_radius.py``
            measures which radius loses no link of the full pipeline (docs/runtime.md).
        backend_options: the classifier backend's frozen options dataclass, its ``Backend.options_type``
            (``OrtOptions`` for the ONNX Runtime backends, ``TensorRTOptions`` for ``tensorrt``); None = the
            backend's defaults. An instance of another backend's type is refused when the backend is made.
    """

    tau_interact: float | None = None
    tau_group: float | None = None
    confirm_s: float | None = field(
        default=None,
        metadata=setting(
            "Seconds a pair must stay above the stage-1 threshold before it is reported as interacting "
            "(strangers who cross for a moment are not linked); default: the model's (the bundled model's "
            "is chosen on simulator validation clips), 0 = at once.",
            low=0.0,
            high=60.0,
        ),
    )
    operating_point: str | None = field(
        default=None,
        metadata=setting(
            "A named operating point of the model: its own stage-1 threshold and link confirmation time. The "
            "bundled model has 'surveillance' (elevated cameras with many strangers near each other); "
            "'default': the model's main one; default (auto): the main one until the camera height estimated "
            "from the boxes calls for another.",
        ),
    )
    tracking: str = field(
        default="auto",
        metadata=setting(
            "When the tracker gives the ids: auto (detections that carry none), always (given ids are "
            "ignored) or never (the detections' ids as they are).",
            choices=TRACKING_MODES,
            ros=True,
        ),
    )
    tracker: str = field(
        default=DEFAULT_TRACKER,
        metadata=setting(
            "Tracker that gives the ids: iou (built in, the default), bytetrack, ocsort or botsort "
            "(camera-motion compensation, for a moving camera); the last three need pip install "
            "'pairedge[trackers]' (docs/tracking.md) and run with the trackers library's defaults.",
            choices=TRACKER_NAMES,
            ros=True,
        ),
    )
    tracker_config: TrackerConfig = field(default_factory=TrackerConfig)
    flow: FlowConfig = field(default_factory=FlowConfig)
    smoothing: SmoothingConfig = field(default_factory=SmoothingConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    max_people: int | None = field(
        default=100,
        metadata=setting(
            "At most this many detections per frame go on (the most confident); bounds the work per frame at "
            "n(n-1)/2 pairs.",
            low=2,
            high=100_000,
            ros=True,
        ),
    )
    features: Mapping[str, Any] | None = None
    box_shape: str = field(
        default="auto",
        metadata=setting(
            "Box width/height as a posture cue: auto ignores it once every box has the same shape (a "
            "sliding-window detector such as ACF or HOG), off always uses it, ignore never does.",
            choices=BOX_SHAPE_MODES,
        ),
    )
    backend_options: object | None = None
    pair_radius: float | None = field(
        default=None,
        metadata=setting(
            "Skip pairs whose box centres are more than this many mean box heights apart (no features, no "
            "classifier call; they are not in the results); default: every pair. "
            "benchmarks/results/bench_pair_radius.md measures a radius that lost no link.",
            low=0.0,
        ),
    )

    def __post_init__(self) -> None:
        if self.tracking not in TRACKING_MODES:
            raise InputError(f"tracking: expected one of {', '.join(TRACKING_MODES)}, got {self.tracking!r}")
        if self.tracker in TRACKING_MODES:
            raise InputError(
                f"tracker: names the tracker that gives the ids ({', '.join(TRACKER_NAMES)}), got "
                f"{self.tracker!r}; when it runs is tracking={self.tracker!r}"
            )
        object.__setattr__(self, "tracker", check_tracker_name(self.tracker))
        if self.box_shape not in BOX_SHAPE_MODES:
            raise InputError(
                f"box_shape: expected one of {', '.join(BOX_SHAPE_MODES)}, got {self.box_shape!r}"
            )
        for name in ("tau_interact", "tau_group"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise InputError(f"{name}: expected a probability in [0, 1], got {value}")
        if self.confirm_s is not None:
            check_confirm_s(self.confirm_s, "confirm_s")
        point = self.operating_point
        if point is not None and (not isinstance(point, str) or not point.strip()):
            raise InputError(
                f"operating_point: expected a name ('auto', 'default' or the model's), got {point!r}"
            )
        options = self.backend_options
        if options is not None and (isinstance(options, type) or not is_dataclass(options)):
            raise InputError(
                f"backend_options: expected the backend's options dataclass (OrtOptions, TensorRTOptions) or "
                f"None, got {type(options).__name__}"
            )
        cap = self.max_people
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 2):
            raise InputError(
                f"max_people: expected an integer >= 2 (or None for no cap), got {cap!r}; the default is 100"
            )
        radius = self.pair_radius
        if radius is not None and (
            isinstance(radius, bool) or not isinstance(radius, int | float) or not 0 < radius < float("inf")
        ):
            raise InputError(
                f"pair_radius: expected a positive number of body heights (or None), got {radius!r}"
            )


#: The longest link confirmation accepted (seconds).
MAX_CONFIRM_S = 60.0


def check_confirm_s(value: object, where: str) -> float:
    """``value`` as a float in [0, :data:`MAX_CONFIRM_S`] seconds, else :class:`InputError` naming
    ``where``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= MAX_CONFIRM_S:
        raise InputError(f"{where}: expected seconds in [0, {MAX_CONFIRM_S:g}], got {value!r}")  # NaN too
    return float(value)
