"""Camera geometry: projection of the world into the canvas, ego-motion, and the pre-rendered background.

World coordinates are metres: ``X`` to the right, ``Y`` up, ``Z`` forward (away from the camera); the ground
is ``Y = 0``. A fixed virtual camera projects the world into a *canvas* (pinhole, or a 360-degree cylinder);
the robot's ego-motion is a 2D affine map ``A_t`` from canvas to frame pixels. The background is rendered into
the canvas once and warped with ``A_t`` each frame; people are projected into the canvas and mapped with the
same ``A_t``, so the image motion of every static point is exactly the affine motion the simulator reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np
from pairedge.measure.sim.config import CameraConfig
from pairedge.measure.sim.textures import backdrop_band

#: Extra canvas rows above and below a panorama, so vertical shake never samples outside the canvas.
PANO_PAD = 16


@dataclass(frozen=True)
class Projection:
    """The fixed virtual camera.

    Attributes:
        cylinder: True for the 360-degree panorama (u = cx + f * azimuth), else pinhole (u = cx + f X / Z).
        f: focal length in pixels (pixels per radian for the cylinder).
        cx, cy: principal point in canvas pixels (``cy`` is the horizon row).
        height_m: camera height above the ground.
        canvas_w, canvas_h: canvas size in pixels.
        origin: (2,) canvas position of the frame's top-left corner when the camera is at rest.
    """

    cylinder: bool
    f: float
    cx: float
    cy: float
    height_m: float
    canvas_w: int
    canvas_h: int
    origin: tuple[float, float]

    @classmethod
    def from_config(cls, cam: CameraConfig) -> Projection:
        if cam.kind == "panorama":
            f = cam.width / (2 * math.pi)
            return cls(
                True,
                f,
                cam.width / 2,
                PANO_PAD + cam.horizon * cam.height,
                cam.height_m,
                cam.width,
                cam.height + 2 * PANO_PAD,
                (0.0, float(PANO_PAD)),
            )
        f = (cam.width / 2) / math.tan(math.radians(cam.hfov_deg) / 2)
        mx, my = round(cam.margin * cam.width), round(cam.margin * cam.height)
        return cls(
            False,
            f,
            mx + cam.width / 2,
            my + cam.horizon * cam.height,
            cam.height_m,
            cam.width + 2 * mx,
            cam.height + 2 * my,
            (float(mx), float(my)),
        )

    def depth(self, xz: np.ndarray) -> np.ndarray:
        """Depth used for scale and painter's order: Z (pinhole) or ground distance (cylinder). (...,)
        float."""
        if self.cylinder:
            return np.hypot(xz[..., 0], xz[..., 1])
        return xz[..., 1]

    def project(self, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Project world points.

        Args:
            pts: (..., 3) float, world X Y Z in metres.

        Returns:
            uv: (..., 2) float64 canvas pixels (cylinder: u is not wrapped, azimuth in (-pi, pi]);
            depth: (...,) float64 (clamped to >= 0.05 m).
        """
        x, y, z = pts[..., 0], pts[..., 1], pts[..., 2]
        if self.cylinder:
            depth = np.maximum(np.hypot(x, z), 0.05)
            u = self.cx + self.f * np.arctan2(x, z)
        else:
            depth = np.maximum(z, 0.05)
            u = self.cx + self.f * x / depth
        v = self.cy - self.f * (y - self.height_m) / depth
        return np.stack([u, v], -1), depth

    def ground_of_pixels(self, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ground-plane X, Z (metres) seen at canvas pixels below the horizon (``v > cy``)."""
        dist = self.f * self.height_m / np.maximum(v - self.cy, 1e-3)
        if self.cylinder:
            phi = (u - self.cx) / self.f
            return dist * np.sin(phi), dist * np.cos(phi)
        return (u - self.cx) * dist / self.f, dist


def render_canvas(
    proj: Projection, ground_tile: np.ndarray, px_per_m: float, rng: np.random.Generator, ground_kind: str
) -> np.ndarray:
    """The static background of the whole canvas: the backdrop above the horizon, textured ground below.

    The ground tile is sampled in ground-plane coordinates (so it shrinks with distance) from a mip pyramid
    chosen per row to avoid aliasing, and fades into haze near the horizon.

    Returns:
        (canvas_h, canvas_w, 3) uint8.
    """
    h, w = proj.canvas_h, proj.canvas_w
    horizon = int(math.ceil(proj.cy))
    out = np.empty((h, w, 3), np.uint8)
    band_h = max(horizon, 1)
    out[:horizon] = backdrop_band(rng, w, band_h, ground_kind)[band_h - horizon :]
    pyramid = [ground_tile]
    while pyramid[-1].shape[0] > 8:
        pyramid.append(cv2.pyrDown(pyramid[-1]))
    rows = np.arange(horizon, h, dtype=np.float64)
    if len(rows) == 0:
        return out
    cols = np.arange(w, dtype=np.float64)
    uu, vv = np.meshgrid(cols, rows + 0.5)
    gx, gz = proj.ground_of_pixels(uu, vv)
    dist = proj.f * proj.height_m / np.maximum(rows + 0.5 - proj.cy, 1e-3)
    texels_per_px = dist / proj.f * px_per_m
    level = np.clip(np.floor(np.log2(np.maximum(texels_per_px, 1.0))), 0, len(pyramid) - 1).astype(int)
    ground = np.empty((len(rows), w, 3), np.uint8)
    for lv in np.unique(level):
        sel = np.flatnonzero(level == lv)
        tile = pyramid[lv]
        size = tile.shape[0]
        scale = px_per_m / (2**lv)
        mx = np.mod(gx[sel] * scale, size).astype(np.float32)
        my = np.mod(-gz[sel] * scale, size).astype(np.float32)
        ground[sel] = cv2.remap(tile, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_WRAP)
    haze = np.clip((dist - 40.0) / 80.0, 0, 0.85)[:, None, None]
    haze_colour = np.asarray([200, 200, 195], np.float32)
    out[horizon:] = (ground * (1 - haze) + haze_colour * haze).astype(np.uint8)
    return out


class EgoMotion:
    """The camera's affine map ``A_t`` (canvas -> frame) for every frame, in order.

    ``static``: the identity crop. ``moving``: lawnmower stripes (slow forward zoom with steering drift, then
        a
    pan sweep to the other side while the zoom relaxes) plus shake. ``panorama``: yaw rotation (horizontal
    shift with wrap-around) plus vertical shake, both rounded to whole pixels. Shake is an AR(1) process drawn
    from ``rng`` frame by frame.
    """

    def __init__(self, cam: CameraConfig, proj: Projection, rng: np.random.Generator) -> None:
        self.cam = cam
        self.proj = proj
        self._rng = rng
        self._shake = np.zeros(3)  # dx, dy (px), roll (rad)

    def _advance_shake(self) -> np.ndarray:
        cam = self.cam
        if cam.shake_px <= 0 and cam.shake_deg <= 0:
            return self._shake
        sd = np.array([cam.shake_px, cam.shake_px, math.radians(cam.shake_deg)])
        self._shake = 0.5 * self._shake + math.sqrt(1 - 0.25) * sd * self._rng.standard_normal(3)
        return self._shake

    def _lawnmower(self, t: float) -> tuple[float, float]:
        """(pan in px, zoom) at time t."""
        cam = self.cam
        turn = cam.stripe_s / 4
        cycle = cam.stripe_s + turn
        k, tc = divmod(t, cycle)
        side = 1.0 if int(k) % 2 == 0 else -1.0
        drift = 0.1 * cam.pan_px * math.sin(2 * math.pi * t / 3.0)
        if tc < cam.stripe_s:
            s = tc / cam.stripe_s
            return side * cam.pan_px + drift, 1.0 + (cam.zoom_max - 1.0) * s
        s = (tc - cam.stripe_s) / turn
        smooth = s * s * (3 - 2 * s)
        pan = side * cam.pan_px * (1 - 2 * smooth)
        return pan + drift, cam.zoom_max - (cam.zoom_max - 1.0) * smooth

    def affine(self, t: float) -> np.ndarray:
        """``A_t`` for the next frame (call once per frame, in order). (2, 3) float64."""
        dx, dy, roll = self._advance_shake()
        proj, cam = self.proj, self.cam
        if cam.kind == "panorama":
            period = 30.0
            amp = math.radians(cam.yaw_deg_s) * period / (2 * math.pi)
            yaw = amp * (1 - math.cos(2 * math.pi * t / period))
            # whole-pixel shifts: the panorama is moved by an exact integer roll (fast, and exact ground
            # truth)
            tx = float(round(yaw * proj.f + dx) % cam.width)
            ty = float(np.clip(round(dy), -PANO_PAD, PANO_PAD))
            return np.array([[1.0, 0.0, tx], [0.0, 1.0, ty - proj.origin[1]]])
        pan, zoom = self._lawnmower(t) if cam.kind == "moving" and cam.pan_px > 0 else (0.0, 1.0)
        c, s = zoom * math.cos(roll), zoom * math.sin(roll)
        lin = np.array([[c, -s], [s, c]])
        pc = np.array([proj.cx, proj.cy])
        pf = pc - np.asarray(proj.origin)
        trans = pf + np.array([pan + dx, dy]) - lin @ pc
        return np.hstack([lin, trans[:, None]])


def relative_motion(prev: np.ndarray, cur: np.ndarray, wrap_width: int | None = None) -> np.ndarray:
    """The frame-to-frame camera motion ``cur o prev^-1``: previous-frame pixel -> current-frame pixel. (2,
    3).

    With ``wrap_width`` (panorama), the horizontal shift is wrapped into ``[-W/2, W/2)``.
    """
    inv = cv2.invertAffineTransform(prev)
    m = (np.vstack([cur, [0, 0, 1]]) @ np.vstack([inv, [0, 0, 1]]))[:2].copy()
    if wrap_width:
        m[0, 2] = (m[0, 2] + wrap_width / 2) % wrap_width - wrap_width / 2
    return m


def apply_affine(a: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """Apply a (2, 3) affine to (..., 2) points."""
    return pts @ a[:, :2].T + a[:, 2]
