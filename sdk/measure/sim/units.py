"""Social units (a group, or one person alone) and their formations."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

WALK, STAND, SIT = 0, 1, 2


@dataclass
class Unit:
    """A social unit (mutable simulation state).

    ``anchor`` is the formation centre (walking), circle centre (standing) or bench centre (sitting);
    ``target`` the uid of a standing unit this one walks up to and joins; ``bench_goal`` a reserved bench
    this one walks to and sits down on; ``stops`` makes a walking unit stop for a conversation.
    """

    uid: int
    mode: int
    members: list[int]
    anchor: np.ndarray
    heading: float = 0.0
    speed: float = 1.3
    goal: np.ndarray = field(default_factory=lambda: np.zeros(2))
    target: int = -1
    bench: int = -1
    next_event: float = math.inf
    start_after: float = 0.0
    next_speaker: float = 0.0
    speaker: int = -1
    stops: bool = False
    reslot_at: float = math.inf
    want: np.ndarray | None = None
    bench_goal: int = -1


def circle_slots(n: int, start_angle: float) -> np.ndarray:
    """(n, 2) offsets of a conversation circle of n people (about 1 m between neighbours)."""
    if n == 1:
        return np.zeros((1, 2))
    radius = 0.3 + 0.1 * n
    ang = start_angle + 2 * np.pi * np.arange(n) / n
    return radius * np.stack([np.sin(ang), np.cos(ang)], 1)


def formation_slots(n: int) -> np.ndarray:
    """(n, 2) offsets (lateral, forward) of a walking group: side by side, 2 x 2 for four people."""
    if n == 4:
        return np.array([[-0.35, 0.0], [0.35, 0.0], [-0.35, -0.8], [0.35, -0.8]])
    return np.stack([(np.arange(n) - (n - 1) / 2) * 0.7, np.zeros(n)], 1)


def rotate(offset: np.ndarray, heading: float) -> np.ndarray:
    """Body-frame offset (lateral, forward) to ground X, Z for a unit facing ``heading``."""
    s, c = math.sin(heading), math.cos(heading)
    return np.array([offset[0] * c + offset[1] * s, -offset[0] * s + offset[1] * c])


def formation_order(pos: np.ndarray, anchor: np.ndarray, heading: float) -> np.ndarray:
    """Order of members (positions (n, 2)) so that each takes the nearest slot of
    :func:`formation_slots` (side by side left to right; 2 x 2 front pair then back pair): no crossing."""
    d = pos - anchor
    s, c = math.sin(heading), math.cos(heading)
    lateral, forward = d @ np.array([c, -s]), d @ np.array([s, c])
    if len(pos) == 4:
        front = np.argsort(-forward, kind="stable")
        pairs = [front[:2], front[2:]]
        return np.concatenate([p[np.argsort(lateral[p], kind="stable")] for p in pairs])
    return np.argsort(lateral, kind="stable")


def steer(anchor: np.ndarray, want: np.ndarray, obstacles: np.ndarray) -> np.ndarray:
    """A simple social force: the unit direction ``want`` (2,) bent away from obstacles (K, 2) ahead of
    ``anchor`` within 2.5 m (weight decaying with distance beyond 0.6 m). Returns a unit vector."""
    d = anchor[None, :] - obstacles
    dist = np.hypot(d[:, 0], d[:, 1])
    near = (dist < 2.5) & ((d @ want) < 0) & (dist > 1e-6)
    if not near.any():
        return want
    w = np.exp(-(dist[near] - 0.6) / 0.4)
    out = want + 0.5 * (d[near] / dist[near, None] * w[:, None]).sum(0)
    return out / max(float(np.hypot(*out)), 1e-9)
