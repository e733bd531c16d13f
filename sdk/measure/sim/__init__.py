"""The scene simulator: deterministic synthetic scenes with exact ground truth, rendered as real frames.

Quick use::

    from pairedge.measure.sim import simulate
    for frame in simulate("static", seed=0, frames=30):
        frame.image          # (H, W, 3) uint8 BGR
        frame.truth          # exact boxes + track ids of the visible people
        frame.pairs, frame.pair_labels   # every co-present pair, labels in pairedge.core.labels.SIM7

Presets: ``static``, ``moving`` (lawnmower ego-motion on grass), ``panorama`` (3760 x 480, wrap-around),
``crowd`` (about 80 people), ``noisy`` (heavy detector and sensor noise). ``pairedge simulate`` writes a
scene to disk in the real dataset formats (see docs/formats.md).
"""

from __future__ import annotations

from pairedge.measure.sim.config import (
    PRESETS,
    CameraConfig,
    CrowdConfig,
    LightingConfig,
    NoiseConfig,
    SimConfig,
    get_preset,
)
from pairedge.measure.sim.labels import SIM_ACTIONS, SIM_GLOBAL, SimGroup
from pairedge.measure.sim.scene import STICK_JOINTS, Scene, SimFrame, simulate

__all__ = [
    "PRESETS",
    "SIM_ACTIONS",
    "SIM_GLOBAL",
    "STICK_JOINTS",
    "CameraConfig",
    "CrowdConfig",
    "LightingConfig",
    "NoiseConfig",
    "Scene",
    "SimConfig",
    "SimFrame",
    "SimGroup",
    "get_preset",
    "simulate",
]
