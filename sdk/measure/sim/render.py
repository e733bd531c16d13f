"""Per-frame rendering: warp the background, then draw benches and people in depth order.

Each person is drawn as cv2 primitives (a convex torso, thick-line limbs, circular head and hands) into a
small per-person label buffer; clothing colours and a periodic texture that moves with the person are
composited where the labels are set, and the person's draw index is written into an instance buffer.
Painter's order (far to near) gives occlusion; each visible box is the exact extent of the person's pixels
left in the instance buffer, so it is tight by construction and clipped to the image.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from pairedge.measure.sim.area import Bench
from pairedge.measure.sim.body import (
    BAG,
    FAR,
    HAIR,
    HEAD_RADIUS,
    SHIRT,
    SHOES,
    SKIN,
    TROUSERS,
    WIDTHS,
    Appearance,
    J,
)
from pairedge.measure.sim.camera import Projection, apply_affine
from pairedge.measure.sim.config import CameraConfig

SHIFT = 4
ONE = 1 << SHIFT
# texture channel per part label: shirt -> 0, trousers -> 1, everything else -> 2 (as 0/255 masks for cv2.LUT)
_SHIRT_MASK = np.zeros(256, np.uint8)
_SHIRT_MASK[[SHIRT, SHIRT + FAR]] = 255
_TROUSERS_MASK = np.zeros(256, np.uint8)
_TROUSERS_MASK[[TROUSERS, TROUSERS + FAR]] = 255
# limbs: (joints drawn as lines, width keys, labels) for arm_l, arm_r, leg_l, leg_r
_LIMBS = (
    (("l_shoulder", "l_elbow", "l_wrist"), ("upper_arm", "forearm"), "l_hand"),
    (("r_shoulder", "r_elbow", "r_wrist"), ("upper_arm", "forearm"), "r_hand"),
    (("l_hip", "l_knee", "l_ankle", "l_toe"), ("thigh", "shin", "foot"), None),
    (("r_hip", "r_knee", "r_ankle", "r_toe"), ("thigh", "shin", "foot"), None),
)
_LIMB_IDX = tuple(tuple(J[n] for n in limb[0]) for limb in _LIMBS)
_PART_LABEL = {"upper_arm": SHIRT, "forearm": SHIRT, "thigh": TROUSERS, "shin": TROUSERS, "foot": SHOES}
# bench boxes in bench-local metres (x0, x1, y0, y1, z0, z1), drawn in this order, and their BGR colours
_BENCH_BOXES = (
    ((-1.0, 1.0, 0.50, 0.90, -0.275, -0.225), (40, 80, 125)),
    ((-0.95, -0.89, 0.0, 0.45, -0.225, -0.165), (55, 55, 60)),
    ((0.89, 0.95, 0.0, 0.45, -0.225, -0.165), (55, 55, 60)),
    ((-1.0, 1.0, 0.42, 0.47, -0.225, 0.225), (55, 105, 150)),
    ((-0.95, -0.89, 0.0, 0.42, 0.165, 0.225), (45, 45, 50)),
    ((0.89, 0.95, 0.0, 0.42, 0.165, 0.225), (45, 45, 50)),
)


@dataclass(frozen=True)
class PeopleView:
    """The people of one frame projected into the image (rows sorted by track id).

    Attributes:
        tids: (N,) int64. joints: (N, J, 2) float64 image pixels; for a panorama each person's x is unwrapped
        around its pelvis, which lies in [0, W). depth: (N, J) metres. scale: (N,) pixels per metre at the
        pelvis. looks: appearances. back: (N,) bool, back turned to the camera. bag: (N,) bool.
    """

    tids: np.ndarray
    joints: np.ndarray
    depth: np.ndarray
    scale: np.ndarray
    looks: tuple[Appearance, ...]
    back: np.ndarray


@dataclass(frozen=True)
class DrawResult:
    """What the renderer measured.

    Attributes:
        rows: (K,) rows of the PeopleView that are visible, in track-id order.
        boxes: (K, 4) float32 tight x y w h (integer-valued; panorama x in [0, W), x + w may exceed W).
        visible: (K,) float32 visible share of the person's in-frame pixels.
        truncated: (K,) bool, the person extends beyond the image border (pinhole cameras).
        x_shift: (K,) float64, subtract from the joints' x to express them like the box (panorama wrap).
        instance_map: (H, W) uint16, 0 = no person, v > 0 = person ``instance_ids[v - 1]``.
        instance_ids: (D,) int64 track ids in draw order.
    """

    rows: np.ndarray
    boxes: np.ndarray
    visible: np.ndarray
    truncated: np.ndarray
    x_shift: np.ndarray
    instance_map: np.ndarray
    instance_ids: np.ndarray


def _bench_corners(bench: Bench) -> np.ndarray:
    """(len(_BENCH_BOXES), 8, 3) world corners of a bench's boxes."""
    half = bench.length / 2
    out = []
    for (x0, x1, y0, y1, z0, z1), _ in _BENCH_BOXES:
        xs, ys, zs = np.array([x0, x1]) * half, np.array([y0, y1]), np.array([z0, z1])
        c = np.array([[x, y, z] for x in xs for y in ys for z in zs])
        s, co = np.sin(bench.heading), np.cos(bench.heading)
        wx = bench.pos[0] + c[:, 0] * co + c[:, 2] * s
        wz = bench.pos[1] - c[:, 0] * s + c[:, 2] * co
        out.append(np.stack([wx, c[:, 1], wz], 1))
    return np.stack(out)


