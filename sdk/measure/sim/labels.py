"""Ground-truth labels of a frame from the world state: pair labels (SIM7), groups, actions, global activity.

Pair labels, in priority order, for two co-present visible people A and B:

1. same social unit -> ``walking_together`` / ``standing_together`` / ``sitting_together`` (the unit's mode);
   these three are the stage-1 positives and map one-to-one onto PAPER3;
2. A's unit is heading for B's unit to join it (or the reverse) -> ``approaching``;
3. A left B's unit less than ``leave_s`` ago and they are closer than ``leave_radius_m`` -> ``leaving``;
4. closer than ``pass_radius_m`` (ground distance) with at least one of them walking -> ``passing_by``;
5. otherwise ``no_interaction``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pairedge.core.labels import SIM7
from pairedge.measure.sim.config import CrowdConfig

#: Individual actions (multi-label), named as in JRDB's ``action_label``.
SIM_ACTIONS = ("walking", "standing", "sitting", "talking to someone", "listening to someone", "holding sth")
#: Global scene activities (multi-label) of the simulator.
SIM_GLOBAL = ("walking", "standing", "sitting", "socializing", "crowded")
#: Social-unit mode -> SIM7 label of its within-group pairs.
MODE_LABELS = ("walking_together", "standing_together", "sitting_together")
WALKING_SPEED = 0.3  # m/s; faster than this counts as walking


@dataclass(frozen=True)
class SimGroup:
    """A social group of at least two visible people.

    Attributes:
        group_id: the social unit's id (stable while the group exists; JRDB ``cluster_ID``).
        members: (K,) int64 sorted track ids.
        activity: a SIM7 "together" label (walking / standing / sitting together).
    """

    group_id: int
    members: np.ndarray
    activity: str


@dataclass(frozen=True)
class PersonState:
    """What the labels need about the N visible people (rows sorted by track id).

    Attributes:
        tids: (N,) int64. unit: (N,) int64 social-unit id. mode: (N,) int64 unit mode (0 walk, 1 stand, 2
            sit).
        unit_size: (N,) int64 members of the unit (visible or not). target: (N,) int64 unit being approached.
        left_from: (N,) int64 unit left (-1). left_age: (N,) float seconds since leaving.
        pos: (N, 2) ground X, Z metres. speed: (N,) m/s. sit: (N,) sitting amount.
        speaker: (N,) bool talking now. bag: (N,) bool carrying something.
    """

    tids: np.ndarray
    unit: np.ndarray
    mode: np.ndarray
    unit_size: np.ndarray
    target: np.ndarray
    left_from: np.ndarray
    left_age: np.ndarray
    pos: np.ndarray
    speed: np.ndarray
    sit: np.ndarray
    speaker: np.ndarray
    bag: np.ndarray


def pair_labels(s: PersonState, crowd: CrowdConfig) -> tuple[np.ndarray, np.ndarray]:
    """Labels of every pair of visible people.

    Returns:
        pairs: (M, 2) int64 track ids with id_a < id_b, M = N (N - 1) / 2, in row-major order;
        labels: (M,) int64 indices into :data:`pairedge.core.labels.SIM7`.
    """
    n = len(s.tids)
    i, j = np.triu_indices(n, 1)
    pairs = np.stack([s.tids[i], s.tids[j]], 1).astype(np.int64).reshape(-1, 2)
    labels = np.full(len(i), SIM7.index("no_interaction"), np.int64)
    if len(i) == 0:
        return pairs, labels
    dist = np.hypot(*(s.pos[i] - s.pos[j]).T)
    walking = (s.speed > WALKING_SPEED) & (s.sit < 0.5)
    passing = (dist < crowd.pass_radius_m) & (walking[i] | walking[j])
    fresh = s.left_age < crowd.leave_s
    leaving = ((s.left_from[i] == s.unit[j]) & fresh[i]) | ((s.left_from[j] == s.unit[i]) & fresh[j])
    leaving &= dist < crowd.leave_radius_m
    approaching = (s.target[i] == s.unit[j]) | (s.target[j] == s.unit[i])
    together = s.unit[i] == s.unit[j]
    # lowest priority first, so later assignments win
    labels[passing] = SIM7.index("passing_by")
    labels[leaving] = SIM7.index("leaving")
    labels[approaching] = SIM7.index("approaching")
    labels[together] = s.mode[i][together]  # modes 0, 1, 2 are SIM7 ids 0, 1, 2
    return pairs, labels


def groups(s: PersonState) -> tuple[SimGroup, ...]:
    """Social groups with at least two visible members, ordered by group id."""
    out = []
    for uid in np.unique(s.unit):
        rows = np.flatnonzero(s.unit == uid)
        if len(rows) >= 2:
            out.append(SimGroup(int(uid), np.sort(s.tids[rows]), MODE_LABELS[int(s.mode[rows[0]])]))
    return tuple(out)


def actions(s: PersonState) -> np.ndarray:
    """(N, len(SIM_ACTIONS)) bool multi-label individual actions."""
    sitting = s.sit >= 0.5
    walking = (s.speed > WALKING_SPEED) & ~sitting
    social = s.unit_size >= 2
    out = np.stack([walking, ~walking & ~sitting, sitting, social & s.speaker, social & ~s.speaker, s.bag], 1)
    return out.astype(bool).reshape(-1, len(SIM_ACTIONS))


def global_activity(s: PersonState, acts: np.ndarray, group_list: tuple[SimGroup, ...]) -> tuple[str, ...]:
    """Scene-level labels: each posture held by at least a quarter of the visible people, ``socializing``
    when a standing or sitting group is visible, ``crowded`` with 20 or more visible people."""
    n = len(s.tids)
    if n == 0:
        return ()
    share = acts[:, :3].mean(0)
    out = [SIM_GLOBAL[k] for k in range(3) if share[k] >= 0.25]
    if any(g.activity != "walking_together" for g in group_list):
        out.append("socializing")
    if n >= 20:
        out.append("crowded")
    return tuple(out)
