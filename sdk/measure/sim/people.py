"""Per-person simulation state as parallel numpy arrays (one row per person ever created, compacted)."""

from __future__ import annotations

import math

import numpy as np
from pairedge.measure.sim.body import Appearance


class People:
    """Rows of person state. ``alive`` marks the people still in the world.

    Arrays (N rows): ``tid`` int64 track id; ``pos``, ``prev_pos`` (N, 2) ground X, Z in metres; ``heading``
    radians; ``unit`` int64 social-unit id; ``slot`` (N, 2) circle offset in a standing unit; ``phase`` gait
    phase; ``walk`` gait amplitude; ``speed`` m/s; ``sit`` / ``sit_target`` sitting amount; ``left_from`` unit
    the person left (-1) at time ``left_t``; ``speaker`` talking now; ``gesture`` arm gesture amount;
    ``idle`` / ``sway_*`` small idle motion parameters. ``looks`` holds each row's :class:`Appearance`.
    """

    _FLOAT2 = ("pos", "prev_pos", "slot")
    _FLOAT1 = (
        "heading",
        "phase",
        "walk",
        "speed",
        "sit",
        "sit_target",
        "left_t",
        "gesture",
        "idle_off",
        "sway_amp",
        "sway_freq",
        "sway_off",
        "height",
    )
    _INT = ("tid", "unit", "left_from")
    _BOOL = ("alive", "speaker")

    def __init__(self) -> None:
        for name in self._FLOAT2:
            setattr(self, name, np.zeros((0, 2)))
        for name in self._FLOAT1:
            setattr(self, name, np.zeros(0))
        for name in self._INT:
            setattr(self, name, np.zeros(0, np.int64))
        for name in self._BOOL:
            setattr(self, name, np.zeros(0, bool))
        self.looks: list[Appearance] = []

    # Attributes are created dynamically above; declare them for type checkers.
    pos: np.ndarray
    prev_pos: np.ndarray
    slot: np.ndarray
    heading: np.ndarray
    phase: np.ndarray
    walk: np.ndarray
    speed: np.ndarray
    sit: np.ndarray
    sit_target: np.ndarray
    left_t: np.ndarray
    gesture: np.ndarray
    idle_off: np.ndarray
    sway_amp: np.ndarray
    sway_freq: np.ndarray
    sway_off: np.ndarray
    height: np.ndarray
    tid: np.ndarray
    unit: np.ndarray
    left_from: np.ndarray
    alive: np.ndarray
    speaker: np.ndarray

    def __len__(self) -> int:
        return len(self.tid)

    def count_alive(self) -> int:
        return int(self.alive.sum())

    def add(
        self, tid: int, pos: np.ndarray, heading: float, unit: int, look: Appearance, rng: np.random.Generator
    ) -> int:
        """Append a person; returns its row."""
        row = len(self)
        values = {
            "pos": pos,
            "prev_pos": pos,
            "slot": np.zeros(2),
            "heading": heading,
            "phase": rng.uniform(0, 2 * math.pi),
            "walk": 0.0,
            "speed": 0.0,
            "sit": 0.0,
            "sit_target": 0.0,
            "left_t": -1e9,
            "gesture": 0.0,
            "idle_off": rng.uniform(0, 2 * math.pi),
            "sway_amp": rng.uniform(0.005, 0.02),
            "sway_freq": rng.uniform(0.15, 0.4),
            "sway_off": rng.uniform(0, 2 * math.pi),
            "height": look.height_m,
            "tid": tid,
            "unit": unit,
            "left_from": -1,
            "alive": True,
            "speaker": False,
        }
        for name, value in values.items():
            arr = getattr(self, name)
            setattr(
                self, name, np.concatenate([arr, np.asarray(value, arr.dtype).reshape((1,) + arr.shape[1:])])
            )
        self.looks.append(look)
        return row

    def move_towards(self, rows: list[int], targets: np.ndarray, max_step: float) -> None:
        """Move rows towards targets (len(rows), 2) by at most ``max_step`` metres."""
        d = targets - self.pos[rows]
        dist = np.hypot(d[:, 0], d[:, 1])
        scale = np.minimum(1.0, max_step / np.maximum(dist, 1e-9))
        self.pos[rows] = self.pos[rows] + d * scale[:, None]

    def advance(self, dt: float, t: float) -> None:
        """After positions moved: measured speed, gait phase and amplitude, sitting and gesture easing."""
        step = np.hypot(*(self.pos - self.prev_pos).T)
        self.speed = step / dt
        self.phase = (self.phase + math.pi * step / (0.41 * self.height)) % (2 * math.pi)
        target_walk = np.clip(self.speed / 1.2, 0.0, 1.0)
        self.walk += np.clip(target_walk - self.walk, -3 * dt, 3 * dt)
        self.sit += np.clip(self.sit_target - self.sit, -1.5 * dt, 1.5 * dt)
        self.gesture += np.clip(self.speaker.astype(float) - self.gesture, -2 * dt, 2 * dt)

    def needs_compaction(self) -> bool:
        dead = len(self) - self.count_alive()
        return dead > 64 and dead > self.count_alive()

    def compact(self) -> np.ndarray:
        """Drop dead rows; returns old row -> new row (-1 for dropped)."""
        keep = np.flatnonzero(self.alive)
        remap = np.full(len(self), -1, np.int64)
        remap[keep] = np.arange(len(keep))
        for name in self._FLOAT2 + self._FLOAT1 + self._INT + self._BOOL:
            setattr(self, name, getattr(self, name)[keep])
        self.looks = [self.looks[i] for i in keep]
        return remap
