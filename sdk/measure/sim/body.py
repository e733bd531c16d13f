"""Articulated people: appearance and a vectorised skeleton (walking gait, standing sway, sitting, gestures).

Joint positions are computed for all people at once in body-local metres (``x`` to the person's right, ``y``
up, ``z`` forward), then placed in the world by position and heading. Proportions follow common
anthropometric fractions of body height.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from pairedge.measure.sim.textures import PATTERNS, clothing_pattern

JOINTS = (
    "head_top",
    "head",
    "neck",
    "l_shoulder",
    "r_shoulder",
    "l_elbow",
    "r_elbow",
    "l_wrist",
    "r_wrist",
    "pelvis",
    "l_hip",
    "r_hip",
    "l_knee",
    "r_knee",
    "l_ankle",
    "r_ankle",
    "l_toe",
    "r_toe",
    "l_hand",
    "r_hand",
)
J = {name: i for i, name in enumerate(JOINTS)}

# Segment lengths as fractions of body height.
ANKLE_H, SHIN, THIGH, TORSO = 0.04, 0.245, 0.245, 0.34
SHOULDER_DROP, SHOULDER_HALF, HIP_HALF = 0.05, 0.11, 0.055
UPPER_ARM, FOREARM, HAND, FOOT, HEAD = 0.175, 0.155, 0.04, 0.14, 0.13
HEAD_RADIUS = 0.062

#: Part widths in metres for a 1.75 m person (scaled with height).
WIDTHS = {
    "upper_arm": 0.085,
    "forearm": 0.07,
    "thigh": 0.14,
    "shin": 0.1,
    "neck": 0.1,
    "foot": 0.08,
    "hand": 0.085,
    "torso_depth": 0.24,
}

# Part labels drawn into the per-person label buffer (index into an appearance's colour table).
SKIN, HAIR, SHIRT, TROUSERS, SHOES, BAG = 1, 2, 3, 4, 5, 6
FAR = 6  # far-side parts use label + FAR and a darker colour


@dataclass(frozen=True)
class Appearance:
    """How one person looks.

    Attributes:
        height_m: body height in metres.
        colours: (13, 3) float32 BGR per part label (0 unused; labels 7..12 are the shaded far side).
        patterns: pyramid (64, 32, 16, 8 pixels square) of a (S, S, 3) uint8 periodic modulation: channel 0
            shirt, 1 trousers, 2 fine detail (skin, hair, shoes, bag); 1 pixel of level 0 = 1 cm.
        colour_lut: (256, 1, 3) uint8 lookup table part label -> BGR colour (for cv2.LUT).
        short_sleeves: forearms are skin instead of shirt.
        bag: carries a bag in the right hand ("holding sth").
    """

    height_m: float
    colours: np.ndarray
    patterns: tuple[np.ndarray, ...]
    colour_lut: np.ndarray
    short_sleeves: bool
    bag: bool


def _hsv_to_bgr(h: float, s: float, v: float) -> np.ndarray:
    hsv = np.array([[[h * 360, s, v]]], np.float32)
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)[0, 0] * 255.0


def sample_appearance(rng: np.random.Generator, child_share: float = 0.05) -> Appearance:
    """Draw a person: height, skin, hair, garment colours and patterns, sleeves, bag."""
    height = float(rng.normal(1.72, 0.08)) if rng.random() > child_share else float(rng.uniform(1.1, 1.4))
    height = float(np.clip(height, 1.0, 2.0))
    skin_tones = np.array([[189, 214, 245], [150, 180, 225], [110, 150, 200], [70, 100, 150], [45, 65, 100]])
    skin = skin_tones[rng.integers(len(skin_tones))] * rng.uniform(0.9, 1.05)
    hair_tones = np.array([[20, 20, 25], [25, 45, 70], [60, 110, 160], [150, 150, 155], [40, 60, 110]])
    hair = hair_tones[rng.integers(len(hair_tones))].astype(np.float64)
    shirt = _hsv_to_bgr(rng.random(), rng.uniform(0.3, 0.9), rng.uniform(0.35, 0.95))
    trousers = _hsv_to_bgr(rng.choice([0.6, 0.62, 0.1, 0.0]), rng.uniform(0.1, 0.6), rng.uniform(0.15, 0.6))
    shoes = np.full(3, rng.uniform(20, 90))
    bag = _hsv_to_bgr(rng.random(), rng.uniform(0.2, 0.8), rng.uniform(0.2, 0.7))
    near = np.stack([np.zeros(3), skin, hair, shirt, trousers, shoes, bag]).astype(np.float32)
    colours = np.concatenate([near, near[1:] * 0.78]).astype(np.float32)
    kinds = rng.choice(len(PATTERNS), 2)
    pattern = np.stack(
        [
            clothing_pattern(rng, PATTERNS[int(kinds[0])]),
            clothing_pattern(rng, PATTERNS[int(kinds[1])]),
            clothing_pattern(rng, "mottled"),
        ],
        -1,
    )
    levels = [pattern]
    while levels[-1].shape[0] > 8:  # periodic pyramid: pad with wrap-around, reduce, crop
        padded = np.pad(levels[-1], ((4, 4), (4, 4), (0, 0)), mode="wrap")
        levels.append(np.ascontiguousarray(cv2.pyrDown(padded)[2:-2, 2:-2]))
    lut = np.zeros((256, 1, 3), np.uint8)
    lut[: len(colours), 0] = np.clip(np.round(colours), 0, 255).astype(np.uint8)
    return Appearance(
        height,
        colours,
        tuple(levels),
        lut,
        bool(rng.random() < 0.4),
        bool(rng.random() < 0.2),
    )


def _leg(hip: np.ndarray, alpha: np.ndarray, beta: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, ...]:
    """Knee, ankle and toe from the hip (N, 3), hip flexion alpha and knee flexion beta (N,), height h
    (N,)."""
    zero = np.zeros_like(alpha)
    knee = hip + (THIGH * h)[:, None] * np.stack([zero, -np.cos(alpha), np.sin(alpha)], 1)
    shin = alpha - beta
    ankle = knee + (SHIN * h)[:, None] * np.stack([zero, -np.cos(shin), np.sin(shin)], 1)
    toe = ankle + (FOOT * h)[:, None] * np.stack([zero, zero - 0.15, zero + 1.0], 1) / 1.011
    return knee, ankle, toe


def _arm(
    shoulder: np.ndarray, gamma: np.ndarray, delta: np.ndarray, h: np.ndarray, side: float
) -> tuple[np.ndarray, ...]:
    """Elbow, wrist and hand centre from the shoulder (N, 3), shoulder flexion gamma, elbow flexion delta."""
    out = np.stack([np.full_like(gamma, side), np.zeros_like(gamma), np.zeros_like(gamma)], 1)
    elbow = shoulder + (UPPER_ARM * h)[:, None] * np.stack(
        [0.12 * out[:, 0], -np.cos(gamma), np.sin(gamma)], 1
    )
    fore = gamma + delta
    direction = np.stack([0.1 * out[:, 0], -np.cos(fore), np.sin(fore)], 1)
    wrist = elbow + (FOREARM * h)[:, None] * direction
    hand = wrist + (HAND * h)[:, None] * direction
    return elbow, wrist, hand


def pose_local(
    height: np.ndarray,
    phase: np.ndarray,
    walk: np.ndarray,
    sit: np.ndarray,
    sway: np.ndarray,
    gesture: np.ndarray,
    idle: np.ndarray,
) -> np.ndarray:
    """Body-local joint positions of N people.

    Args:
        height: (N,) body height, metres.
        phase: (N,) gait phase, radians.
        walk: (N,) gait amplitude in [0, 1] (0 standing, 1 full walking stride).
        sit: (N,) sitting amount in [0, 1] (1 seated, thighs horizontal).
        sway: (N,) lateral sway of the pelvis, metres.
        gesture: (N,) right-arm gesturing amount in [0, 1] (the speaker of a conversation).
        idle: (N,) slowly varying angle (radians) that drives small arm movements.

    Returns:
        (N, len(JOINTS), 3) float64, x right, y up, z forward, feet on y = 0.
    """
    n = len(height)
    h = height.astype(np.float64)
    half_pi = np.pi / 2
    a_l = walk * 0.42 * np.sin(phase) + sit * half_pi
    a_r = walk * 0.42 * np.sin(phase + np.pi) + sit * half_pi
    b_l = walk * (0.12 + 0.75 * np.maximum(0.0, np.cos(phase))) + sit * half_pi
    b_r = walk * (0.12 + 0.75 * np.maximum(0.0, np.cos(phase + np.pi))) + sit * half_pi
    leg_l = THIGH * np.cos(a_l) + SHIN * np.cos(a_l - b_l) + ANKLE_H
    leg_r = THIGH * np.cos(a_r) + SHIN * np.cos(a_r - b_r) + ANKLE_H
    pelvis = np.stack([sway, h * np.maximum(leg_l, leg_r), -0.05 * h * sit], 1)
    hip_off = np.stack([HIP_HALF * h, np.zeros(n), np.zeros(n)], 1)
    hip_l, hip_r = pelvis - hip_off, pelvis + hip_off
    knee_l, ankle_l, toe_l = _leg(hip_l, a_l, b_l, h)
    knee_r, ankle_r, toe_r = _leg(hip_r, a_r, b_r, h)
    lean = 0.06 * walk - 0.06 * sit
    neck = pelvis + (TORSO * h)[:, None] * np.stack(
        [0.5 * sway / np.maximum(h, 1e-3), np.cos(lean), np.sin(lean)], 1
    )
    sh_off = np.stack([SHOULDER_HALF * h, -SHOULDER_DROP * h, np.zeros(n)], 1)
    sh_l, sh_r = neck + sh_off * [-1, 1, 1], neck + sh_off
    idle_swing = 0.06 * np.sin(idle) * (1 - walk)
    g_l = -walk * 0.35 * np.sin(phase) + sit * 0.45 + idle_swing
    g_r = walk * 0.35 * np.sin(phase) + sit * 0.45 - idle_swing
    d_l = 0.2 + 0.2 * walk * (1 + np.sin(phase + np.pi)) + sit * 0.7
    d_r = 0.2 + 0.2 * walk * (1 + np.sin(phase)) + sit * 0.7
    g_r = (1 - gesture) * g_r + gesture * (0.55 + 0.15 * np.sin(2.1 * idle))
    d_r = (1 - gesture) * d_r + gesture * (1.3 + 0.35 * np.sin(3.3 * idle + 1.0))
    el_l, wr_l, hand_l = _arm(sh_l, g_l, d_l, h, -1.0)
    el_r, wr_r, hand_r = _arm(sh_r, g_r, d_r, h, 1.0)
    head = neck + np.stack([np.zeros(n), 0.065 * h, 0.01 * h], 1)
    top = neck + np.stack([np.zeros(n), HEAD * h, np.zeros(n)], 1)
    joints = [
        top,
        head,
        neck,
        sh_l,
        sh_r,
        el_l,
        el_r,
        wr_l,
        wr_r,
        pelvis,
        hip_l,
        hip_r,
        knee_l,
        knee_r,
        ankle_l,
        ankle_r,
        toe_l,
        toe_r,
        hand_l,
        hand_r,
    ]
    return np.stack(joints, 1)


def to_world(local: np.ndarray, pos: np.ndarray, heading: np.ndarray) -> np.ndarray:
    """Place body-local joints (N, J, 3) at ground positions pos (N, 2) = (X, Z) facing ``heading`` (N,).

    Heading 0 faces +Z (away from the camera); pi/2 faces +X. Returns (N, J, 3) world X Y Z.
    """
    s, c = np.sin(heading)[:, None], np.cos(heading)[:, None]
    x, y, z = local[..., 0], local[..., 1], local[..., 2]
    wx = pos[:, None, 0] + x * c + z * s
    wz = pos[:, None, 1] - x * s + z * c
    return np.stack([wx, y, wz], -1)
