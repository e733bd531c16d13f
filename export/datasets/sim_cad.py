"""Collective Activity benchmark only: simulator scenes as extra CAD-style training sequences.

CAD has 32 shared sequences; approaching, leaving, passing by and facing each other occur in few of them.
The simulator knows the same relations exactly. :func:`sim_cad_sequence` renders one scene and returns it as
a :class:`~pairedge.core.io.cad.CadSequence` (exact boxes, track ids, per-pair labels, body orientation,
walking / standing), so the CAD feature code (:func:`pairedge.export.datasets.cad.cad_features`) and
augmentations apply to it unchanged. No shipped model uses this.

SIM7 -> CAD8 (:data:`SIM_TO_CAD`): the motion relations and ``no_interaction`` keep their names,
``walking_together`` is ``walking_side_by_side``, and a standing group of exactly two visible members (the
simulator's conversation circle of two: they face each other) is ``facing_each_other``. Larger standing
groups (a circle is neither a row nor side by side) and sitting groups have no CAD class: unlabelled (-1),
never trained on.

Orientation: the simulator's world heading ``h`` (facing ``(sin h, cos h)`` in ground X, Z; camera at the
origin looking along +Z) seen in the image is ``atan2(-cos h, sin h)`` (+y = toward the camera), quantised to
CAD's 8 bins (:func:`to_cad_bin`). A person moving faster than :data:`WALK_MPS` is *walking*.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pairedge.core.errors import InputError
from pairedge.core.io.cad import CadPerson, CadSequence
from pairedge.core.labels import CAD8, SIM7
from pairedge.measure.sim import Scene

#: SIM7 name -> CAD8 name; SIM7 classes not listed are unlabelled (``standing_together`` is handled by
#: group size, see the module docstring).
SIM_TO_CAD: dict[str, str] = {
    "no_interaction": "no_interaction",
    "approaching": "approaching",
    "leaving": "leaving",
    "passing_by": "passing_by",
    "walking_together": "walking_side_by_side",
}
#: Ground speed (m/s) above which a simulated person counts as walking.
WALK_MPS = 0.3


def to_cad_bin(heading: np.ndarray) -> np.ndarray:
    """World headings (N,) radians -> CAD 8-way orientation bins (N,) int64 in 1..8 (1 right, 3 front =
    facing the camera, 5 left, 7 back)."""
    angle = np.arctan2(-np.cos(heading), np.sin(heading))
    return (np.round(angle / (np.pi / 4)).astype(np.int64) % 8) + 1


def _cad_labels(frame: object) -> np.ndarray:
    """(M,) CAD8 index of ``frame.pairs`` (a SimFrame), -1 where SIM7 has no CAD counterpart."""
    names = [SIM7.classes[int(k)] for k in frame.pair_labels]
    out = np.array([CAD8.index(SIM_TO_CAD[n]) if n in SIM_TO_CAD else -1 for n in names], np.int64)
    pairs_of_two = {
        tuple(g.members.tolist())
        for g in frame.groups
        if g.activity == "standing_together" and len(g.members) == 2
    }
    for m, (a, b) in enumerate(frame.pairs.tolist()):
        if (a, b) in pairs_of_two:
            out[m] = CAD8.index("facing_each_other")
    return out


def sim_cad_sequence(preset: str, seed: int, frames: int = 300, number: int = 0) -> CadSequence:
    """Render simulator scene ``preset`` + ``seed`` (``frames`` frames, exact boxes) as a CAD sequence.

    ``number`` becomes :attr:`CadSequence.sequence`. Frames are numbered 1..frames; track ``k`` of the result
    is the k-th distinct simulator track id in order of appearance.
    """

    if frames < 2:
        raise InputError(f"expected frames >= 2, got {frames}")
    scene = Scene(preset, seed)
    if scene.proj.cylinder:
        raise InputError(f"simulator preset {preset!r} is a panorama; CAD sequences need a flat image")
    column: dict[int, int] = {}
    rows: list[tuple[np.ndarray, ...]] = []  # per frame: ids, boxes, orientation bins, walking, pairs, labels
    people = scene.world.people
    for _ in range(frames):
        frame = scene.next_frame()
        tids = frame.truth.track_ids
        for t in tids.tolist():
            column.setdefault(int(t), len(column))
        where = {int(t): i for i, t in enumerate(people.tid.tolist())}
        heading = people.heading[[where[int(t)] for t in tids.tolist()]]
        walking = np.hypot(*frame.velocities.T) > WALK_MPS if len(tids) else np.zeros(0, bool)
        rows.append((tids, frame.truth.boxes, to_cad_bin(heading), walking, frame.pairs, _cad_labels(frame)))
    n = len(column)
    present = np.zeros((frames, n), bool)
    boxes = np.full((frames, n, 4), np.nan, np.float32)
    pose = np.zeros((frames, n), np.int64)
    action = np.full((frames, n), -1, np.int64)
    labels = np.full((frames, n, n), -1, np.int8)
    for f, (tids, b, bins, walking, pairs, lab) in enumerate(rows):
        cols = np.array([column[int(t)] for t in tids.tolist()], np.int64)
        present[f, cols], boxes[f, cols], pose[f, cols] = True, b, bins
        action[f, cols] = np.where(walking, 0, 1)
        if len(pairs):
            ca = np.array([column[int(a)] for a in pairs[:, 0].tolist()], np.int64)
            cb = np.array([column[int(b_)] for b_ in pairs[:, 1].tolist()], np.int64)
            labels[f, ca, cb] = lab
            labels[f, cb, ca] = lab
    tracks = []
    for k in range(n):
        f = np.flatnonzero(present[:, k])
        tracks.append(
            CadPerson(
                track_id=k + 1,
                frames=f + 1,
                boxes=boxes[f, k].copy(),
                raw_boxes=np.zeros((len(f), 4), np.float32),
                pose=pose[f, k].copy(),
                action=action[f, k].copy(),
            )
        )
    cam = scene.config.camera
    return CadSequence(
        path=Path(f"sim/{preset}-{seed}"),
        sequence=number,
        num_frames=frames,
        frame_size=(int(cam.width), int(cam.height)),
        fps=float(cam.fps),
        people=tuple(tracks),
        present=present,
        boxes=boxes,
        labels=labels,
        collective=np.zeros(frames, np.int64),
    )
