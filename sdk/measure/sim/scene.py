"""The in-memory simulator API: :class:`Scene`, :class:`SimFrame` and :func:`simulate`."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from pairedge.core.errors import InputError
from pairedge.core.labels import SIM7, LabelSet
from pairedge.core.types import Detections
from pairedge.measure.sim.area import Area
from pairedge.measure.sim.body import J, pose_local, to_world
from pairedge.measure.sim.camera import EgoMotion, Projection, apply_affine, relative_motion, render_canvas
from pairedge.measure.sim.config import SimConfig, get_preset
from pairedge.measure.sim.labels import PersonState, SimGroup, actions, global_activity, groups, pair_labels
from pairedge.measure.sim.noise import DetectorNoise, Lighting
from pairedge.measure.sim.render import Renderer
from pairedge.measure.sim.textures import grass_tile, pavement_tile
from pairedge.measure.sim.world import World

#: Buffy stickman parts (torso, left upper arm, right upper arm, left lower arm, right lower arm, head) as
#: joint pairs of the body model; the arms are then ordered by their image position (see :func:`_stickmen`).
STICK_JOINTS = (
    ("neck", "pelvis"),
    ("l_shoulder", "l_elbow"),
    ("r_shoulder", "r_elbow"),
    ("l_elbow", "l_wrist"),
    ("r_elbow", "r_wrist"),
    ("head_top", "neck"),
)
_STICK_IDX = np.array([[J[a], J[b]] for a, b in STICK_JOINTS])


@dataclass(frozen=True)
class SimFrame:
    """One simulated frame with its exact ground truth. Per-person arrays follow the rows of ``truth``
    (visible people, sorted by track id).

    Attributes:
        index: frame index (0-based). timestamp: seconds (``index / fps``).
        image: (H, W, 3) uint8 BGR.
        truth: exact visible boxes (tight around the rendered pixels), track ids, scores 1.
        detections: the same people through a simulated detector and tracker (jitter, misses, identity
            switches, false positives with ids >= 100000).
        pairs: (M, 2) int64 track ids, id_a < id_b, every pair of visible people.
        pair_labels: (M,) int64 indices into :data:`pairedge.core.labels.SIM7`.
        groups: social groups (>= 2 visible members) with their activity.
        actions: (N, len(SIM_ACTIONS)) bool multi-label individual actions.
        global_activity: scene-level labels (subset of SIM_GLOBAL).
        stickmen: (N, 6, 4) float32 Buffy sticks x1 y1 x2 y2 (torso, left upper arm, right upper arm, left
            lower arm, right lower arm, head); "left" is the arm whose shoulder is further left in the image
            (the convention of :mod:`pairedge.core.io.stickmen`); torso neck -> pelvis, head top -> neck, arms
            shoulder -> elbow -> wrist; panorama x like the box (may exceed W). Hidden parts are not marked.
        camera_motion: (2, 3) float64 affine mapping a previous-frame pixel of the static world to this frame
            (identity on frame 0; panorama translation wrapped into [-W/2, W/2)).
        motion: (N, 2) float32 image displacement of each person's pelvis since the previous frame.
        visibility: (N,) float32 visible share of each person's in-frame pixels.
        truncated: (N,) bool, cut by the image border.
        positions: (N, 2) float32 ground X, Z in metres (camera at the origin, Z forward).
        velocities: (N, 2) float32 ground velocity, m/s.
        group_ids: (N,) int64 social-unit id of each person (a single person is a unit of one).
        instance_map: (H, W) uint16, 0 = background, v > 0 = person ``instance_ids[v - 1]``.
        instance_ids: (D,) int64 track ids of everyone drawn, in draw order.
    """

    index: int
    timestamp: float
    image: np.ndarray
    truth: Detections
    detections: Detections
    pairs: np.ndarray
    pair_labels: np.ndarray
    groups: tuple[SimGroup, ...]
    actions: np.ndarray
    global_activity: tuple[str, ...]
    stickmen: np.ndarray
    camera_motion: np.ndarray
    motion: np.ndarray
    visibility: np.ndarray
    truncated: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray
    group_ids: np.ndarray
    instance_map: np.ndarray
    instance_ids: np.ndarray

    def label_names(self) -> list[str]:
        """SIM7 names of ``pair_labels``."""
        return [SIM7.classes[int(k)] for k in self.pair_labels]

    def mask(self, track_id: int) -> np.ndarray:
        """(H, W) bool: the visible pixels of one person."""
        hits = np.flatnonzero(self.instance_ids == track_id)
        if len(hits) == 0:
            return np.zeros(self.instance_map.shape, bool)
        return self.instance_map == hits[0] + 1


class Scene:
    """A deterministic synthetic scene: the same config and seed give byte-identical frames and labels.

    Args:
        config: a :class:`SimConfig` or a preset name (``static``, ``moving``, ``panorama``, ``crowd``,
            ``noisy``).
        seed: any non-negative integer.
    """

    labels: LabelSet = SIM7

    def __init__(self, config: SimConfig | str, seed: int) -> None:
        if isinstance(config, str):
            config = get_preset(config, seed if isinstance(seed, (int, np.integer)) else None)
        if not isinstance(seed, (int, np.integer)) or seed < 0:
            raise InputError(f"seed: expected a non-negative integer, got {seed!r}")
        self.config = config
        self.seed = int(seed)
        cam = config.camera
        world_rng, look_rng, bg_rng, cam_rng, noise_rng, light_rng = (
            np.random.default_rng(s) for s in np.random.SeedSequence(self.seed).spawn(6)
        )
        self.proj = Projection.from_config(cam)
        grass = config.crowd.ground == "grass"
        tile = grass_tile(bg_rng) if grass else pavement_tile(bg_rng)
        canvas = render_canvas(self.proj, tile, 200.0 if grass else 120.0, bg_rng, config.crowd.ground)
        self.world = World(config, Area(self.proj, config.crowd), world_rng, look_rng)
        self.renderer = Renderer(cam, self.proj, canvas, self.world.benches, config.min_visible_px)
        self.ego = EgoMotion(cam, self.proj, cam_rng)
        size = (cam.width, cam.height)
        self.noise = DetectorNoise(config.noise, cam.fps, noise_rng, size, self.proj.cylinder)
        self.lighting = Lighting(config.lighting, light_rng, size)
        self.index = 0
        self._prev_affine: np.ndarray | None = None

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the frames."""
        return self.config.camera.width, self.config.camera.height

    @property
    def fps(self) -> float:
        return self.config.camera.fps

    def frames(self, count: int) -> Iterator[SimFrame]:
        """The next ``count`` frames."""
        if count < 0:
            raise InputError(f"frames: expected a non-negative count, got {count}")
        for _ in range(count):
            yield self.next_frame()

    def next_frame(self) -> SimFrame:
        """Render the next frame and its ground truth."""
        if self.index > 0:
            self.world.step()
        t = self.index / self.fps
        affine = self.ego.affine(t)
        prev = self._prev_affine if self._prev_affine is not None else affine
        wrap = self.config.camera.width if self.proj.cylinder else None
        cam_motion = relative_motion(prev, affine, wrap)
        image = self.renderer.background(affine)
        p = self.world.people
        alive = np.flatnonzero(p.alive)
        rows = alive[np.argsort(p.tid[alive], kind="stable")]
        world_joints = self._joints(rows, t)
        facing = np.stack([np.sin(p.heading[rows]), np.cos(p.heading[rows])], 1)
        view = self.renderer.project_people(
            world_joints, affine, p.tid[rows], tuple(p.looks[r] for r in rows), facing
        )
        drawn = self.renderer.draw(image, affine, view)
        image = self.lighting.apply(image, t)
        vis_rows = rows[drawn.rows]
        truth = Detections.from_arrays(drawn.boxes, p.tid[vis_rows])
        state = self._state(vis_rows)
        pairs, labels = pair_labels(state, self.config.crowd)
        group_list = groups(state)
        acts = actions(state)
        sticks = _stickmen(view.joints[drawn.rows], drawn.x_shift)
        motion = self._motion(world_joints[drawn.rows], vis_rows, view.joints[drawn.rows, J["pelvis"]], prev)
        frame = SimFrame(
            index=self.index,
            timestamp=t,
            image=image,
            truth=truth,
            detections=self.noise.apply(truth, drawn.visible),
            pairs=pairs,
            pair_labels=labels,
            groups=group_list,
            actions=acts,
            global_activity=global_activity(state, acts, group_list),
            stickmen=sticks.astype(np.float32),
            camera_motion=cam_motion,
            motion=motion,
            visibility=drawn.visible,
            truncated=drawn.truncated,
            positions=p.pos[vis_rows].astype(np.float32),
            velocities=((p.pos[vis_rows] - p.prev_pos[vis_rows]) * self.fps).astype(np.float32),
            group_ids=p.unit[vis_rows].copy(),
            instance_map=drawn.instance_map,
            instance_ids=drawn.instance_ids,
        )
        self._prev_affine = affine
        self.index += 1
        return frame

    def _joints(self, rows: np.ndarray, t: float) -> np.ndarray:
        """(N, J, 3) world joints of the given people at time t."""
        p = self.world.people
        walk = p.walk[rows]
        sway = p.sway_amp[rows] * np.sin(2 * math.pi * p.sway_freq[rows] * t + p.sway_off[rows]) * (1 - walk)
        local = pose_local(
            p.height[rows],
            p.phase[rows],
            walk,
            p.sit[rows],
            sway,
            p.gesture[rows],
            0.8 * t + p.idle_off[rows],
        )
        return to_world(local, p.pos[rows], p.heading[rows])

    def _state(self, rows: np.ndarray) -> PersonState:
        p = self.world.people
        modes, sizes, targets = self.world.unit_table()
        units = p.unit[rows]
        return PersonState(
            tids=p.tid[rows],
            unit=units,
            mode=np.array([modes[u] for u in units.tolist()], np.int64),
            unit_size=np.array([sizes[u] for u in units.tolist()], np.int64),
            target=np.array([targets[u] for u in units.tolist()], np.int64),
            left_from=p.left_from[rows],
            left_age=self.world.t - p.left_t[rows],
            pos=p.pos[rows],
            speed=p.speed[rows],
            sit=p.sit[rows],
            speaker=p.speaker[rows],
            bag=np.array([p.looks[r].bag for r in rows.tolist()], bool),
        )

    def _motion(
        self, joints: np.ndarray, rows: np.ndarray, pelvis_now: np.ndarray, prev: np.ndarray
    ) -> np.ndarray:
        """Image displacement of the pelvis between the previous frame (old position, old camera) and now."""
        p = self.world.people
        before = joints[:, J["pelvis"]].copy()
        before[:, 0] -= p.pos[rows, 0] - p.prev_pos[rows, 0]
        before[:, 2] -= p.pos[rows, 1] - p.prev_pos[rows, 1]
        uv, _ = self.proj.project(before[:, None, :])
        old = apply_affine(prev, uv[:, 0])
        d = pelvis_now - old
        if self.proj.cylinder:
            w = self.config.camera.width
            d[:, 0] = (d[:, 0] + w / 2) % w - w / 2
        return d.astype(np.float32).reshape(-1, 2)


def _stickmen(joints: np.ndarray, x_shift: np.ndarray) -> np.ndarray:
    """(N, 6, 4) Buffy sticks from (N, J, 2) image joints; arms swapped where the body's left arm is on the
    image's right, so that "left" means image-left."""
    sticks = joints[:, _STICK_IDX].reshape(-1, 6, 4).copy()
    sticks[..., 0::2] -= x_shift[:, None, None]
    swap = sticks[:, 1, 0] > sticks[:, 2, 0]
    sticks[swap] = sticks[swap][:, [0, 2, 1, 4, 3, 5]]
    return sticks.astype(np.float32)


def simulate(preset: str | SimConfig, seed: int, frames: int) -> Iterator[SimFrame]:
    """Frames 0 .. ``frames - 1`` of the scene ``preset`` + ``seed`` (see :class:`Scene`)."""
    return Scene(preset, seed).frames(frames)
