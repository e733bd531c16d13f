"""bench_camera: its run plan, its link breakdown on hand-made runs, bad input in one line, a short real
run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_camera import link_breakdown, main, plan  # noqa: E402


def test_plan() -> None:
    runs = plan("bundled,det", "iou,botsort", "1,2")
    assert runs == [
        ("bundled", "iou", False),
        ("bundled", "iou", True),
        ("bundled", "botsort", True),
        ("det", "iou", True),
    ]
    for bad in (("x", "iou", "1"), ("bundled", "iou", "3")):
        with pytest.raises(SystemExit, match="^error: "):
            plan(*bad)


def _write(path: Path, frames: list[tuple[list, list]]) -> Path:
    with path.open("w") as fh:
        fh.write(json.dumps({"labels": ["walking_together", "standing_together", "sitting_together"]}) + "\n")
        for f, (tracks, links) in enumerate(frames):
            fh.write(
                json.dumps(
                    {
                        "frame": f,
                        "tracks": [{"id": i, "box": b} for i, b in tracks],
                        "interactions": [{"ids": list(p), "label": "walking_together"} for p in links],
                    }
                )
                + "\n"
            )
    return path


def test_link_breakdown_counts_each_cause(tmp_path: Path) -> None:
    gt = tmp_path / "gt.txt"
    people = {1: [0, 0, 40, 100], 2: [100, 0, 40, 100], 3: [300, 0, 40, 100]}
    gt.write_text(
        "".join(
            f"{f + 1},{i},{b[0]},{b[1]},{b[2]},{b[3]},1,-1,-1,-1\n"
            for f in range(3)
            for i, b in people.items()
        )
    )
    gold = _write(
        tmp_path / "gold.jsonl", [(list(people.items()), [(1, 2)])] * 2 + [(list(people.items()), [])]
    )
    # the run's ids 7, 8, 9 on people 1, 2, 3; frame 1: person 2's box is off (matches nobody)
    run = _write(
        tmp_path / "run.jsonl",
        [
            ([(7, people[1]), (8, people[2]), (9, people[3])], [(7, 8)]),
            ([(7, people[1]), (8, [200, 200, 40, 100]), (9, people[3])], [(7, 8), (7, 9)]),
            ([(7, people[1]), (8, people[2]), (9, people[3])], [(7, 8)]),
        ],
    )
    b = link_breakdown(run, gold, gt, 0, None)
    assert b["correct"] == 1 and b["a box matching no true person"] == 1
    assert b["never linked by the gt.txt run"] == 1  # (1, 3)
    assert b["early or late (<= 10 frames)"] == 1  # (1, 2) in frame 2, the gt run's last link in frame 1
    assert b["missed: a person not reported"] == 1  # frame 1: person 2 has no matching box


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    for args in ([str(tmp_path)], [str(tmp_path), "--frames", "1"]):
        with pytest.raises(SystemExit) as exc:
            main([*args, "--out", str(tmp_path / "out")])
        assert str(exc.value.code).startswith("error: ") and "\n" not in str(exc.value.code)


@pytest.mark.slow
@pytest.mark.data
def test_a_short_real_run(tmp_path: Path, shared_data: Path) -> None:
    out = tmp_path / "out"
    assert (
        main(
            [
                str(shared_data / "pets09_s2l1"),
                "--sources",
                "bundled,gt",
                "--trackers",
                "iou",
                "--threads",
                "2",
                "--frames",
                "30",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    res = json.loads((out / "bench_camera.json").read_text())
    gt_run = next(r for r in res["runs"] if r["source"] == "gt")
    assert (
        gt_run["scores"]["whole video"]["pairs_vs_gt_run"]["pair_f1"] == 1.0
    )  # the reference against itself
    bundled = next(r for r in res["runs"] if r["source"] == "bundled")
    assert bundled["frames"] == 30 and bundled["detector"]["layout"] == "yolox-raw"
    assert bundled["scores"]["whole video"]["tracking"]["idf1"] > 0.4 and res["motmetrics_agrees"]
    by_iou = bundled["scores"]["whole video"]["pairs_vs_gt_run_by_match_iou"]
    headline = bundled["scores"]["whole video"]["pairs_vs_gt_run"]
    assert by_iou["0.5"]["pair_f1"] == headline["pair_f1"]  # the diagnostic's 0.5 row is the headline
    assert set(by_iou) == {"0.5", "0.4", "0.3"}
    assert "by box-matching IoU" in (out / "bench_camera.md").read_text()
