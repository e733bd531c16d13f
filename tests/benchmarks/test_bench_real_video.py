"""The ground-plane "together" definition and the detection-to-truth matching of bench_real_video."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_real_video import (  # noqa: E402
    Together,
    delivery_bound,
    detector_coverage,
    ground_speeds,
    label_stability,
    match_to_truth,
    motion_agreement,
    motion_class,
    motion_funnel,
    perfect_stage1,
    share_gap,
    together_keys_by_motion,
    together_matrix,
)
from pairedge.core.types import Detections  # noqa: E402


def _tracks(frames: int = 40) -> np.ndarray:
    """4 people at 10 fps: 0 and 1 walk side by side, 2 stands still near 3 (still), 2 and 0 cross."""
    t = np.arange(frames) / 10.0
    pos = np.full((frames, 4, 2), np.nan)
    pos[:, 0] = np.stack([1.2 * t, np.zeros_like(t)], 1)
    pos[:, 1] = np.stack([1.2 * t, np.full_like(t, 0.8)], 1)
    pos[:, 2] = [2.0, -0.5]
    pos[:, 3] = [2.0, -1.5]
    return pos


def test_together_side_by_side_and_still_pairs_not_crossing() -> None:
    together = together_matrix(_tracks(), 10.0)
    mid = 20
    assert together[mid, 0, 1] and together[mid, 1, 0]
    assert together[mid, 2, 3]
    # person 0 walks past the still person 2 (0.5 m away at t = 1.7 s): near, but not moving alike
    assert not together[17, 0, 2]
    assert not together[mid].diagonal().any()


def test_together_needs_enough_common_frames_and_nearness() -> None:
    pos = _tracks()
    pos[:, 1, 1] = 3.0  # 3 m apart: not near
    assert not together_matrix(pos, 10.0)[20, 0, 1]
    pos = _tracks()
    pos[np.arange(40) != 20, 3] = np.nan  # person 3 present in one frame only
    assert not together_matrix(pos, 10.0, Together(min_common=5))[20, 2, 3]


def test_match_to_truth_by_iou() -> None:
    truth = np.array([[0, 0, 10, 20], [100, 0, 10, 20]], np.float32)
    ids = np.array([7, 9])
    boxes = np.array([[101, 1, 10, 20], [50, 50, 10, 20], [0, 0, 10, 19]], np.float32)
    assert match_to_truth(boxes, truth, ids).tolist() == [9, -1, 7]
    assert match_to_truth(boxes[:0], truth, ids).tolist() == []


def test_detector_coverage_by_hand(tmp_path: Path) -> None:
    # people 1 and 2 together in all 6 frames; the detector finds both / 1 / none / both / 2 / both
    boxes = {1: (0, 0, 10, 20), 2: (100, 0, 10, 20)}
    found = [(1, 2), (1,), (), (1, 2), (2,), (1, 2)]
    lines = [
        f"{f + 1},-1,{','.join(map(str, boxes[p]))},0.9,-1,-1,-1" for f, ps in enumerate(found) for p in ps
    ]
    lines.append("6,-1,300,300,10,20,0.9,-1,-1,-1")  # a false positive matches nobody
    det = tmp_path / "det.txt"
    det.write_text("\n".join(lines) + "\n")
    truth = {
        f + 1: Detections.from_arrays(np.array([boxes[1], boxes[2]], np.float32), np.array([1, 2]))
        for f in range(6)
    }
    together = np.zeros((6, 3, 3), bool)
    together[:, 1, 2] = together[:, 2, 1] = True
    cov = detector_coverage(det, truth, together, lags=(0, 1, 3))
    # K=0: frames 0, 3, 5; K=1 adds 1 (2 seen in 0) and 4 (1 seen in 3); K=3 adds 2 (2 seen in 0)
    assert cov == pytest.approx({"K=0": 3 / 6, "K=1": 5 / 6, "K=3": 1.0})
    # per motion class: person 1 walks, 2 stands in frames 0-2 (walking pair? no: in between), both stand 3-5
    speeds = np.zeros((6, 3))
    speeds[:3, 1] = 1.0
    by = detector_coverage(det, truth, together, lags=(0, 1), speeds=speeds)["by_motion"]
    # in between: frames 0, 1, 2 (found both in 0 only at K=0; 1 by K=1); standing: frames 3, 4, 5
    assert by["between"] == pytest.approx({"K=0": 1 / 3, "K=1": 2 / 3})
    assert by["standing"] == pytest.approx({"K=0": 2 / 3, "K=1": 1.0})
    assert by["walking"] == {"K=0": None, "K=1": None}


def test_label_stability_compares_only_pairs_both_runs_link() -> None:
    labels = ["walking_together", "standing_together", "sitting_together"]
    gt = {
        (0, 1, 2): "walking_together",
        (1, 1, 2): "walking_together",
        (1, 3, 4): "standing_together",
        (2, 3, 4): "standing_together",
    }
    # det misses frame 2's pair and links one of its own; of the 3 common pair-frames it labels 2 alike
    det = {
        (0, 1, 2): "walking_together",
        (1, 1, 2): "standing_together",
        (1, 3, 4): "standing_together",
        (5, 6, 7): "sitting_together",
    }
    st = label_stability(gt, det, labels)
    assert st["common_pair_frames"] == 3
    assert st["same_label"] == pytest.approx(2 / 3)
    assert st["shares"]["walking_together"] == pytest.approx([2 / 3, 1 / 3])
    assert st["shares"]["standing_together"] == pytest.approx([1 / 3, 2 / 3])
    assert st["shares"]["sitting_together"] == [0.0, 0.0]
    assert st["max_share_gap"] == pytest.approx(1 / 3)
    empty = label_stability(gt, {}, labels)
    assert empty["common_pair_frames"] == 0 and empty["same_label"] is None and empty["max_share_gap"] is None


def test_motion_funnel_and_the_share_gap_the_boxes_alone_cause() -> None:
    # 4 people, 10 frames: 0-1 walk together (frames 0-9), 2-3 stand together (frames 0-9)
    together = np.zeros((10, 4, 4), bool)
    together[:, 0, 1] = together[:, 1, 0] = together[:, 2, 3] = together[:, 3, 2] = True
    speeds = np.zeros((10, 4))
    speeds[:, :2] = 1.2
    speeds[9, 0] = np.nan  # unknown speed: in between
    keys = together_keys_by_motion(together, speeds, Together())
    assert [len(keys[c]) for c in ("walking", "standing", "between")] == [9, 10, 1]
    # a box source that delivers the walkers in frames 0-8 and the standers in frames 0-1 only, links half
    delivered = {(f, 0, 1) for f in range(9)} | {(0, 2, 3), (1, 2, 3)}
    linked = {(f, 0, 1) for f in range(0, 9, 2)} | {(0, 2, 3)}
    funnel = motion_funnel(together, speeds, Together(), delivered, linked)
    assert funnel["walking"] == {"together": 9, "delivered": 9, "linked": 5}
    assert funnel["standing"] == {"together": 10, "delivered": 2, "linked": 1}
    assert funnel["between"] == {"together": 1, "delivered": 0, "linked": 0}
    assert delivery_bound(funnel) == pytest.approx(9 / 11)
    everything = motion_funnel(together, speeds, Together(), delivered | set(keys["standing"]), linked)
    assert delivery_bound(everything) == pytest.approx(9 / 19)
    nothing = motion_funnel(together, speeds, Together(), set(), set())
    assert delivery_bound(nothing) is None
    gt = {"labels": {"walking_together": {"share": 0.5}}, "by_motion": everything}
    det = {"labels": {"walking_together": {"share": 0.8}}, "by_motion": funnel}
    g = share_gap(gt, det)
    assert g["walking_share"] == [0.5, 0.8] and g["gap"] == pytest.approx(0.3)
    assert g["bound_gap"] == pytest.approx(9 / 11 - 9 / 19)
    assert share_gap(gt, {"labels": {}})["bound_gap"] is None


def test_perfect_stage1_scores_each_source_on_what_it_delivered() -> None:
    # gt delivered 4 together pair-frames (3 labelled walking), det 2 (both walking); one of gt's is judged
    # out
    gt = {
        (0, 0, 1): "walking_together",
        (1, 0, 1): "walking_together",
        (0, 2, 3): "standing_together",
        (2, 0, 1): "walking_together",
    }
    det = {(0, 0, 1): "walking_together", (1, 0, 1): "walking_together"}
    judged = {(0, 0, 1), (1, 0, 1), (0, 2, 3)}
    got = perfect_stage1(gt, det, judged)
    assert got["all"] == {"pair_frames": [4, 2], "walking_share": [0.75, 1.0], "gap": pytest.approx(0.25)}
    assert got["judged"]["pair_frames"] == [3, 2]
    assert got["judged"]["walking_share"] == [pytest.approx(2 / 3), 1.0]
    assert got["judged"]["gap"] == pytest.approx(1 / 3)
    assert set(perfect_stage1(gt, det)) == {"all"}
    assert perfect_stage1(gt, {})["all"] == {
        "pair_frames": [4, 0],
        "walking_share": [0.75, None],
        "gap": None,
    }


def test_ground_speed_and_walking_vs_standing() -> None:
    fps, frames = 10.0, 40
    pos = np.full((frames, 3, 2), np.nan)
    t = np.arange(frames) / fps
    pos[:, 1] = np.column_stack([1.2 * t, np.zeros(frames)])  # walks at 1.2 m/s
    pos[:, 2] = np.column_stack([np.full(frames, 5.0), 0.1 * t])  # sways at 0.1 m/s
    pos[30:, 2] = np.nan  # leaves
    v = ground_speeds(pos, fps, window=10)
    assert np.allclose(v[:, 1], 1.2) and np.allclose(v[:28, 2], 0.1) and np.isnan(v[30:, 2]).all()
    assert np.isnan(v[:, 0]).all()
    rule = Together()
    assert motion_class(1.2, 0.9, rule) == "walking" and motion_class(0.1, 0.2, rule) == "standing"
    assert (
        motion_class(1.2, 0.1, rule) == ""
        and motion_class(0.4, 0.4, rule) == ""
        and motion_class(np.nan, 1, rule) == ""
    )
    rows = [
        (0, "walking_together", 0.4, 0.8, True, "walking"),
        (1, "standing_together", 0.4, 0.8, True, "walking"),
        (2, "standing_together", 0.4, 0.8, True, "standing"),
        (3, "sitting_together", 0.4, 0.8, True, "standing"),
        (4, "walking_together", 0.4, 0.8, True, ""),
        (5, "walking_together", 0.4, 0.8, False, ""),
    ]
    got = motion_agreement(rows)
    assert got["judged"] == 4 and got["agreement"] == 0.5 and got["together_linked"] == 5
    assert got["confusion"] == {
        "walking": {"walking_together": 1, "standing_together": 1},
        "standing": {"standing_together": 1, "sitting_together": 1},
    }


@pytest.mark.data
@pytest.mark.slow
def test_pets_run_few_frames(shared_data: Path, tmp_path: Path) -> None:
    import bench_real_video as b

    pets = shared_data / "pets09_s2l1"
    if not (pets / "vtest.avi").is_file():
        pytest.skip("PETS S2.L1 not present")
    assert b.main([str(pets), "--out", str(tmp_path), "--runs", "gt"]) == 0
    text = (tmp_path / "bench_real_video.md").read_text()
    assert "precision" in text and "**Walking vs standing**" in text


def test_bad_runs_and_data_are_one_line(tmp_path: Path) -> None:
    import bench_real_video as b

    with pytest.raises(SystemExit) as exc:
        b.main([str(tmp_path), "--runs", "gt,foo", "--out", str(tmp_path)])
    assert exc.value.code == 2  # a usage error, before any work
    (tmp_path / "vtest.avi").write_bytes(b"")  # a video file but no mot15 ground truth beside it
    with pytest.raises(SystemExit) as exc:
        b.main([str(tmp_path), "--out", str(tmp_path / "out")])
    assert str(exc.value).startswith("error: ") and "gt.txt" in str(exc.value)
    assert not (tmp_path / "out").exists()
