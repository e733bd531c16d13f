"""JSON Lines and annotated-video writers of pipeline results."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.measure.metrics.pairwise.files import read_pairwise_file
from pairedge.runtime import Diagnostics, FrameResult, Group
from pairedge.runtime.runner.output import (
    AnnotatedVideoWriter,
    JsonlWriter,
    annotate,
    label_colour,
    track_colour,
)

LABELS = ("walking_together", "standing_together", "sitting_together")


def _result(frame: int = 0) -> FrameResult:
    return FrameResult(
        frame_index=frame,
        timestamp=frame / 10,
        track_ids=np.array([3, 7, 9], np.int64),
        boxes=np.array([[10, 10, 20, 50], [60, 12, 20, 50], [150, 60, 30, 60]], np.float32),
        pairs=np.array([[3, 7], [3, 9], [7, 9]], np.int64),
        p_interact=np.array([0.9, 0.2, 0.1], np.float32),
        interacting=np.array([True, False, False]),
        label_ids=np.array([1, -1, -1], np.int64),
        probs=np.array([[0.1, 0.8, 0.1], [0, 0, 0], [0, 0, 0]], np.float32),
        labels=LABELS,
        groups=(Group((3, 7), "standing_together", 1, 1.0),),
        timings_ms={"flow": 1.0, "total": 2.0},
        diagnostics=Diagnostics(dropped={"huge box": 1}),
    )


def test_jsonl_schema_is_read_by_the_pairwise_scorer(tmp_path: Path) -> None:
    path = tmp_path / "out" / "pred.jsonl"
    with JsonlWriter(path, LABELS, header={"model": "toy"}) as writer:
        writer.write(_result(0))
        writer.write(_result(1))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0] == {"labels": list(LABELS), "model": "toy"}
    rec = lines[1]
    assert rec["frame"] == 0 and rec["interactions"] == [
        {"ids": [3, 7], "label": "standing_together", "p_interact": 0.9, "probs": [0.1, 0.8, 0.1]}
    ]
    assert rec["groups"] == [{"members": [3, 7], "activity": "standing_together", "vote_share": 1.0}]
    assert rec["diagnostics"] == {"dropped_detections": {"huge box": 1}}
    parsed = read_pairwise_file(path, LABELS)
    assert parsed.pairs.frame.tolist() == [0, 1] and parsed.pairs.label.tolist() == [1, 1]
    assert parsed.groups is not None


def test_group_without_activity_is_written_as_null(tmp_path: Path) -> None:
    import dataclasses

    result = dataclasses.replace(_result(), groups=(Group((3, 7), None, -1, 0.0),))
    with JsonlWriter(tmp_path / "p.jsonl", LABELS) as writer:
        writer.write(result)
    rec = json.loads((tmp_path / "p.jsonl").read_text().splitlines()[1])
    assert rec["groups"][0]["activity"] is None
    assert read_pairwise_file(tmp_path / "p.jsonl", LABELS).groups is not None


def test_jsonl_writer_closed(tmp_path: Path) -> None:
    writer = JsonlWriter(tmp_path / "a.jsonl")
    writer.close()
    with pytest.raises(InputError, match="closed"):
        writer.write(_result())
    assert (tmp_path / "a.jsonl").read_text() == ""


def test_annotate_draws_boxes_links_and_hulls() -> None:
    canvas = np.zeros((200, 240, 3), np.uint8)
    annotate(canvas, _result())
    assert tuple(canvas[35, 10]) == track_colour(3)  # left edge of box 3
    link = canvas[36:37, 40:60].reshape(-1, 3)  # the centre line between 3 and 7
    assert any(tuple(px) == label_colour(1, LABELS) for px in link)
    assert canvas[70:130, 0:140].sum() == 0  # nothing drawn far from everything (the legend is below)


@pytest.mark.parametrize("suffix", [".mp4", ".avi"])
def test_video_writer_round_trip(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"v{suffix}"
    with AnnotatedVideoWriter(path, fps=10) as video:
        for k in range(4):
            image = np.full((120, 160, 3), 30 * k, np.uint8)
            video.write(image if k != 2 else image[:, :, 0], _result(k))  # gray frames are fine too
        video.write(None, _result(4))
    cap = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        frames.append(frame)
    assert len(frames) == 5 and frames[0].shape == (120, 160, 3)
    assert video.frames == 5


def test_video_writer_rejects_unknown_containers(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=".mp4"):
        AnnotatedVideoWriter(tmp_path / "v.gif")


def test_coasted_people_get_a_thin_frame_and_a_json_flag() -> None:
    from dataclasses import replace

    result = replace(_result(), coasted=np.array([False, False, True]))
    canvas = np.zeros((200, 240, 3), np.uint8)
    annotate(canvas, result)
    assert tuple(canvas[90, 150]) == track_colour(9)  # left edge of box 9 (x 150), one pixel wide
    assert tuple(canvas[90, 151]) != track_colour(9)
    assert tuple(canvas[35, 11]) == track_colour(3)  # a detected person's frame is two pixels wide
    tracks = result.to_json_dict()["tracks"]
    assert [t.get("coasted", False) for t in tracks] == [False, False, True]
    assert "coasted" not in json.dumps(_result().to_json_dict())  # nothing coasted: no key at all
