"""JRDB social / activity JSON reader / writer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import FormatError
from pairedge.core.io.jrdb import read_jrdb, write_jrdb
from pairedge.core.labels import PAPER3

SAMPLE = {
    "labels": {
        "000002.jpg": [
            {
                "action_label": {"sitting": 1, "talking to someone": 1},
                "attributes": {
                    "area": 42701.0,
                    "interpolated": False,
                    "no_eval": False,
                    "occlusion": "Fully_visible",
                    "truncated": "false",
                },
                "box": [2962, 63, 299, 397],
                "file_id": "000002.jpg",
                "label_id": "pedestrian:6",
                "social_activity": {"sitting": 1.0},
                "social_group": {"cluster_ID": 7, "cluster_stat": 1},
                "demographics_info": [{"gender": {"Female": "1"}}],
                "H-interaction": [
                    {
                        "pair": "pedestrian:7",
                        "box_pair": [3359, 106, 236, 366],
                        "inter_labels": {"sitting together": 1},
                    }
                ],
            },
            {
                "label_id": "pedestrian:7",
                "box": [3359, 106, 236, 366],
                "social_group": {"cluster_ID": 7, "cluster_stat": 1},
                "H-interaction": [
                    {"pair": "pedestrian:6", "inter_labels": {"sitting together": 2, "conversation": 1}}
                ],
            },
            {"label_id": "pedestrian:9", "box": [10, 20, 30, 40], "social_group": {"cluster_ID": 8}},
        ],
        "000000.jpg": [],
    }
}


def test_reads_the_jrdb_structure(tmp_path: Path) -> None:
    path = tmp_path / "scene.json"
    path.write_text(json.dumps(SAMPLE))
    frames = read_jrdb(path)
    assert [f.frame for f in frames] == [0, 2]
    f = frames[1]
    assert f.people.track_ids.tolist() == [6, 7, 9]
    assert f.people.boxes[0].tolist() == [2962, 63, 299, 397]
    assert f.occlusion == ("Fully_visible", "", "")
    assert f.actions[0] == {"sitting": 1.0, "talking to someone": 1.0}
    assert f.group_ids.tolist() == [7, 7, 8]
    assert {k: v.tolist() for k, v in f.groups().items()} == {7: [6, 7]}
    # listed on both people: one unordered pair, levels merged (max), extra labels kept
    assert f.pairs.tolist() == [[6, 7]]
    assert f.pair_labels == ({"sitting together": 2.0, "conversation": 1.0},)
    assert f.primary_labels() == ["sitting together"]
    assert f.label_ids(PAPER3).tolist() == [2]


def test_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "a.json"
    src.write_text(json.dumps(SAMPLE))
    frames = read_jrdb(src)
    out = tmp_path / "b.json"
    write_jrdb(out, frames)
    again = read_jrdb(out)
    for a, b in zip(frames, again, strict=True):
        assert (a.frame, a.image, a.occlusion, a.actions, a.social_activity) == (
            b.frame,
            b.image,
            b.occlusion,
            b.actions,
            b.social_activity,
        )
        np.testing.assert_array_equal(a.people.boxes, b.people.boxes)
        np.testing.assert_array_equal(a.people.track_ids, b.people.track_ids)
        np.testing.assert_array_equal(a.group_ids, b.group_ids)
        np.testing.assert_array_equal(a.pairs, b.pairs)
        assert a.pair_labels == b.pair_labels
        assert a.attributes == b.attributes


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda d: d["labels"]["000002.jpg"][0].update(label_id="person"), "label id like"),
        (lambda d: d["labels"]["000002.jpg"][0].update(box=[1, 2, 3]), "box"),
        (lambda d: d["labels"]["000002.jpg"][0].update(box=[1, 2, -3, 4]), "w, h >= 0"),
        (lambda d: d["labels"]["000002.jpg"][1].update(label_id="pedestrian:6"), "appears twice"),
        (lambda d: d["labels"]["000002.jpg"][0]["H-interaction"][0].update(pair="pedestrian:6"), "itself"),
        (lambda d: d["labels"]["000002.jpg"][0].update(action_label={"walking": "often"}), "numeric level"),
        (lambda d: d["labels"].update({"cover.jpg": []}), "frame number"),
        (lambda d: d.pop("labels"), '"labels"'),
    ],
)
def test_malformed_files_raise_format_error(tmp_path: Path, mutate, problem: str) -> None:  # noqa: ANN001
    data = json.loads(json.dumps(SAMPLE))
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(FormatError, match=problem):
        read_jrdb(path)


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"labels": {\n "0.jpg": [}')
    with pytest.raises(FormatError, match=r"record line 2: invalid JSON"):
        read_jrdb(path)
