"""The ``pairedge`` spec: units, time-step and scale invariance, ego-motion removal, history, box-only
mode."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.core.features import get_spec
from pairedge.core.features.edge import FP, FQ, PAIR_NAMES, PERSON_NAMES, PairedgeConfig
from pairedge.core.features.egomotion import displacement, estimate
from pairedge.core.features.history import TrackHistory
from pairedge.core.types import Detections

SPEC = get_spec("pairedge")
PI = {n: i for i, n in enumerate(PERSON_NAMES)}
QI = {n: i for i, n in enumerate(PAIR_NAMES)}


def col(pf, name):
    """Column of stage 2 by name, e.g. 'a_vx' or 'pair_distance'."""
    return pf.stage2[:, SPEC.stage2_names.index(name)]


def run(tracks, times, size=(640, 480), config=None, flows=None, scale=1.0):
    """Feed a list of (boxes, ids) per frame; returns the last PairFeatures."""
    ex = SPEC.make_extractor(config)
    out = None
    for k, ((boxes, ids), t) in enumerate(zip(tracks, times, strict=True)):
        flow = None if flows is None else flows[k]
        out = ex.step(Detections.from_arrays(boxes, ids), t, size, flow, scale)
    return out


def walking(fps, seconds=0.7, scale=1.0):
    """A walks right at 100 px/s (h 100 -> 1 height/s); B 60 px below, same velocity; C walks left."""
    n = int(round(seconds * fps)) + 1
    times = [k / fps for k in range(n)]
    frames = [
        (
            np.array(
                [[100 + 100 * t, 100, 40, 100], [100 + 100 * t, 160, 40, 100], [400 - 50 * t, 100, 40, 100]]
            )
            * scale,
            [1, 2, 3],
        )
        for t in times
    ]
    return frames, times


def test_layout_stage2_is_a_b_pair_and_stage1_is_pair():
    assert SPEC.person_dim == FP == 15 and SPEC.pair_dim == FQ == 31  # v2: + orientation columns
    assert SPEC.stage2_dim == 2 * FP + FQ and SPEC.stage1_dim == FQ
    frames, times = walking(30)
    pf = run(frames, times, config={"motion": "boxes"})
    np.testing.assert_array_equal(pf.stage2[:, 2 * FP :], pf.stage1)
    assert pf.stage1.dtype == np.float32 and pf.pairs.tolist() == [[1, 2], [1, 3], [2, 3]]


def test_box_only_velocity_in_heights_per_second():
    frames, times = walking(30)
    pf = run(frames, times, config={"motion": "boxes"})
    np.testing.assert_allclose(col(pf, "a_vx"), [1.0, 1.0, 1.0], atol=1e-5)
    np.testing.assert_allclose(col(pf, "b_vx"), [1.0, -0.5, -0.5], atol=1e-5)
    np.testing.assert_allclose(col(pf, "a_vy"), 0.0, atol=1e-6)
    np.testing.assert_allclose(col(pf, "a_history_fill"), 1.0)
    np.testing.assert_allclose(col(pf, "a_flow_valid"), 0.0)
    np.testing.assert_allclose(col(pf, "a_spread"), 0.0, atol=1e-5)  # steady walk


def test_normalised_by_real_time_step_and_scale_invariant():
    ref = run(*walking(30), config={"motion": "boxes"})
    slow = run(*walking(10), config={"motion": "boxes"})  # other frame rate, same motion
    big = run(*walking(30, scale=2.0), size=(1280, 960), config={"motion": "boxes"})  # 2x resolution
    np.testing.assert_allclose(slow.stage2, ref.stage2, atol=1e-5)
    np.testing.assert_allclose(big.stage2, ref.stage2, atol=1e-5)


def test_irregular_timestamps_use_the_real_time_step():
    times = [0.0, 0.05, 0.06, 0.2, 0.21, 0.4]
    frames = [(np.array([[100 + 100 * t, 100, 40, 100], [300, 100, 40, 100]]), [1, 2]) for t in times]
    pf = run(frames, times, config={"motion": "boxes"})
    assert col(pf, "a_vx")[0] == pytest.approx(1.0, abs=1e-5)
    assert col(pf, "b_vx")[0] == pytest.approx(0.0, abs=1e-6)


def test_pair_values_side_by_side_and_approaching():
    pf = run(*walking(30), config={"motion": "boxes"})
    q = pf.stage1
    # pair (1, 2): same velocity, 60 px apart vertically, mean height 100
    assert q[0, QI["distance"]] == pytest.approx(0.6, abs=1e-5)
    assert q[0, QI["dx"]] == pytest.approx(0.0, abs=1e-5)
    assert q[0, QI["bottom_dy"]] == pytest.approx(0.6, abs=1e-5)
    assert q[0, QI["vertical_overlap"]] == pytest.approx(0.4, abs=1e-5)
    assert q[0, QI["iou"]] == pytest.approx(1600 / (8000 - 1600), abs=1e-5)
    assert q[0, QI["velocity_cosine"]] == pytest.approx(1.0, abs=1e-5)
    assert q[0, QI["relative_speed"]] == pytest.approx(0.0, abs=1e-5)
    assert q[0, QI["approach_rate"]] == pytest.approx(0.0, abs=1e-5)
    assert q[0, QI["heading_alignment"]] == pytest.approx(0.0, abs=1e-5)  # moving across the line A-B
    # pair (1, 3): head-on, closing at 1.5 heights/s along the line joining them
    assert q[1, QI["velocity_cosine"]] == pytest.approx(-1.0, abs=1e-5)
    assert q[1, QI["approach_rate"]] == pytest.approx(-1.5, abs=1e-5)
    assert q[1, QI["relative_speed"]] == pytest.approx(1.5, abs=1e-5)
    assert q[1, QI["speed_difference"]] == pytest.approx(0.5, abs=1e-5)
    assert q[1, QI["heading_alignment"]] == pytest.approx(1.0, abs=1e-5)
    assert q[1, QI["mean_speed"]] == pytest.approx(0.75, abs=1e-5)
    assert q[1, QI["mean_height"]] == pytest.approx(100 / 480, abs=1e-6)
    assert q[1, QI["mean_width"]] == pytest.approx(40 / 640, abs=1e-6)


def test_pair_block_symmetric_under_id_swap():
    frames, times = walking(30)
    swapped = [(b, [3, 2, 1]) for b, _ in frames]
    p1 = run(frames, times, config={"motion": "boxes"})
    p2 = run(swapped, times, config={"motion": "boxes"})
    # pair (1,3) in p1 is pair (1,3) in p2 with A and B exchanged
    np.testing.assert_allclose(p2.stage1[1], p1.stage1[1], atol=1e-6)
    np.testing.assert_allclose(p2.stage2[1, :FP], p1.stage2[1, FP : 2 * FP], atol=1e-6)


def test_motion_boxes_ignores_flow():
    frames, times = walking(30)
    flows = [np.full((480, 640, 2), 3.0, np.float32)] * len(times)
    a = run(frames, times, config={"motion": "boxes"})
    b = run(frames, times, config={"motion": "boxes"}, flows=flows)
    np.testing.assert_array_equal(a.stage2, b.stage2)
    assert SPEC.uses_flow({"motion": "boxes"}) is False and SPEC.uses_flow() is True


def field(h, w, ego, people=()):
    """Flow (h, w, 2) of a camera map ``ego`` (2x3, these pixels) plus own motion inside person rects."""
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
    pts = np.stack([xs.ravel(), ys.ravel()], axis=1)
    flow = displacement(ego, pts).reshape(h, w, 2)
    for (x0, y0, x1, y1), u in people:
        flow[y0:y1, x0:x1] += u
    return flow.astype(np.float32)


@pytest.mark.parametrize("method", ["median", "affine"])
def test_flow_motion_with_panning_camera_is_ego_compensated(method):
    h, w = 240, 320
    pan = np.array([[1.0, 0.0, 6.0], [0.0, 1.0, -1.0]])  # camera pans: static points move (6, -1) px/frame
    # A: box x 40..80, y 60..160 (h 100), walking +3 px/frame; B: static person
    flow = field(h, w, pan, [((40, 60, 80, 160), (3.0, 0.0))])
    boxes = np.array([[40, 60, 40, 100], [200, 60, 40, 100]])
    ex = SPEC.make_extractor({"ego_motion": method})
    ex.step(Detections.from_arrays(boxes - [6, -1, 0, 0], [1, 2]), 0.0, (w, h))
    pf = ex.step(Detections.from_arrays(boxes, [1, 2]), 0.1, (w, h), flow, 1.0)
    assert col(pf, "a_flow_valid")[0] == 1.0
    assert col(pf, "a_vx")[0] == pytest.approx(3.0 / 0.1 / 100, abs=1e-3)  # 0.3 heights/s
    assert col(pf, "b_vx")[0] == pytest.approx(0.0, abs=1e-3)
    assert col(pf, "a_vy")[0] == pytest.approx(0.0, abs=1e-3)
    # history: both boxes moved by the pan only, which the ego-motion removes
    assert col(pf, "b_hist_vx")[0] == pytest.approx(0.0, abs=1e-3)
    np.testing.assert_allclose(ex.last_ego, pan, atol=1e-3)


def test_flow_at_half_scale_gives_the_same_motion():
    h, w = 240, 320
    pan = np.array([[1.0, 0.0, 4.0], [0.0, 1.0, 0.0]])
    boxes = np.array([[40, 60, 40, 100], [200, 60, 40, 100]])
    full = field(h, w, pan, [((40, 60, 80, 160), (2.0, 1.0))])
    half_ego = pan.copy()
    half_ego[:, 2] *= 0.5
    half = field(h // 2, w // 2, half_ego, [((20, 30, 40, 80), (1.0, 0.5))])
    outs = []
    for flow, scale in ((full, 1.0), (half, 0.5)):
        ex = SPEC.make_extractor({"ego_motion": "median"})
        ex.step(Detections.from_arrays(boxes, [1, 2]), 0.0, (w, h))
        outs.append(ex.step(Detections.from_arrays(boxes, [1, 2]), 1 / 30, (w, h), flow, scale))
    assert col(outs[0], "a_vx")[0] == pytest.approx(2.0 * 30 / 100, abs=1e-3)
    np.testing.assert_allclose(outs[1].stage2, outs[0].stage2, atol=2e-3)


def test_affine_ego_motion_recovers_zoom_where_median_cannot():
    h, w = 240, 320
    s, c = 1.05, np.array([160.0, 120.0])  # forward motion: expansion about the image centre
    zoom = np.array([[s, 0, (1 - s) * c[0]], [0, s, (1 - s) * c[1]]])
    flow = field(h, w, zoom)
    boxes = np.array([[20.0, 40.0, 30.0, 80.0]])  # a static person far from the centre
    fit = estimate(flow, boxes, 1.0, "affine")
    np.testing.assert_allclose(fit, zoom, atol=1e-3)
    centre = boxes[:, :2] + boxes[:, 2:] / 2
    med = estimate(flow, boxes, 1.0, "median")
    err_affine = np.abs(displacement(fit, centre) - displacement(zoom, centre)).max()
    err_median = np.abs(displacement(med, centre) - displacement(zoom, centre)).max()
    assert err_affine < 0.01 < err_median


def test_box_only_moving_camera_sees_pan_but_flow_mode_removes_it():
    h, w = 240, 320
    pan = np.array([[1.0, 0.0, 5.0], [0.0, 1.0, 0.0]])
    frames, flows, times = [], [], []
    for k in range(6):  # two static people, camera pans 5 px/frame
        frames.append((np.array([[40.0 + 5 * k, 60, 40, 100], [200.0 + 5 * k, 60, 40, 100]]), [1, 2]))
        flows.append(field(h, w, pan) if k else None)
        times.append(k / 10)
    boxes_only = run(frames, times, size=(w, h), config={"motion": "boxes"})
    with_flow = run(frames, times, size=(w, h), flows=flows)
    assert col(boxes_only, "a_hist_vx")[0] == pytest.approx(0.5, abs=1e-5)
    assert col(with_flow, "a_hist_vx")[0] == pytest.approx(0.0, abs=1e-4)
    assert col(with_flow, "a_vx")[0] == pytest.approx(0.0, abs=1e-4)


def test_history_eviction_and_bounded_memory():
    ex = SPEC.make_extractor({"motion": "boxes", "evict_after": 3, "history": 4})
    for k in range(500):  # every 10 frames the two tracks are replaced by new ids
        base = 2 * (k // 10)
        ex.step(
            Detections.from_arrays([[10, 10, 20, 40], [50, 10, 20, 40]], [base, base + 1]), k / 30, (320, 240)
        )
    assert ex.history.live <= 4
    assert len(ex.history.ids) <= 16
    # a track that comes back after more than evict_after frames starts a fresh history
    ex = SPEC.make_extractor({"motion": "boxes", "evict_after": 2, "history": 4})
    two = lambda x: Detections.from_arrays([[x, 10, 20, 40], [200, 10, 20, 40]], [1, 2])  # noqa: E731
    for k in range(4):
        ex.step(two(10 + k), k / 30, (320, 240))
    for k in range(4, 8):
        ex.step(Detections.from_arrays([[200, 10, 20, 40]], [2]), k / 30, (320, 240))
    pf = ex.step(two(100), 8 / 30, (320, 240))
    assert col(pf, "a_history_fill")[0] == 0.0 and col(pf, "a_vx")[0] == 0.0


def test_history_warp_moves_stored_samples():
    hist = TrackHistory(3, 5)
    hist.observe(np.array([7]), np.array([[10.0, 20.0]]), np.array([50.0]), 0.0, 0)
    hist.warp(np.array([[2.0, 0.0, 1.0], [0.0, 2.0, -1.0]]))
    slot = hist.slots_of(np.array([7, 8]))
    assert slot[1] == -1
    np.testing.assert_allclose(hist.pos[slot[0], -1], [21.0, 39.0])
    assert hist.height[slot[0], -1] == pytest.approx(100.0)


def test_values_finite_and_clamped_on_garbage():
    rng = np.random.default_rng(0)
    ex = SPEC.make_extractor()
    for k in range(5):
        boxes = rng.uniform(-1e5, 1e5, (12, 4))
        boxes[0] = [np.nan, 0, 10, 10]
        boxes[1] = [10, 10, 1e-9, 1e-9]
        ids = rng.integers(0, 6, 12)
        flow = rng.normal(0, 50, (60, 80, 2)).astype(np.float32)
        pf = ex.step(Detections.from_arrays(boxes, ids), 1.0, (80, 60), flow if k else None, 1.0)  # same time
        assert np.isfinite(pf.stage2).all() and np.abs(pf.stage2).max() <= 10.0
        assert len(np.unique(pf.pairs, axis=0)) == len(pf.pairs)


def test_config_validation_and_inputs():
    with pytest.raises(InputError):
        PairedgeConfig(motion="video")
    with pytest.raises(InputError):
        PairedgeConfig(ego_motion="homography")
    with pytest.raises(InputError):
        PairedgeConfig(history=1)
    cfg = SPEC.make_config({"pool_inset": [0.1, 0.0]})
    assert cfg.pool_inset == (0.1, 0.0)
    ex = SPEC.make_extractor()
    dets = Detections.from_arrays([[0, 0, 10, 20], [5, 0, 10, 20]], [0, 1])
    with pytest.raises(InputError):
        ex.step(dets, math.nan, (64, 48))
    with pytest.raises(InputError):
        ex.step(dets, 0.0, (64, 48), np.zeros((48, 64, 3), np.float32))


def test_pool_flow_integral_equals_slicing_reference():
    from pairedge.core.features.edge import pool_flow, pool_flow_reference

    rng = np.random.default_rng(5)
    flow = rng.normal(0, 2, (120, 160, 2)).astype(np.float32)
    boxes = rng.uniform([-30, -30, 0.5, 0.5], [330, 250, 90, 150], (60, 4))  # full image 320 x 240
    ego = np.array([[1.01, -0.02, 3.0], [0.02, 1.01, -1.0]])
    fast = pool_flow(flow, boxes, 0.5, ego, 0.04)
    ref = pool_flow_reference(flow, boxes, 0.5, ego, 0.04)
    np.testing.assert_array_equal(fast.valid, ref.valid)
    assert 0 < fast.valid.sum() < len(boxes)  # some boxes fall outside the image
    np.testing.assert_allclose(fast.velocity, ref.velocity, atol=1e-6)
    np.testing.assert_allclose(fast.spread, ref.spread, atol=1e-6)


@pytest.mark.parametrize("n_boxes", [3, 8, 31, 33])
def test_flow_moments_slicing_and_integral_paths_agree(n_boxes):
    """Both exact methods of flow_moments give the same sums, whichever the cost model picks."""
    from pairedge.core.features import flowpool
    from pairedge.core.features.integral import integral, pixel_rects, rect_sums

    rng = np.random.default_rng(n_boxes)
    flow = rng.normal(0, 3, (96, 128, 2)).astype(np.float32)
    boxes = rng.uniform([-10, -10, 1, 1], [250, 180, 30, 50], (n_boxes, 4))
    rects = pixel_rects(boxes, 0.5, 128, 96)
    fx, fy = flow[:, :, 0].astype(np.float64), flow[:, :, 1].astype(np.float64)
    expected = rect_sums(integral([fx, fy, fx * fx, fy * fy]), rects)
    np.testing.assert_allclose(flowpool.flow_moments(flow, rects), expected, rtol=1e-9, atol=1e-6)


def test_pool_flow_slicing_path_equals_reference():
    from pairedge.core.features.edge import pool_flow, pool_flow_reference

    rng = np.random.default_rng(6)
    flow = rng.normal(0, 2, (240, 320, 2)).astype(np.float32)
    boxes = rng.uniform([-20, -20, 5, 10], [640, 480, 60, 120], (10, 4))  # few small boxes: slicing path
    ego = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, -1.0]])
    fast = pool_flow(flow, boxes, 0.5, ego, 1 / 30)
    ref = pool_flow_reference(flow, boxes, 0.5, ego, 1 / 30)
    np.testing.assert_array_equal(fast.valid, ref.valid)
    np.testing.assert_allclose(fast.velocity, ref.velocity, atol=1e-6)
    np.testing.assert_allclose(fast.spread, ref.spread, atol=1e-6)


def test_closest_approach_toward_and_scene_context():
    pf = run(*walking(30), config={"motion": "boxes"})
    q = pf.stage1
    # (1, 3): head-on, 1.95 heights apart, closing at 1.5 heights/s -> meet in 1.3 s, miss distance 0
    assert q[1, QI["time_to_closest"]] == pytest.approx(1.3, abs=1e-4)
    assert q[1, QI["closest_approach"]] == pytest.approx(0.0, abs=1e-4)
    assert q[1, QI["toward_max"]] == pytest.approx(1.0, abs=1e-5)
    assert q[1, QI["toward_min"]] == pytest.approx(1.0, abs=1e-5)
    # (1, 2): same velocity: no closest approach ahead; nobody moves toward the other
    assert q[0, QI["time_to_closest"]] == 0.0
    assert q[0, QI["closest_approach"]] == pytest.approx(0.6, abs=1e-5)
    assert q[0, QI["toward_max"]] == pytest.approx(0.0, abs=1e-5)
    # scene: 3 people, speeds 1, 1, 0.5 heights/s, all moving; crowd moves right at 0.5 heights/s
    np.testing.assert_allclose(q[:, QI["scene_count"]], 0.3, atol=1e-6)
    np.testing.assert_allclose(q[:, QI["scene_median_speed"]], 1.0, atol=1e-5)
    np.testing.assert_allclose(q[:, QI["scene_moving_fraction"]], 1.0)
    assert q[0, QI["crowd_alignment"]] == pytest.approx(1.0, abs=1e-5)
    # neighbours of the midpoint of (1, 3) within 1.5 heights: person 2 only
    assert q[1, QI["near_count"]] == 1.0 and q[0, QI["near_count"]] == 0.0


def test_inline_count_sees_a_queue():
    boxes = np.array([[100.0 + 50 * k, 100, 40, 100] for k in range(4)])  # a row, 0.5 heights apart
    pf = run([(boxes, [1, 2, 3, 4])] * 2, [0.0, 0.1], config={"motion": "boxes"})
    q = dict(zip(map(tuple, pf.pairs.tolist()), pf.stage1[:, QI["inline_count"]], strict=True))
    assert q[(1, 2)] == 2.0 and q[(3, 4)] == 2.0  # the two others continue the line beyond the pair
    assert q[(1, 4)] == 0.0  # the others lie between A and B
    assert q[(2, 3)] == 2.0


def test_neighbour_counts_blockwise_equal_one_block(monkeypatch):
    from pairedge.core.features import neighbours

    rng = np.random.default_rng(2)
    boxes = np.column_stack(
        [rng.uniform(0, 600, 40), rng.uniform(0, 300, 40), np.full(40, 30.0), np.full(40, 80.0)]
    )
    ids = np.arange(40)
    frames = [(boxes + [[2.0 * k, 0, 0, 0]], ids) for k in range(3)]
    whole = run(frames, [0.0, 0.1, 0.2], config={"motion": "boxes"})
    monkeypatch.setattr(neighbours, "CHUNK", 7)
    blocks = run(frames, [0.0, 0.1, 0.2], config={"motion": "boxes"})
    np.testing.assert_array_equal(whole.stage1, blocks.stage1)
    assert whole.stage1[:, QI["near_count"]].max() > 0


def test_neighbour_counts_match_their_definition():
    from pairedge.core.features import pairblock

    rng = np.random.default_rng(4)
    n = 30
    centres = rng.uniform([0, 0], [640, 480], (n, 2))
    heights = rng.uniform(40, 160, n)
    ia, ib = np.triu_indices(n, k=1)
    delta = centres[ib] - centres[ia]
    mean_h = (heights[ia] + heights[ib]) / 2
    scene = pairblock.Scene(np.zeros(3), np.zeros(2), centres)
    near, inline = pairblock.neighbours(centres[ia], delta, mean_h, scene, None)
    for k, (i, j) in enumerate(zip(ia, ib, strict=True)):
        mid, u = (centres[i] + centres[j]) / 2, delta[k] / np.linalg.norm(delta[k])
        half = np.linalg.norm(delta[k]) / 2 / mean_h[k]
        exp_near = exp_inline = 0
        for o in set(range(n)) - {i, j}:
            rel = (centres[o] - mid) / mean_h[k]
            exp_near += np.linalg.norm(rel) < pairblock.NEAR
            along, across = abs(rel @ u), abs(rel[0] * u[1] - rel[1] * u[0])
            exp_inline += across < pairblock.INLINE and half + 0.25 < along < half + 2.0
        assert (near[k], inline[k]) == (exp_near, exp_inline)
    assert near.max() > 0 and inline.max() > 0


def test_scene_median_equals_numpy_median():
    from pairedge.core.features.pairblock import _median

    rng = np.random.default_rng(2)
    for n in (1, 2, 3, 10, 11):
        x = rng.normal(size=n)
        assert _median(x) == float(np.median(x))
    assert np.isnan(_median(np.array([1.0, np.nan, 0.5])))


def test_pair_radius_keeps_exactly_the_near_pairs_with_unchanged_features():
    """A pair radius drops the far pairs; every kept pair's features equal those of the unpruned run (they
    read the whole frame: scene context and neighbour counts include everyone)."""
    from pairedge.core.features import get_spec
    from pairedge.core.features.edge import within_radius
    from pairedge.core.types import Detections

    rng = np.random.default_rng(3)
    n = 12
    boxes = np.column_stack([rng.uniform(0, 900, (n, 2)), rng.uniform(20, 40, n), rng.uniform(60, 120, n)])
    full_ex, near_ex = get_spec("pairedge").make_extractor(), get_spec("pairedge").make_extractor()
    near_ex.pair_radius = 2.5
    for t in range(3):
        moved = boxes.copy()
        moved[:, :2] += t * 3.0
        d = Detections.from_arrays(moved, np.arange(1, n + 1))
        full = full_ex.step(d, t / 10, (1000, 1000))
        near = near_ex.step(d, t / 10, (1000, 1000))
    boxes = np.asarray(d.boxes, np.float64)
    c = boxes[:, :2] + boxes[:, 2:] / 2
    ia, ib = full.index[:, 0], full.index[:, 1]
    dist = np.hypot(*(c[ib] - c[ia]).T) / ((boxes[ia, 3] + boxes[ib, 3]) / 2)
    keep = dist <= 2.5
    assert 0 < keep.sum() < len(keep)
    np.testing.assert_array_equal(near.pairs, full.pairs[keep])
    np.testing.assert_array_equal(near.stage1, full.stage1[keep])
    np.testing.assert_array_equal(near.stage2, full.stage2[keep])
    ka, kb = within_radius(boxes, ia, ib, 2.5)
    np.testing.assert_array_equal(np.stack([ka, kb], 1), full.index[keep])


def test_the_largest_finite_pair_radius_keeps_every_pair_without_a_warning() -> None:
    """``--pair-radius 1e308`` is valid: every pair kept, no overflow warning (issue 40, case 9)."""
    import warnings

    from pairedge.core.features.edge import within_radius

    boxes = np.array([[0, 0, 10, 30], [5000, 0, 10, 30], [0, 9000, 1e-9, 1e-9]], np.float64)
    ia, ib = np.array([0, 0, 1]), np.array([1, 2, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ka, kb = within_radius(boxes, ia, ib, 1e308)
        assert within_radius(boxes, ia, ib, 1e-300)[0].size == 0
    np.testing.assert_array_equal(ka, ia) and np.testing.assert_array_equal(kb, ib)