class Renderer:
    """Draws frames for one camera.

    Args:
        cam: camera configuration. proj: the virtual camera. canvas: (Hc, Wc, 3) uint8 pre-rendered
            background.
        benches: the benches of the world. min_visible_px: fewer visible pixels than this = not visible.
    """

    def __init__(
        self,
        cam: CameraConfig,
        proj: Projection,
        canvas: np.ndarray,
        benches: tuple[Bench, ...],
        min_visible_px: int,
    ) -> None:
        self.cam, self.proj, self.canvas = cam, proj, canvas
        self.size = (cam.width, cam.height)
        self.wrap = cam.width if proj.cylinder else 0
        self.min_visible_px = min_visible_px
        self.bench_corners = (
            np.stack([_bench_corners(b) for b in benches]) if benches else np.zeros((0, 6, 8, 3))
        )
        centre = np.stack([b.pos for b in benches]) if benches else np.zeros((0, 2))
        back = (
            np.stack([b.pos - 0.25 * np.array([np.sin(b.heading), np.cos(b.heading)]) for b in benches])
            if benches
            else np.zeros((0, 2))
        )
        self.bench_depth = proj.depth(back)
        self.bench_centre = centre

    def background(self, affine: np.ndarray) -> np.ndarray:
        """The background of a frame: the canvas warped by ``affine`` (canvas -> frame). (H, W, 3) uint8."""
        if not self.wrap and np.allclose(
            affine, [[1, 0, -self.proj.origin[0]], [0, 1, -self.proj.origin[1]]]
        ):
            ox, oy = int(self.proj.origin[0]), int(self.proj.origin[1])
            return self.canvas[oy : oy + self.size[1], ox : ox + self.size[0]].copy()
        if (
            self.wrap
            and np.allclose(affine[:, :2], np.eye(2))
            and np.allclose(affine[:, 2], np.round(affine[:, 2]))
        ):
            tx, ty = int(round(affine[0, 2])) % self.size[0], int(round(-affine[1, 2]))
            rows = self.canvas[ty : ty + self.size[1]]
            return np.ascontiguousarray(
                np.concatenate([rows[:, self.size[0] - tx :], rows[:, : self.size[0] - tx]], 1)
            )
        border = cv2.BORDER_WRAP if self.wrap else cv2.BORDER_REFLECT
        return cv2.warpAffine(self.canvas, affine, self.size, flags=cv2.INTER_LINEAR, borderMode=border)

    def _to_image(self, world: np.ndarray, affine: np.ndarray, anchor: int) -> tuple[np.ndarray, np.ndarray]:
        """Project (N, P, 3) world points to image pixels, unwrapping each row around point ``anchor``."""
        uv, depth = self.proj.project(world)
        if self.wrap:
            ref = uv[:, anchor : anchor + 1, 0]
            uv[..., 0] = ref + (uv[..., 0] - ref + self.wrap / 2) % self.wrap - self.wrap / 2
        img = apply_affine(affine, uv)
        if self.wrap:
            img[..., 0] -= np.floor(img[:, anchor : anchor + 1, 0] / self.wrap) * self.wrap
        return img, depth

    def project_people(
        self,
        world_joints: np.ndarray,
        affine: np.ndarray,
        tids: np.ndarray,
        looks: tuple[Appearance, ...],
        facing: np.ndarray,
    ) -> PeopleView:
        """Project N people's world joints (N, J, 3) given their facing unit vectors (N, 2) (ground X, Z)."""
        img, depth = self._to_image(world_joints, affine, J["pelvis"])
        zoom = float(np.sqrt(abs(np.linalg.det(affine[:, :2]))))
        scale = self.proj.f * zoom / np.maximum(depth[:, J["pelvis"]], 0.05)
        pelvis = world_joints[:, J["pelvis"]]
        view = np.stack([pelvis[:, 0], pelvis[:, 2]], 1)
        back = (facing * view).sum(1) > 0.3 * np.hypot(view[:, 0], view[:, 1])
        return PeopleView(tids, img, depth, scale, looks, back)

    def draw(self, frame: np.ndarray, affine: np.ndarray, people: PeopleView) -> DrawResult:
        """Draw benches and people onto ``frame`` (modified in place) and measure the visible boxes."""
        h, w = frame.shape[:2]
        idbuf = np.zeros((h, w), np.uint16)
        n = len(people.tids)
        items = [(float(people.depth[k, J["pelvis"]]), 1, k) for k in range(n)]
        items += [(float(d), 0, b) for b, d in enumerate(self.bench_depth)]
        items.sort(key=lambda it: (-it[0], it[1], it[2]))
        rois: dict[int, tuple[int, int, np.ndarray, int]] = {}
        draw_ids: list[int] = []
        for _, kind, k in items:
            if kind == 0:
                self._draw_bench(frame, idbuf, affine, k)
                continue
            roi = self._draw_person(frame, idbuf, people, k, len(draw_ids) + 1)
            draw_ids.append(int(people.tids[k]))
            if roi is not None:
                rois[k] = roi
        return self._measure(idbuf, people, rois, draw_ids)

    def _draw_bench(self, frame: np.ndarray, idbuf: np.ndarray, affine: np.ndarray, b: int) -> None:
        corners = self.bench_corners[b].reshape(1, -1, 3)
        img, _ = self._to_image(corners, affine, 0)
        img = img.reshape(len(_BENCH_BOXES), 8, 2)
        offsets = [0.0]
        if self.wrap:
            lo, hi = img[..., 0].min(), img[..., 0].max()
            offsets += ([self.wrap] if lo < 0 else []) + ([-self.wrap] if hi >= self.wrap else [])
        for off in offsets:
            for box, (_, colour) in zip(img, _BENCH_BOXES, strict=True):
                pts = np.round((box + [off, 0]) * ONE).astype(np.int32)
                hull = cv2.convexHull(pts)
                cv2.fillConvexPoly(frame, hull, colour, cv2.LINE_8, SHIFT)
                cv2.fillConvexPoly(idbuf, hull, 0, cv2.LINE_8, SHIFT)
                edge = tuple(int(c * 0.6) for c in colour)
                cv2.polylines(frame, [hull], True, edge, 1, cv2.LINE_8, SHIFT)

    def _roi(self, people: PeopleView, k: int) -> tuple[int, int, int, int, bool]:
        """Integer bounds (x0, y0, x1, y1) of person k's drawing and whether it was clipped by the image."""
        pts = people.joints[k]
        s = people.scale[k] * people.looks[k].height_m / 1.75
        pad = s * (0.09 + HEAD_RADIUS * 1.75 * 0.2) + 3 + (s * 0.35 if people.looks[k].bag else 0)
        x0, y0 = np.floor(pts.min(0) - pad).astype(int)
        x1, y1 = np.ceil(pts.max(0) + pad).astype(int) + 1
        h, w = self.size[1], self.size[0]
        clipped = bool(y0 < 0 or y1 > h or (not self.wrap and (x0 < 0 or x1 > w)))
        y0, y1 = max(y0, 0), min(y1, h)
        if not self.wrap:
            x0, x1 = max(x0, 0), min(x1, w)
        return int(x0), int(y0), int(x1), int(y1), clipped

    def _draw_person(
        self, frame: np.ndarray, idbuf: np.ndarray, people: PeopleView, k: int, value: int
    ) -> tuple[int, int, np.ndarray, int] | None:
        x0, y0, x1, y1, clipped = self._roi(people, k)
        if x1 <= x0 or y1 <= y0 or x1 - x0 > self.size[0] // 2 + 400:
            return None
        lab = np.zeros((y1 - y0, x1 - x0), np.uint8)
        look = people.looks[k]
        _draw_labels(
            lab, people.joints[k] - [x0, y0], people.depth[k], people.scale[k], look, bool(people.back[k])
        )
        count = cv2.countNonZero(lab)
        if count == 0:
            return None
        colour = _colourise(lab, look, people.joints[k, J["pelvis"]] - [x0, y0], float(people.scale[k]))
        mask = cv2.threshold(lab, 0, 255, cv2.THRESH_BINARY)[1]
        if self.wrap and (x0 < 0 or x1 > self.size[0]):
            cols = np.arange(x0, x1) % self.size[0]
            region = np.ascontiguousarray(frame[y0:y1][:, cols])
            ids = np.ascontiguousarray(idbuf[y0:y1][:, cols])
            cv2.copyTo(colour, mask, region)
            np.copyto(ids, np.uint16(value), where=lab > 0)
            frame[y0:y1, cols] = region
            idbuf[y0:y1, cols] = ids
        else:
            cv2.copyTo(colour, mask, frame[y0:y1, x0:x1])  # writes into the frame view in place
            np.copyto(idbuf[y0:y1, x0:x1], np.uint16(value), where=lab > 0)
        return x0, y0, np.array([x1, y1, count, int(clipped)]), value

    def _measure(
        self,
        idbuf: np.ndarray,
        people: PeopleView,
        rois: dict[int, tuple[int, int, np.ndarray, int]],
        draw_ids: list[int],
    ) -> DrawResult:
        rows, boxes, vis, trunc, shifts = [], [], [], [], []
        width = self.size[0]
        for k in range(len(people.tids)):
            if k not in rois:
                continue
            x0, y0, (x1, y1, count, clipped), value = rois[k]
            if self.wrap and (x0 < 0 or x1 > width):
                region = idbuf[y0:y1][:, np.arange(x0, x1) % width]
            else:
                region = idbuf[y0:y1, x0:x1]
            mine = region == value
            seen = int(np.count_nonzero(mine))
            if seen < self.min_visible_px:
                continue
            ys = np.flatnonzero(mine.any(1))
            xs = np.flatnonzero(mine.any(0))
            bx = x0 + xs[0]
            shift = float(np.floor(bx / width) * width) if self.wrap else 0.0
            rows.append(k)
            boxes.append([bx - shift, y0 + ys[0], xs[-1] - xs[0] + 1, ys[-1] - ys[0] + 1])
            vis.append(seen / max(count, 1))
            trunc.append(bool(clipped))
            shifts.append(shift)
        return DrawResult(
            np.asarray(rows, np.int64),
            np.asarray(boxes, np.float32).reshape(-1, 4),
            np.asarray(vis, np.float32),
            np.asarray(trunc, bool),
            np.asarray(shifts, np.float64),
            idbuf,
            np.asarray(draw_ids, np.int64),
        )


