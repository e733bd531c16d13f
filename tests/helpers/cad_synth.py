"""Synthetic Collective Activity data for tests: ``annoNN.mat`` files in the real structure (scipy.io) and
in-memory :class:`~pairedge.core.io.cad.CadSequence` objects."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pairedge.core.io.cad import CadPerson, CadSequence

PERSON_DT = [("bbs", "O"), ("time", "O"), ("sbbs", "O"), ("attr", "O")]
ANNO_DT = [("nframe", "O"), ("people", "O"), ("interaction", "O"), ("collective", "O")]


def person(frames, x0=10.0, attr_action=1):
    frames = np.asarray(frames)
    t = len(frames)
    sbbs = np.stack([x0 + frames, np.full(t, 20.0), np.full(t, 30.0), np.full(t, 60.0)])
    bbs = np.zeros((4, t), np.int16)
    bbs[:, 0] = np.round(sbbs[:, 0])
    attr = np.stack([np.full(t, 3), np.full(t, attr_action)]).astype(np.int16)
    return {"bbs": bbs, "time": frames.reshape(1, -1).astype(np.uint16), "sbbs": sbbs, "attr": attr}


def write_mat(path, people, interaction, collective, nframe, drop=None):
    arr = np.empty((1, len(people)), dtype=PERSON_DT)
    for k, p in enumerate(people):
        arr[0, k] = (p["bbs"], p["time"], p["sbbs"], p["attr"])
    dtype = [d for d in ANNO_DT if d[0] != drop]
    anno = np.empty((1, 1), dtype=dtype)
    values = {
        "nframe": np.array([[nframe]], np.uint16),
        "people": arr,
        "interaction": np.asarray(interaction, np.uint8),
        "collective": np.asarray(collective, np.uint8).reshape(1, -1),
    }
    anno[0, 0] = tuple(values[d[0]] for d in dtype)
    import scipy.io as sio

    sio.savemat(str(path), {"anno": anno})
    return path


W, H = 720, 480


def sequence(tracks: np.ndarray, labels: np.ndarray, pose: np.ndarray | None = None) -> CadSequence:
    """A CadSequence from boxes (F, P, 4) (NaN = absent) and pair labels (F, P, P) CAD8 index (-1 none)."""
    nf, npeople = tracks.shape[:2]
    present = np.isfinite(tracks).all(-1)
    people = []
    for k in range(npeople):
        rows = np.flatnonzero(present[:, k])
        people.append(
            CadPerson(
                track_id=k + 1,
                frames=rows + 1,
                boxes=tracks[rows, k].astype(np.float32),
                raw_boxes=np.zeros((len(rows), 4), np.float32),
                pose=np.full(len(rows), -1, np.int64) if pose is None else pose[rows, k],
                action=np.full(len(rows), -1, np.int64),
            )
        )
    return CadSequence(
        path=Path("anno90.mat"),
        sequence=90,
        num_frames=nf,
        frame_size=(W, H),
        fps=30.0,
        people=tuple(people),
        present=present,
        boxes=tracks.astype(np.float32),
        labels=labels.astype(np.int8),
        collective=np.zeros(nf, np.int64),
    )
