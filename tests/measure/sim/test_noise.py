"""Detector noise, lighting, empty scenes and long runs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.measure.sim import Scene, get_preset, simulate
from pairedge.measure.sim.config import NoiseConfig, with_people
from pairedge.measure.sim.noise import SWITCH_ID_BASE, iou_matrix


def _small(name: str) -> object:
    cfg = get_preset(name)
    return dataclasses.replace(cfg, camera=dataclasses.replace(cfg.camera, width=320, height=240))


def test_noisy_detections_jitter_miss_switch_and_hallucinate() -> None:
    frames = list(simulate(_small("noisy"), seed=4, frames=60))
    n_truth = sum(len(f.truth) for f in frames)
    matched, missed, false_pos, switched = [], 0, 0, 0
    for f in frames:
        det = f.detections
        assert det.boxes.dtype == np.float32 and ((det.scores > 0) & (det.scores < 1)).all()
        false_pos += int((det.track_ids >= SWITCH_ID_BASE).sum())
        iou = iou_matrix(f.truth.boxes.astype(np.float64), det.boxes.astype(np.float64))
        for k in range(len(f.truth)):
            if iou.shape[1] == 0 or iou[k].max() < 0.3:
                missed += 1
                continue
            j = int(iou[k].argmax())
            matched.append(iou[k, j])
            switched += int(det.track_ids[j] != f.truth.track_ids[k])
    assert 0.03 * n_truth < missed < 0.5 * n_truth
    assert false_pos > 10  # false positives and post-switch ids are >= 100000
    assert switched > 0
    assert 0.5 < np.median(matched) < 0.99  # jittered, not exact


def test_without_noise_detections_equal_the_truth() -> None:
    cfg = dataclasses.replace(
        _small("static"),
        noise=NoiseConfig(
            jitter=0, miss_rate=0, occluded_miss_rate=0, switch_per_s=0, swap_prob=0, fp_per_frame=0
        ),
    )
    for f in simulate(cfg, seed=0, frames=5):
        np.testing.assert_allclose(f.detections.boxes, f.truth.boxes, atol=1e-4)
        np.testing.assert_array_equal(f.detections.track_ids, f.truth.track_ids)


def test_lighting_drifts_and_the_truth_does_not_depend_on_it() -> None:
    cfg = _small("noisy")
    means = [f.image.mean() for f in simulate(cfg, seed=1, frames=45)]
    assert max(means) - min(means) > 5  # +-20 % gain over 6 s plus flicker
    dark = dataclasses.replace(
        cfg, lighting=dataclasses.replace(cfg.lighting, gain_amplitude=0.0, flicker=0.0)
    )
    a = list(simulate(cfg, seed=1, frames=3))
    b = list(simulate(dark, seed=1, frames=3))
    for fa, fb in zip(a, b, strict=True):
        np.testing.assert_array_equal(fa.truth.boxes, fb.truth.boxes)
        np.testing.assert_array_equal(fa.pair_labels, fb.pair_labels)


def test_empty_scene() -> None:
    frames = list(simulate(with_people(_small("static"), 0), seed=0, frames=3))
    for f in frames:
        assert len(f.truth) == 0 and f.pairs.shape == (0, 2) and f.stickmen.shape == (0, 6, 4)
        assert f.global_activity == () and f.groups == ()


def test_long_runs_keep_state_bounded() -> None:
    scene = Scene(_small("static"), seed=2)
    world = scene.world
    for _ in range(4000):  # about 4.5 minutes of scene time, without rendering
        world.step()
    assert len(world.people) < 200  # dead people are compacted away
    alive = world.people.alive
    members = sorted(m for u in world.units.values() for m in u.members)
    assert members == sorted(np.flatnonzero(alive).tolist())
    f = scene.next_frame()  # and rendering still works after compaction
    assert len(f.truth) > 0


def test_a_fixed_aspect_detector_draws_every_box_at_one_ratio() -> None:
    cfg = _small("static")
    fixed = dataclasses.replace(cfg, noise=dataclasses.replace(cfg.noise, fixed_aspect=0.44))
    ratios, truth_ratios, heights, truth_heights = [], [], [], []
    for f, g in zip(simulate(fixed, seed=2, frames=40), simulate(cfg, seed=2, frames=40), strict=True):
        b = f.detections.boxes.astype(np.float64)
        inside = (b[:, 0] > 0.5) & (b[:, 0] + b[:, 2] < 319.5) & (b[:, 1] > 0.5) & (b[:, 1] + b[:, 3] < 239.5)
        ratios += (b[inside, 2] / b[inside, 3]).tolist()
        truth_ratios += (f.truth.boxes[:, 2] / f.truth.boxes[:, 3]).tolist()
        heights.append(f.truth.boxes[:, 3].sum())
        truth_heights.append(g.truth.boxes[:, 3].sum())
    assert len(ratios) > 50
    np.testing.assert_allclose(ratios, 0.44, rtol=1e-4)  # float32 rounding only
    assert np.std(truth_ratios) > 0.02  # the truth keeps each person's shape
    np.testing.assert_array_equal(heights, truth_heights)  # the scene itself is the same
    for bad in (-0.1, float("nan"), 6.0):
        with pytest.raises(InputError, match="fixed_aspect"):
            NoiseConfig(fixed_aspect=bad)


def _miss_runs(cfg: object, seed: int, frames: int) -> tuple[list[int], int]:
    """Lengths of the runs of frames in which a truth person had no detection (IoU >= 0.3), and the
    person-frames."""
    runs, current, total = [], {}, 0
    for f in simulate(cfg, seed=seed, frames=frames):
        iou = iou_matrix(f.truth.boxes.astype(np.float64), f.detections.boxes.astype(np.float64))
        found = iou.max(axis=1) >= 0.3 if iou.shape[1] else np.zeros(len(f.truth), bool)
        total += len(f.truth)
        for tid, hit in zip(f.truth.track_ids.tolist(), found.tolist(), strict=True):
            if hit and current.get(tid):
                runs.append(current.pop(tid))
            elif not hit:
                current[tid] = current.get(tid, 0) + 1
    return runs, total


def test_miss_persistence_makes_runs_of_misses() -> None:
    cfg = _small("static")
    base = dataclasses.replace(
        cfg, noise=dataclasses.replace(cfg.noise, miss_rate=0.1, occluded_miss_rate=0.0)
    )
    runs = dataclasses.replace(base, noise=dataclasses.replace(base.noise, miss_persistence=0.7))
    plain, _ = _miss_runs(base, 3, 120)
    long, _ = _miss_runs(runs, 3, 120)
    assert np.mean(plain) < 1.3  # independent misses: runs of about one frame
    assert (
        np.mean(long) > 2.0
    )  # mean run 1 / (1 - 0.7) = 3.3 frames (a run cut by the scene's end is not counted)


def test_duplicate_boxes_sit_on_detected_people() -> None:
    cfg = _small("static")
    quiet = dataclasses.replace(cfg.noise, miss_rate=0.0, occluded_miss_rate=0.0, fp_per_frame=0.0)
    dup = dataclasses.replace(cfg, noise=dataclasses.replace(quiet, duplicate_rate=0.5))
    extra, people, overlaps = 0, 0, []
    for f in simulate(dup, seed=5, frames=30):
        det = f.detections
        fresh = det.track_ids >= SWITCH_ID_BASE
        extra += int(fresh.sum())
        people += len(f.truth)
        if fresh.any() and len(f.truth):
            iou = iou_matrix(det.boxes[fresh].astype(np.float64), f.truth.boxes.astype(np.float64))
            overlaps += iou.max(axis=1).tolist()
    assert 0.35 * people < extra < 0.65 * people  # about half the people get a second box
    assert np.median(overlaps) > 0.4  # on a person, not anywhere
    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(InputError, match="duplicate_rate"):
            NoiseConfig(duplicate_rate=bad)
        with pytest.raises(InputError, match="miss_persistence"):
            NoiseConfig(miss_persistence=bad)


def test_duplicate_runs_keep_their_offset() -> None:
    cfg = _small("static")
    quiet = dataclasses.replace(
        cfg.noise,
        jitter=0.0,
        miss_rate=0.0,
        occluded_miss_rate=0.0,
        fp_per_frame=0.0,
        switch_per_s=0.0,
        swap_prob=0.0,
    )
    runs = dataclasses.replace(
        cfg, noise=dataclasses.replace(quiet, duplicate_rate=0.1, duplicate_persistence=0.9)
    )
    once = dataclasses.replace(cfg, noise=dataclasses.replace(quiet, duplicate_rate=0.1))

    def stats(c: object) -> tuple[float, float]:
        """Duplicates per frame and the share of them that repeat the previous frame's offset on a person."""
        prev: dict[int, np.ndarray] = {}
        count, repeated, frames = 0, 0, 0
        for f in simulate(c, seed=6, frames=60):
            frames += 1
            det, truth = f.detections, f.truth
            dup = det.boxes[det.track_ids >= SWITCH_ID_BASE].astype(np.float64)
            now: dict[int, np.ndarray] = {}
            if len(dup) and len(truth):
                iou = iou_matrix(dup, truth.boxes.astype(np.float64))
                for k, j in enumerate(iou.argmax(axis=1).tolist()):
                    tb = truth.boxes[j].astype(np.float64)
                    rel = np.r_[
                        (dup[k, :2] + dup[k, 2:] / 2 - tb[:2] - tb[2:] / 2) / tb[2:], dup[k, 3] / tb[3]
                    ]
                    tid = int(truth.track_ids[j])
                    repeated += tid in prev and np.allclose(prev[tid], rel, atol=0.02)
                    now[tid] = rel
            count += len(dup)
            prev = now
        return count / frames, repeated / max(count, 1)

    rate_runs, same_runs = stats(runs)
    rate_once, same_once = stats(once)
    assert rate_runs > 2 * rate_once  # runs: a duplicate lasts ~10 frames, so more of them at a time
    assert same_runs > 0.7 and same_once < 0.2  # and keeps its offset from frame to frame