def _colourise(lab: np.ndarray, look: Appearance, anchor: np.ndarray, scale: float) -> np.ndarray:
    """Colour of a person's label image: part colour times the person's texture, which moves with its pelvis.

    The texture maps 1 tile pixel to 1 cm of clothing at pyramid level 0; the level is chosen so that it is
    not aliased; sampling is nearest-texel at continuous coordinates (texel edges move with sub-pixel
    accuracy).

    Args:
        lab: (h, w) uint8 part labels (0 = not the person).
        anchor: (2,) pelvis position in ``lab`` pixels. scale: pixels per metre.

    Returns:
        (h, w, 3) uint8 BGR (meaningful where ``lab > 0``).
    """
    cm_per_px = 100.0 / max(scale, 1e-3)
    level = int(np.clip(np.floor(np.log2(max(cm_per_px, 1.0))), 0, len(look.patterns) - 1))
    tile = look.patterns[level]
    k = cm_per_px / (1 << level)
    wrap = tile.shape[0] - 1  # tiles are powers of two: & wraps negative indices too
    tx = np.floor((np.arange(lab.shape[1]) - anchor[0]) * k).astype(np.intp) & wrap
    ty = np.floor((np.arange(lab.shape[0]) - anchor[1]) * k).astype(np.intp) & wrap
    shirt, trousers, sel = cv2.split(np.take(np.take(tile, ty, axis=0), tx, axis=1))
    cv2.copyTo(shirt, cv2.LUT(lab, _SHIRT_MASK), sel)
    cv2.copyTo(trousers, cv2.LUT(lab, _TROUSERS_MASK), sel)
    colours = cv2.LUT(cv2.merge([lab, lab, lab]), look.colour_lut)
    return cv2.multiply(colours, cv2.merge([sel, sel, sel]), scale=1.0 / 255.0)


