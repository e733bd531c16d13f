"""bench_tracker's scoring of linked pairs and coasted boxes against the simulator's truth (hand-made
frames)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from pairedge.core.labels import SIM7
from pairedge.core.types import Detections

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_tracker import new_counts, score_frame, scored  # noqa: E402

WALK, NONE = SIM7.classes.index("walking_together"), SIM7.classes.index("no_interaction")


def _frame() -> SimpleNamespace:
    """Truth: people 7, 8, 9; (7, 8) together, (7, 9) and (8, 9) not."""
    boxes = np.array([[0, 0, 40, 100], [50, 0, 40, 100], [300, 0, 40, 100]], np.float32)
    return SimpleNamespace(
        truth=Detections.from_arrays(boxes, [7, 8, 9]),
        pairs=np.array([[7, 8], [7, 9], [8, 9]]),
        pair_labels=np.array([WALK, NONE, NONE]),
    )


def _result(
    boxes: list[list[float]], ids: list[int], pairs: list[list[int]], labels: list[int], coasted: list[bool]
) -> SimpleNamespace:
    return SimpleNamespace(
        boxes=np.array(boxes, np.float32),
        track_ids=np.array(ids),
        pairs=np.array(pairs).reshape(-1, 2),
        label_ids=np.array(labels),
        coasted_mask=np.array(coasted, bool),
    )


def test_links_are_judged_through_box_matching() -> None:
    counts = new_counts()
    # tracker ids 1, 2, 3 on people 7, 8 and a box on nobody; links (1, 2) right, (1, 3) wrong, (2, 3)
    # unlinked
    r = _result(
        [[1, 0, 40, 100], [51, 0, 40, 100], [600, 0, 40, 100]],
        [1, 2, 3],
        [[1, 2], [1, 3], [2, 3]],
        [0, 0, -1],
        [False, False, True],
    )
    score_frame(r, _frame(), counts)
    assert (counts["tp"], counts["fp"], counts["fn"]) == (1, 1, 0)
    assert (counts["coasted"], counts["coasted_on_a_person"]) == (1, 0)
    s = scored(counts)
    assert s["precision"] == 0.5 and s["recall"] == 1.0 and abs(s["f1"] - 2 / 3) < 1e-12
    assert s["coasted_precision"] == 0.0


def test_a_missed_person_costs_recall() -> None:
    counts = new_counts()
    r = _result([[1, 0, 40, 100]], [1], [], [], [False])  # person 8 not detected: (7, 8) cannot be linked
    score_frame(r, _frame(), counts)
    assert (counts["tp"], counts["fp"], counts["fn"]) == (0, 0, 1)
    assert scored(counts)["coasted_precision"] is None


def test_bad_inputs_are_refused_in_one_line_before_any_work(tmp_path: Path, capsys) -> None:
    import pytest
    from bench_tracker import main

    for args in (
        ["--coast-grid", "x"],
        ["--coast-grid", "99"],
        ["--nms-grid", "2"],
        ["--frames", "0"],
        ["--choose-seeds", "zz"],
        ["--model", str(tmp_path / "[bold]none")],
    ):
        with pytest.raises(SystemExit) as exc:
            main([*args, "--out", str(tmp_path / "out")])
        message = str(exc.value.code)
        assert message.startswith("error: ") and "\n" not in message
    assert not (tmp_path / "out" / "bench_tracker.json").exists()