def test_greedy_nms_by_hand_and_the_detectors_own_suppression() -> None:
    from pairedge.core.boxes import nms_keep

    def greedy_nms(b: np.ndarray, scores: np.ndarray, iou: float) -> np.ndarray:
        return np.flatnonzero(nms_keep(b, scores, iou))

    boxes = np.array([[0, 0, 10, 10], [1, 0, 10, 10], [30, 0, 10, 10], [5, 0, 10, 10]], np.float64)
    # IoU(0, 1) = 90 / 110 = 0.82; IoU(0, 3) = 50 / 150 = 0.33; IoU(1, 3) = 60 / 140 = 0.43
    assert greedy_nms(boxes, np.array([0.9, 0.8, 0.5, 0.7]), 0.5).tolist() == [0, 2, 3]
    assert greedy_nms(boxes, np.array([0.9, 0.8, 0.5, 0.7]), 0.3).tolist() == [0, 2]
    assert greedy_nms(boxes, np.array([0.1, 0.8, 0.5, 0.7]), 0.4).tolist() == [1, 2]  # 1 beats 0 and 3
    cfg = _small("static")
    noise = dataclasses.replace(cfg.noise, duplicate_rate=0.5, detector_nms=0.5)
    worst = 0.0
    for f in simulate(dataclasses.replace(cfg, noise=noise), seed=5, frames=20):
        b = f.detections.boxes.astype(np.float64)
        if len(b) > 1:
            worst = max(worst, float(np.triu(iou_matrix(b, b), 1).max()))
    assert 0.2 < worst <= 0.5  # duplicates survive only below the detector's own threshold