def _draw_labels(
    lab: np.ndarray, joints: np.ndarray, depth: np.ndarray, scale: float, look: Appearance, back: bool
) -> None:
    """Draw one person's part labels into ``lab``; joints (J, 2) are in ``lab`` pixel coordinates."""
    s = scale * look.height_m / 1.75
    pts = np.round(joints * ONE).astype(np.int32).tolist()
    widths = {key: max(1, int(round(v * s))) for key, v in WIDTHS.items()}
    torso_depth = 0.5 * (depth[J["neck"]] + depth[J["pelvis"]])
    limb_depth = [float(depth[list(idx)].mean()) for idx in _LIMB_IDX]
    order = sorted(range(5), key=lambda i: -(limb_depth[i] if i < 4 else torso_depth))
    for i in order:
        if i == 4:
            _draw_torso(lab, joints, s)
            continue
        far = FAR if limb_depth[i] > torso_depth + 1e-3 else 0
        idx, keys, hand = _LIMB_IDX[i], _LIMBS[i][1], _LIMBS[i][2]
        for seg, key in enumerate(keys):
            label = SKIN if key == "forearm" and look.short_sleeves else _PART_LABEL[key]
            cv2.line(lab, pts[idx[seg]], pts[idx[seg + 1]], label + far, widths[key], cv2.LINE_8, SHIFT)
        if hand is not None:
            hc = pts[J[hand]]
            cv2.circle(lab, hc, int(round(0.5 * widths["hand"] * ONE)), SKIN + far, -1, cv2.LINE_8, SHIFT)
            if look.bag and hand == "r_hand":
                bag = np.array([[-0.12, 0.0], [0.12, 0.0], [0.14, 0.3], [-0.14, 0.3]]) * s + joints[J[hand]]
                cv2.fillConvexPoly(lab, _pts(bag), BAG + far, cv2.LINE_8, SHIFT)
    cv2.line(lab, pts[J["neck"]], pts[J["head"]], SKIN, widths["neck"], cv2.LINE_8, SHIFT)
    r = HEAD_RADIUS * 1.75 * s
    centre = pts[J["head"]]
    if back:
        cv2.circle(lab, centre, int(round(r * 1.04 * ONE)), HAIR, -1, cv2.LINE_8, SHIFT)
        return
    cv2.circle(lab, centre, int(round(r * ONE)), SKIN, -1, cv2.LINE_8, SHIFT)
    top = (centre[0], centre[1] - int(round(0.2 * r * ONE)))
    axes = (int(round(r * 1.04 * ONE)), int(round(r * 0.9 * ONE)))
    cv2.ellipse(lab, top, axes, 0, 180, 360, HAIR, -1, cv2.LINE_8, SHIFT)


