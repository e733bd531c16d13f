"""Configuration of the scene simulator: frozen dataclasses and the named presets.

A :class:`SimConfig` fully describes a scene family; with a seed it fixes every pixel and label. The presets
(``static``, ``moving``, ``panorama``, ``crowd``, ``noisy``) are plain instances; ``surveillance`` is a
family whose camera is drawn from the seed (:func:`surveillance_config`). The fixed ones are built with
:func:`dataclasses.replace`, so a user can start from one and change a field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import numpy as np
from pairedge.core.errors import InputError

CAMERA_KINDS = ("static", "moving", "panorama")
GROUNDS = ("pavement", "grass")


@dataclass(frozen=True)
class CameraConfig:
    """Camera model and ego-motion.

    ``static`` and ``moving`` are pinhole cameras looking level; the horizon sits at ``horizon * height``
    (an off-centre principal point, as from a camera tilted slightly down). ``panorama`` is a cylindrical
    360-degree camera (JRDB stitched images are 3760 x 480) with horizontal wrap-around.

    Ego-motion is a 2D affine transform of a larger pre-rendered canvas (pan = translation, forward motion
    = zoom about the horizon point, shake = small translation + roll), so the background motion applied
    between two frames is known exactly; it ignores parallax (see docs/formats.md).

    Attributes:
        kind: "static", "moving" or "panorama".
        width, height: frame size in pixels.
        fps: frames per second (timestamps are ``index / fps``).
        height_m: camera height above the ground in metres.
        hfov_deg: horizontal field of view of the pinhole cameras, degrees (ignored by ``panorama``).
        horizon: horizon row as a fraction of the frame height.
        margin: extra canvas around the frame on each side, as a fraction of the frame size (``moving``).
        pan_px: amplitude of the lawnmower pan sweep in frame pixels.
        stripe_s: duration of one lawnmower stripe (forward creep) in seconds; a turn takes a quarter of it.
        zoom_max: scale reached at the end of a stripe (forward motion makes people grow).
        shake_px: standard deviation of the per-frame shake translation, pixels.
        shake_deg: standard deviation of the per-frame roll, degrees.
        yaw_deg_s: panorama rotation speed of the robot, degrees per second (a slow sinusoid of this peak).
    """

    kind: str = "static"
    width: int = 640
    height: int = 480
    fps: float = 15.0
    height_m: float = 1.2
    hfov_deg: float = 70.0
    horizon: float = 0.38
    margin: float = 0.0
    pan_px: float = 0.0
    stripe_s: float = 8.0
    zoom_max: float = 1.0
    shake_px: float = 0.0
    shake_deg: float = 0.0
    yaw_deg_s: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in CAMERA_KINDS:
            raise InputError(f"camera kind: expected one of {CAMERA_KINDS}, got {self.kind!r}")
        if not (16 <= self.width <= 8192 and 16 <= self.height <= 4096):
            raise InputError(
                f"camera size: expected 16..8192 x 16..4096 pixels, got {self.width}x{self.height}"
            )
        if not (0.05 <= self.horizon <= 0.9) or self.fps <= 0 or self.height_m <= 0:
            raise InputError(
                "camera: expected 0.05 <= horizon <= 0.9, fps > 0 and height_m > 0, got "
                f"horizon={self.horizon}, fps={self.fps}, height_m={self.height_m}"
            )
        if self.zoom_max < 1.0 or self.margin < 0:
            raise InputError(
                f"camera: expected zoom_max >= 1 and margin >= 0, got {self.zoom_max}, {self.margin}"
            )


@dataclass(frozen=True)
class CrowdConfig:
    """Who is in the scene and how they behave.

    Attributes:
        people: target number of people in the world area (new walkers arrive when below it).
        depth_m: (near, far) limits of the ground area people use, metres from the camera.
        share_walk, share_stand, share_sit: initial mix of social units by mode (normalised).
        group_sizes: relative weights of unit sizes 1, 2, 3, 4.
        benches: number of benches (sitting units sit on them).
        event_s: mean time between events (leave, walk away, join) of a standing / sitting unit, seconds.
        approach_share: fraction of new walkers that head for a standing unit and join it.
        stop_share: fraction of walking groups that stop for a conversation at some point.
        pass_radius_m: pairs closer than this with one of them walking are ``passing_by``.
        leave_radius_m, leave_s: a pair stays ``leaving`` while closer than this and for at most this long.
        ground: "pavement" or "grass" (texture of the ground plane).
    """

    people: int = 10
    depth_m: tuple[float, float] = (2.5, 12.0)
    share_walk: float = 0.45
    share_stand: float = 0.35
    share_sit: float = 0.20
    group_sizes: tuple[float, float, float, float] = (0.35, 0.35, 0.2, 0.1)
    benches: int = 2
    event_s: float = 12.0
    approach_share: float = 0.4
    stop_share: float = 0.3
    pass_radius_m: float = 2.5
    leave_radius_m: float = 5.0
    leave_s: float = 6.0
    ground: str = "pavement"

    def __post_init__(self) -> None:
        if not (0 <= self.people <= 500):
            raise InputError(f"crowd: expected 0..500 people, got {self.people}")
        near, far = self.depth_m
        if not (0.5 <= near < far):
            raise InputError(f"crowd depth_m: expected 0.5 <= near < far, got {self.depth_m}")
        if self.ground not in GROUNDS:
            raise InputError(f"crowd ground: expected one of {GROUNDS}, got {self.ground!r}")
        if min(self.group_sizes) < 0 or sum(self.group_sizes) <= 0:
            raise InputError(f"crowd group_sizes: expected non-negative weights, got {self.group_sizes}")


@dataclass(frozen=True)
class NoiseConfig:
    """Detector noise applied to ``SimFrame.detections`` only (the truth stays exact).

    Attributes:
        jitter: standard deviation of box centre and size noise, as a fraction of the box width / height.
        miss_rate: probability that a fully visible person is missed in a frame.
        occluded_miss_rate: added miss probability, scaled by the hidden fraction of the person.
        switch_per_s: rate of identity switches per track and second (the track continues with a new id).
        swap_prob: probability per frame that two overlapping tracks (IoU > 0.3) exchange ids.
        fp_per_frame: mean number of false positives per frame (Poisson).
        fixed_aspect: 0 (a detector whose boxes fit the person), or the one width-to-height ratio at which
            a sliding-window detector (ACF, HOG, DPM) draws every box, around the box centre at its height
            (PETS 2009's ACF detections: 0.44). A seated person's box is then no wider than a walker's.
        miss_persistence: probability that a person missed in the previous frame is missed again (on top of
            the per-frame rates): real misses come in runs (a pose, a shadow, a partial occlusion lasts), so
            the mean run is ``1 / (1 - miss_persistence)`` frames instead of one.
        duplicate_rate: probability per detected person and frame of a second box on them (a detector with
            loose non-maximum suppression): shifted and rescaled (IoU with the first box 0.34-0.83, 5th-95th
            percentile), lower score, a fresh id.
        duplicate_persistence: probability that a person with a duplicate box in the previous frame has one
            again, at the same offset (a duplicate comes from how the person looks, which lasts); runs of
            ``1 / (1 - duplicate_persistence)`` frames on average. Below ``duplicate_rate`` it has no effect.
        detector_nms: 0 (off), or the IoU above which the detector's own greedy non-maximum suppression
            removes the lower-scored of two boxes (people, duplicates and false positives alike). A real
            detector's duplicates that survive it overlap their person by less than this, which is what a
            tracker's suppression must then catch; people who overlap more lose a box as well.
    """

    jitter: float = 0.03
    miss_rate: float = 0.03
    occluded_miss_rate: float = 0.4
    switch_per_s: float = 0.01
    swap_prob: float = 0.05
    fp_per_frame: float = 0.2
    fixed_aspect: float = 0.0
    miss_persistence: float = 0.0
    duplicate_rate: float = 0.0
    duplicate_persistence: float = 0.0
    detector_nms: float = 0.0

    def __post_init__(self) -> None:
        for name in ("miss_persistence", "duplicate_rate", "duplicate_persistence", "detector_nms"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0.0 <= value < 1.0):
                raise InputError(f"noise {name}: expected a value in [0, 1), got {value}")
        if not (math.isfinite(self.fixed_aspect) and 0.0 <= self.fixed_aspect <= 5.0):
            raise InputError(
                f"noise fixed_aspect: expected 0 (off) or a ratio in (0, 5], got {self.fixed_aspect}"
            )


@dataclass(frozen=True)
class LightingConfig:
    """Global illumination: a slow gain drift, optional flicker and sensor noise.

    Attributes:
        gain_amplitude: peak relative change of the global gain (0.15 = +-15 %).
        gain_period_s: period of the slow drift, seconds.
        flicker: standard deviation of an extra per-frame gain jitter.
        sensor_noise: standard deviation of additive pixel noise (grey levels).
    """

    gain_amplitude: float = 0.08
    gain_period_s: float = 20.0
    flicker: float = 0.0
    sensor_noise: float = 0.0


@dataclass(frozen=True)
class SimConfig:
    """Everything that defines a simulated scene family (add a seed to fix one scene).

    Attributes:
        name: preset name, written to ``scene.json``.
        camera, crowd, noise, lighting: see the respective classes.
        min_visible_px: a person counts as visible when at least this many of its pixels are in view.
    """

    name: str = "custom"
    camera: CameraConfig = field(default_factory=CameraConfig)
    crowd: CrowdConfig = field(default_factory=CrowdConfig)
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    lighting: LightingConfig = field(default_factory=LightingConfig)
    min_visible_px: int = 12


def _presets() -> dict[str, SimConfig]:
    static = SimConfig(name="static")
    moving = SimConfig(
        name="moving",
        camera=CameraConfig(
            kind="moving",
            width=424,
            height=240,
            height_m=0.6,
            hfov_deg=75.0,
            horizon=0.3,
            margin=0.25,
            pan_px=60.0,
            stripe_s=8.0,
            zoom_max=1.2,
            shake_px=0.8,
            shake_deg=0.3,
        ),
        crowd=CrowdConfig(people=7, depth_m=(2.0, 14.0), benches=1, ground="grass"),
    )
    panorama = SimConfig(
        name="panorama",
        camera=CameraConfig(
            kind="panorama", width=3760, height=480, height_m=1.0, horizon=0.5, yaw_deg_s=6.0, shake_px=0.3
        ),
        crowd=CrowdConfig(people=30, depth_m=(2.8, 14.0), benches=4),
    )
    crowd = SimConfig(
        name="crowd",
        camera=CameraConfig(width=960, height=540, height_m=2.5, hfov_deg=80.0, horizon=0.22),
        crowd=CrowdConfig(people=80, depth_m=(3.0, 22.0), benches=4, event_s=10.0),
    )
    noisy = SimConfig(
        name="noisy",
        camera=CameraConfig(shake_px=1.0, shake_deg=0.2, kind="moving", margin=0.06),
        crowd=CrowdConfig(people=12),
        noise=NoiseConfig(
            jitter=0.08,
            miss_rate=0.12,
            occluded_miss_rate=0.6,
            switch_per_s=0.1,
            swap_prob=0.3,
            fp_per_frame=1.5,
        ),
        lighting=LightingConfig(gain_amplitude=0.2, gain_period_s=6.0, flicker=0.03, sensor_noise=6.0),
    )
    return {c.name: c for c in (static, moving, panorama, crowd, noisy)}


#: Resolutions a randomized ``surveillance`` camera draws from (width, height).
SURVEILLANCE_SIZES = ((768, 576), (640, 480), (960, 540), (1280, 720), (704, 576))
PERSON_HEIGHT_M = 1.75


def surveillance_config(seed: int) -> SimConfig:
    """The ``surveillance`` family: an elevated, randomized camera per seed (the seed fixes it).

    Camera height 2.5-12 m, horizon row 5-30 % of the frame (a camera tilted down: the level pinhole with an
    off-centre principal point is a crop of a wider level view), horizontal field of view 40-80 degrees, a
    resolution from :data:`SURVEILLANCE_SIZES`, 7-15 fps; the walkable area spans the depths where a person
    is between about 30 px and 400 px tall (and below the frame's lower edge). The crowd is mostly single
    walkers and pairs who cross near each other without being together, with some standing and sitting
    groups, so "near for a moment" is not "together".
    """
    rng = np.random.default_rng([int(seed), 0x5E1F])
    width, height = SURVEILLANCE_SIZES[int(rng.integers(len(SURVEILLANCE_SIZES)))]
    hfov = float(rng.uniform(40.0, 80.0))
    height_m = float(rng.uniform(2.5, 12.0))
    horizon = float(rng.uniform(0.05, 0.3))
    f = (width / 2) / math.tan(math.radians(hfov) / 2)
    below = max((1.0 - horizon) * height, 1.0)
    near_visible = f * height_m / below  # depth seen at the lower frame edge
    near = max(near_visible * 1.05, f * PERSON_HEIGHT_M / 400.0, 1.0)
    far = max(min(f * PERSON_HEIGHT_M / 30.0, near + 16.0), near + 6.0)
    people = int(rng.integers(14, 36))
    camera = CameraConfig(
        width=width,
        height=height,
        fps=float(rng.choice([7.0, 10.0, 12.5, 15.0])),
        height_m=height_m,
        hfov_deg=hfov,
        horizon=horizon,
    )
    crowd = CrowdConfig(
        people=people,
        depth_m=(near, far),
        share_walk=0.75,
        share_stand=0.17,
        share_sit=0.08,
        group_sizes=(0.6, 0.28, 0.08, 0.04),
        benches=int(rng.integers(1, 4)),
        approach_share=0.2,
        stop_share=0.2,
        ground=("pavement", "grass")[int(rng.integers(2))],
    )
    noise = NoiseConfig(jitter=float(rng.uniform(0.02, 0.06)), miss_rate=float(rng.uniform(0.02, 0.08)))
    return SimConfig(name="surveillance", camera=camera, crowd=crowd, noise=noise)


#: Preset families whose scene is drawn from the seed (the seed-0 member is listed in :data:`PRESETS`).
RANDOMIZED = MappingProxyType({"surveillance": surveillance_config})

#: The named presets of ``pairedge simulate --preset``.
PRESETS: Mapping[str, SimConfig] = MappingProxyType({**_presets(), "surveillance": surveillance_config(0)})


def get_preset(name: str, seed: int | None = None) -> SimConfig:
    """The preset called ``name`` (for a randomized family, its member for ``seed``; default seed 0);
    raises InputError listing the known presets."""
    if name in RANDOMIZED:
        return RANDOMIZED[name](0 if seed is None else int(seed))
    try:
        return PRESETS[name]
    except (KeyError, TypeError):
        raise InputError(f"unknown simulator preset {name!r}; expected one of {sorted(PRESETS)}") from None


def with_people(config: SimConfig, people: int) -> SimConfig:
    """A copy of ``config`` with a different target number of people."""
    return replace(config, crowd=replace(config.crowd, people=people))
