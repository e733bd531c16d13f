"""What corrupts the observations: detector noise on the detections, and lighting on the image."""

from __future__ import annotations

import math

import cv2
import numpy as np
from pairedge.core.boxes import iou_matrix, nms_keep
from pairedge.core.types import Detections
from pairedge.measure.sim.config import LightingConfig, NoiseConfig

#: Identities given by the simulated tracker after an identity switch start here (truth ids are small).
SWITCH_ID_BASE = 100_000


class DetectorNoise:
    """A simulated detector + tracker: jitter, misses, identity switches and swaps, false positives.

    State (the identity map) lives in the instance, so one instance serves one scene, frame by frame.

    Args:
        cfg: noise levels. fps: frame rate. rng: the noise stream. size: (W, H) of the image.
        wrap: True for a panorama (boxes may cross the right edge; no clipping in x).
    """

    def __init__(
        self, cfg: NoiseConfig, fps: float, rng: np.random.Generator, size: tuple[int, int], wrap: bool
    ) -> None:
        self.cfg, self.fps, self.rng, self.size, self.wrap = cfg, fps, rng, size, wrap
        self.ids: dict[int, int] = {}
        self.next_id = SWITCH_ID_BASE
        self.missed: set[int] = set()  # truth ids missed in the previous frame (miss_persistence)
        # truth id -> (dx, dy, scale) of the duplicate box it had in the previous frame
        # (duplicate_persistence)
        self.duplicated: dict[int, tuple[float, float, float]] = {}

    def _fresh(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def apply(self, truth: Detections, visible: np.ndarray) -> Detections:
        """Noisy detections of one frame from the exact truth and each person's visible share (N,)."""
        cfg, rng = self.cfg, self.rng
        n = len(truth)
        miss = rng.random(n) < cfg.miss_rate + cfg.occluded_miss_rate * (1.0 - visible)
        if cfg.miss_persistence > 0:  # extra draws only then: the scenes of other configs stay as they were
            was_missed = np.isin(truth.track_ids, list(self.missed))
            miss |= was_missed & (rng.random(n) < cfg.miss_persistence)
            self.missed = set(truth.track_ids[miss].tolist())
        switch = rng.random(n) < cfg.switch_per_s / self.fps
        noise = rng.standard_normal((n, 4)) * cfg.jitter
        scores = np.clip(0.55 + 0.4 * visible + 0.05 * rng.standard_normal(n), 0.05, 0.99)
        ids = np.empty(n, np.int64)
        for k, tid in enumerate(truth.track_ids.tolist()):
            if switch[k]:
                self.ids[tid] = self._fresh()
            ids[k] = self.ids.get(tid, tid)
        b = truth.boxes.astype(np.float64)
        cx = b[:, 0] + b[:, 2] / 2 + noise[:, 0] * b[:, 2]
        cy = b[:, 1] + b[:, 3] / 2 + noise[:, 1] * b[:, 3]
        w, h = b[:, 2] * np.exp(noise[:, 2]), b[:, 3] * np.exp(noise[:, 3])
        if cfg.fixed_aspect > 0:
            w = cfg.fixed_aspect * h  # a sliding-window detector: one box shape for everyone
        boxes = np.stack([cx - w / 2, cy - h / 2, w, h], 1)
        keep = ~miss
        self._swap(boxes[keep], truth.track_ids[keep], ids, keep)
        fp_boxes, fp_ids, fp_scores = self._false_positives()
        dup_boxes, dup_ids, dup_scores = self._duplicates(boxes[keep], scores[keep], truth.track_ids[keep])
        boxes = self._clip(np.concatenate([boxes[keep], dup_boxes, fp_boxes]))
        ids = np.concatenate([ids[keep], dup_ids, fp_ids])
        scores = np.concatenate([scores[keep], dup_scores, fp_scores])
        if cfg.detector_nms > 0:  # the detector's own suppression: what survives overlaps by less
            kept = nms_keep(boxes, scores, cfg.detector_nms)
            boxes, ids, scores = boxes[kept], ids[kept], scores[kept]
        return Detections.from_arrays(boxes, ids, scores)

    def _duplicates(
        self, boxes: np.ndarray, scores: np.ndarray, tids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Second boxes on some of the detected people (N, 4) with truth ids ``tids`` (N,).

        A person gets one with probability ``duplicate_rate``, or ``duplicate_persistence`` when they had one
        in the previous frame; a run of duplicates keeps the offset it started with (a detector's duplicate
        comes from how the person looks, which lasts). The offset: centre moved by ~20 % of the box width and
        ~10 % of its height, size scaled by ~20 % (IoU with the first box: 5th-95th percentile 0.34-0.83,
        29 % below 0.5); score 50-95 % of the first's; a fresh id every frame (ids are the simulated
        tracker's, and a duplicate's track does not persist there).
        """
        cfg = self.cfg
        if cfg.duplicate_rate <= 0 or not len(boxes):
            self.duplicated = {}
            return np.zeros((0, 4)), np.zeros(0, np.int64), np.zeros(0)
        before = np.array([t in self.duplicated for t in tids.tolist()], bool)
        draw = self.rng.random(len(boxes))
        pick = np.flatnonzero(
            np.where(
                before, draw < max(cfg.duplicate_persistence, cfg.duplicate_rate), draw < cfg.duplicate_rate
            )
        )
        fresh = self.rng.standard_normal((len(pick), 3)) * np.array([0.2, 0.1, 0.2])
        offsets = {}
        for k, row in enumerate(pick.tolist()):
            tid = int(tids[row])
            offsets[tid] = self.duplicated.get(tid, tuple(fresh[k].tolist()))
        self.duplicated = offsets
        b = boxes[pick]
        off = np.array([offsets[int(tids[r])] for r in pick.tolist()], np.float64).reshape(-1, 3)
        centre = b[:, :2] + b[:, 2:] / 2 + off[:, :2] * b[:, 2:]
        size = b[:, 2:] * np.exp(off[:, 2:])
        dup_scores = scores[pick] * self.rng.uniform(0.5, 0.95, len(pick))
        ids = np.array([self._fresh() for _ in pick], np.int64)
        return np.concatenate([centre - size / 2, size], 1).reshape(-1, 4), ids, dup_scores

    def _swap(self, boxes: np.ndarray, tids: np.ndarray, ids: np.ndarray, keep: np.ndarray) -> None:
        """Overlapping tracks exchange identities with probability ``swap_prob`` (persisting afterwards)."""
        if len(boxes) < 2 or self.cfg.swap_prob <= 0:
            return
        iou = np.triu(iou_matrix(boxes, boxes), 1)
        ia, ib = np.nonzero(iou > 0.3)
        draws = self.rng.random(len(ia))
        rows = np.flatnonzero(keep)
        used: set[int] = set()
        for a, b, r in zip(ia.tolist(), ib.tolist(), draws.tolist(), strict=True):
            if r >= self.cfg.swap_prob or a in used or b in used:
                continue
            used.update((a, b))
            ta, tb = int(tids[a]), int(tids[b])
            da, db = self.ids.get(ta, ta), self.ids.get(tb, tb)
            self.ids[ta], self.ids[tb] = db, da
            ids[rows[a]], ids[rows[b]] = db, da

    def _false_positives(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        w_img, h_img = self.size
        k = int(self.rng.poisson(self.cfg.fp_per_frame))
        h = self.rng.uniform(30, 0.5 * h_img, k)
        w = h * self.rng.uniform(0.3, 0.5, k)
        if self.cfg.fixed_aspect > 0:
            w = self.cfg.fixed_aspect * h
        x = self.rng.uniform(0, np.maximum(w_img - w, 1))
        y = self.rng.uniform(0.2 * h_img, np.maximum(h_img - h, 0.2 * h_img + 1))
        scores = self.rng.uniform(0.1, 0.6, k)
        ids = np.array([self._fresh() for _ in range(k)], np.int64)
        return np.stack([x, y, w, h], 1).reshape(-1, 4), ids, scores

    def _clip(self, boxes: np.ndarray) -> np.ndarray:
        w_img, h_img = self.size
        x0, y0 = boxes[:, 0], np.clip(boxes[:, 1], 0, h_img)
        x1, y1 = boxes[:, 0] + boxes[:, 2], np.clip(boxes[:, 1] + boxes[:, 3], 0, h_img)
        if self.wrap:
            x0 = np.mod(x0, w_img)
            x1 = x0 + boxes[:, 2]
        else:
            x0, x1 = np.clip(x0, 0, w_img), np.clip(x1, 0, w_img)
        return np.stack([x0, y0, np.maximum(x1 - x0, 1.0), np.maximum(y1 - y0, 1.0)], 1)


class Lighting:
    """Global gain drift (a slow sinusoid), per-frame flicker and additive sensor noise.

    Args:
        cfg: lighting levels. rng: the lighting stream. size: (W, H) of the image.
    """

    def __init__(self, cfg: LightingConfig, rng: np.random.Generator, size: tuple[int, int]) -> None:
        self.cfg, self.rng = cfg, rng
        self.phase = float(rng.uniform(0, 2 * math.pi))
        self.bank: list[tuple[np.ndarray, np.ndarray]] = []
        if cfg.sensor_noise > 0:
            for _ in range(8):
                noise = rng.normal(0, cfg.sensor_noise, (size[1], size[0], 3))
                self.bank.append(
                    (np.clip(noise, 0, 255).astype(np.uint8), np.clip(-noise, 0, 255).astype(np.uint8))
                )

    def gain(self, t: float) -> float:
        """The global gain at time t (also consumes the flicker draw of that frame)."""
        cfg = self.cfg
        g = 1.0 + cfg.gain_amplitude * math.sin(2 * math.pi * t / cfg.gain_period_s + self.phase)
        if cfg.flicker > 0:
            g += cfg.flicker * float(self.rng.standard_normal())
        return g

    def apply(self, image: np.ndarray, t: float) -> np.ndarray:
        """The lit image (a new array); ``image`` is (H, W, 3) uint8."""
        out = cv2.convertScaleAbs(image, alpha=self.gain(t))
        if self.bank:
            plus, minus = self.bank[int(self.rng.integers(len(self.bank)))]
            cv2.add(out, plus, dst=out)
            cv2.subtract(out, minus, dst=out)
        return out