def _pts(p: np.ndarray) -> np.ndarray:
    return np.round(p * ONE).astype(np.int32)


def _draw_torso(lab: np.ndarray, joints: np.ndarray, s: float) -> None:
    """A convex hexagon from the shoulders to the hips, at least as wide as the body seen from the side."""
    neck, pelvis = joints[J["neck"]], joints[J["pelvis"]]
    axis = pelvis - neck
    length = max(float(np.hypot(*axis)), 1e-6)
    down = axis / length
    normal = np.array([-down[1], down[0]])
    sh = 0.5 * abs(float((joints[J["l_shoulder"]] - joints[J["r_shoulder"]]) @ normal))
    hip = 0.5 * abs(float((joints[J["l_hip"]] - joints[J["r_hip"]]) @ normal))
    w_sh = max(sh, WIDTHS["torso_depth"] * 0.5 * s)
    w_hip = max(hip + 0.05 * s, WIDTHS["torso_depth"] * 0.5 * s)
    top = neck + down * 0.04 * s
    crotch = pelvis + down * 0.08 * s
    poly = np.array(
        [
            top - normal * w_sh,
            top + normal * w_sh,
            pelvis + normal * w_hip,
            crotch + normal * w_hip * 0.7,
            crotch - normal * w_hip * 0.7,
            pelvis - normal * w_hip,
        ]
    )
    cv2.fillConvexPoly(lab, _pts(poly), SHIRT, cv2.LINE_8, SHIFT)
