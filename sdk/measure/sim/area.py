"""The ground area people use, where they enter and leave it, and the benches placed in it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pairedge.measure.sim.camera import Projection
from pairedge.measure.sim.config import CrowdConfig


@dataclass(frozen=True)
class Bench:
    """A park bench on the ground.

    Attributes:
        pos: (2,) ground X, Z of the seat centre, metres.
        heading: direction the bench faces (the sitters' heading), radians (0 = +Z).
        length: seat length in metres (seat height 0.45 m, depth 0.45 m).
    """

    pos: np.ndarray
    heading: float
    length: float = 1.6

    def slots(self) -> np.ndarray:
        """(3, 2) seat positions (ground X, Z) left to right along the bench."""
        right = np.array([math.cos(self.heading), -math.sin(self.heading)])
        offsets = np.array([-0.5, 0.0, 0.5]) * (self.length / 1.6)
        return self.pos[None, :] + offsets[:, None] * right[None, :]


class Area:
    """Where people walk: a trapezoid seen by a pinhole camera, or an annulus around a panoramic one.

    Args:
        proj: the virtual camera (its canvas defines what is in view).
        crowd: the crowd configuration (``depth_m`` gives the near and far limits).
    """

    def __init__(self, proj: Projection, crowd: CrowdConfig) -> None:
        self.proj = proj
        self.near, self.far = crowd.depth_m
        self.slope = (proj.canvas_w / 2) / proj.f  # |X| <= slope * Z is in view (pinhole)

    def half_width(self, z: float | np.ndarray) -> float | np.ndarray:
        return self.slope * z

    def inside(self, p: np.ndarray, margin: float = 0.0) -> bool:
        """Whether ground point p (2,) lies in the area grown by ``margin`` metres."""
        if self.proj.cylinder:
            r = math.hypot(p[0], p[1])
            return self.near - margin <= r <= self.far + margin
        return (
            self.near - margin <= p[1] <= self.far + margin
            and abs(p[0]) <= self.half_width(max(p[1], 0.0)) + margin
        )

    def random_interior(self, rng: np.random.Generator, inset: float = 0.8) -> np.ndarray:
        """A point well inside the area (groups placed here are in view)."""
        if self.proj.cylinder:
            r = rng.uniform(self.near + 0.5, self.far - 1.5)
            phi = rng.uniform(-math.pi, math.pi)
            return np.array([r * math.sin(phi), r * math.cos(phi)])
        z = rng.uniform(self.near + 1.0, self.far - 1.0)
        hw = max(self.half_width(z) * 0.85 - inset, 0.2)
        return np.array([rng.uniform(-hw, hw), z])

    def _edge_point(self, rng: np.random.Generator, edge: int, out: float) -> np.ndarray:
        if edge in (0, 1):  # left, right
            z = rng.uniform(self.near + 0.5, self.far)
            return np.array([(-1 if edge == 0 else 1) * (self.half_width(z) + out), z])
        if edge == 2:  # far
            z = self.far + out
            hw = self.half_width(z)
            return np.array([rng.uniform(-hw, hw), z])
        z = max(self.near - out, 0.6)  # near: enters from below the frame
        hw = self.half_width(self.near)
        return np.array([rng.uniform(-hw, hw), z])

    def spawn(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """An entry point just outside the area and an exit point on another side (both (2,))."""
        if self.proj.cylinder:
            radius = self.far + 1.0
            phi = rng.uniform(-math.pi, math.pi)
            dmax = 2 * math.acos(min((self.near + 0.6) / radius, 1.0))
            dphi = rng.uniform(min(1.0, dmax), dmax) * rng.choice([-1.0, 1.0])
            start = radius * np.array([math.sin(phi), math.cos(phi)])
            goal = radius * np.array([math.sin(phi + dphi), math.cos(phi + dphi)])
            return start, goal
        edges = np.array([0.35, 0.35, 0.2, 0.1])
        e_in = int(rng.choice(4, p=edges))
        w_out = edges.copy()
        w_out[e_in] = 0
        e_out = int(rng.choice(4, p=w_out / w_out.sum()))
        return self._edge_point(rng, e_in, 1.0), self._edge_point(rng, e_out, 1.5)

    def exit_away_from(self, rng: np.random.Generator, p: np.ndarray, centre: np.ndarray) -> np.ndarray:
        """An exit point outside the area, roughly in the direction from ``centre`` to ``p``."""
        d = p - centre
        if np.hypot(*d) < 1e-6:
            d = rng.standard_normal(2)
        ang = math.atan2(d[0], d[1]) + rng.uniform(-0.6, 0.6)
        if self.proj.cylinder:
            ang = math.atan2(p[0], p[1]) + rng.uniform(-0.7, 0.7)  # outward, never through the robot
            return (self.far + 1.5) * np.array([math.sin(ang), math.cos(ang)])
        step = np.array([math.sin(ang), math.cos(ang)])
        q = p.copy()
        for _ in range(200):  # march until outside (at most 40 m)
            q = q + 0.2 * step
            if not self.inside(q, margin=1.2):
                break
        if q[1] < 0.6:  # never walk through the camera
            q[1] = 0.6
        return q

    def place_benches(self, rng: np.random.Generator, count: int) -> tuple[Bench, ...]:
        """Benches spread over the area, facing the camera, at least 3 m apart."""
        benches: list[Bench] = []
        for _ in range(count * 20):
            if len(benches) == count:
                break
            p = self.random_interior(rng, inset=1.2)
            if not self.proj.cylinder:
                p[1] = min(p[1], self.near + 0.55 * (self.far - self.near))
            if any(np.hypot(*(p - b.pos)) < 3.0 for b in benches):
                continue
            heading = math.atan2(-p[0], -p[1])  # facing the camera
            benches.append(Bench(p, heading))
        return tuple(benches)
