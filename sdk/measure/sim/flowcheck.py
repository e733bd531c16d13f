"""Physical check of the simulator: does real optical flow on its frames agree with its ground truth?

* People: the median dense flow inside each person's box (previous frame) against the person's
  ground-truth box displacement (box centre now minus box centre before) and pelvis motion.
* Background: the flow outside all boxes against the camera motion the simulator applied.

Used by ``benchmarks/check_sim_flow.py`` (numbers for the README) and a fast test with a loose bound.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import cv2
import numpy as np
from pairedge.measure.sim.scene import SimFrame


@dataclass(frozen=True)
class PersonFlowErrors:
    """Per person and frame pair (K rows), errors in pixels.

    Attributes:
        box: |median flow over the whole box - box displacement|.
        person: |median flow over the person's own pixels in the box - box displacement|.
        pelvis: |median flow over the person's own pixels - pelvis motion (SimFrame.motion)|.
        displacement: |box displacement| (how fast the person moves in the image).
        reference: |box displacement - pelvis motion|, no flow involved: how far the box itself strays
            from the body's motion (limbs swinging, integer box edges).
    """

    box: np.ndarray
    person: np.ndarray
    pelvis: np.ndarray
    displacement: np.ndarray
    reference: np.ndarray


def dis_flow(prev: np.ndarray, cur: np.ndarray) -> np.ndarray:
    """OpenCV DIS flow (PRESET_MEDIUM) from ``prev`` to ``cur`` (BGR uint8); (H, W, 2) float32."""
    dis = cv2.DISOpticalFlow.create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
    g0 = cv2.cvtColor(prev, cv2.COLOR_BGR2GRAY)
    g1 = cv2.cvtColor(cur, cv2.COLOR_BGR2GRAY)
    flow = np.zeros((*g0.shape, 2), np.float32)
    return np.asarray(dis.calc(g0, g1, flow))


def person_flow_errors(frames: Iterable[SimFrame], min_visible: float = 0.9) -> PersonFlowErrors:
    """Errors for every person seen (visibility >= ``min_visible``, not cut by the border) in two
    consecutive frames of a pinhole-camera scene."""
    out: dict[str, list[float]] = {"box": [], "person": [], "pelvis": [], "displacement": [], "reference": []}
    prev: SimFrame | None = None
    for f in frames:
        if prev is not None:
            flow = dis_flow(prev.image, f.image)
            before = {int(t): k for k, t in enumerate(prev.truth.track_ids.tolist())}
            for i, tid in enumerate(f.truth.track_ids.tolist()):
                j = before.get(tid)
                ok = j is not None and min(prev.visibility[j], f.visibility[i]) >= min_visible
                if not ok or prev.truncated[j] or f.truncated[i]:
                    continue
                x, y, w, h = prev.truth.boxes[j].astype(int).tolist()
                box_flow = flow[y : y + h, x : x + w].reshape(-1, 2)
                own = prev.mask(tid)[y : y + h, x : x + w].reshape(-1)
                b0, b1 = prev.truth.boxes[j], f.truth.boxes[i]
                disp = (b1[:2] + b1[2:] / 2) - (b0[:2] + b0[2:] / 2)
                m_box, m_own = np.median(box_flow, 0), np.median(box_flow[own], 0)
                out["box"].append(float(np.hypot(*(m_box - disp))))
                out["person"].append(float(np.hypot(*(m_own - disp))))
                out["pelvis"].append(float(np.hypot(*(m_own - f.motion[i]))))
                out["displacement"].append(float(np.hypot(*disp)))
                out["reference"].append(float(np.hypot(*(disp - f.motion[i]))))
        prev = f
    return PersonFlowErrors(**{k: np.asarray(v) for k, v in out.items()})


def background_flow_errors(frames: Iterable[SimFrame], margin: int = 4) -> np.ndarray:
    """Per frame pair: the median |flow - camera motion| over background pixels (outside every box of
    both frames grown by ``margin``, and away from the image border). (F - 1, 2) float64 columns: error,
    median camera-motion magnitude."""
    rows = []
    prev: SimFrame | None = None
    for f in frames:
        if prev is not None:
            flow = dis_flow(prev.image, f.image)
            h, w = flow.shape[:2]
            yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
            m = f.camera_motion
            ex = m[0, 0] * xx + m[0, 1] * yy + m[0, 2] - xx
            ey = m[1, 0] * xx + m[1, 1] * yy + m[1, 2] - yy
            valid = np.zeros((h, w), bool)
            valid[8:-8, 8:-8] = True
            for fr in (prev, f):
                for x, y, bw, bh in fr.truth.boxes.astype(int).tolist():
                    valid[max(y - margin, 0) : y + bh + margin, max(x - margin, 0) : x + bw + margin] = False
            err = np.hypot(flow[..., 0] - ex, flow[..., 1] - ey)[valid]
            rows.append((float(np.median(err)), float(np.median(np.hypot(ex, ey)[valid]))))
        prev = f
    return np.asarray(rows, np.float64).reshape(-1, 2)


def summary(errors: np.ndarray) -> dict[str, float]:
    """count, median and 90th percentile of an error array (NaN when empty)."""
    if len(errors) == 0:
        return {"count": 0, "median": float("nan"), "p90": float("nan")}
    return {
        "count": int(len(errors)),
        "median": float(np.median(errors)),
        "p90": float(np.percentile(errors, 90)),
    }
