"""Dataset builders: simulator scenes and Collective Activity tracks -> feature rows; SOURCE parsing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.core.features import get_spec
from pairedge.core.labels import CAD8, PAPER3, SIM7, STAGE1
from pairedge.core.seeds import parse_seeds
from pairedge.export.datasets.cad import cad_features
from pairedge.export.datasets.sim import SimDataset, match_labels, sim_features
from pairedge.export.datasets.training_data import load_source, parse_sim_source


def test_match_labels_by_track_ids() -> None:
    truth = np.array([[1, 2], [1, 5], [3, 4]])
    labels = np.array([0, 6, 2])
    pairs = np.array([[3, 4], [1, 2], [2, 9], [100000, 100001]])
    assert match_labels(pairs, truth, labels).tolist() == [2, 0, -1, -1]
    assert match_labels(np.zeros((0, 2), np.int64), truth, labels).shape == (0,)


def test_parse_sources() -> None:
    assert parse_seeds("0-3,10") == (0, 1, 2, 3, 10)
    ds = parse_sim_source("sim:static+moving:seeds=4-5:frames=50:stride=2:boxes=truth", stage=2)
    assert (ds.presets, ds.seeds, ds.frames, ds.stride, ds.boxes, ds.task) == (
        ("static", "moving"),
        (4, 5),
        50,
        2,
        "truth",
        "paper3",
    )
    assert parse_sim_source("sim:static", stage=1).task == "stage1"
    assert parse_sim_source("sim:static", stage=2, labels="sim7").task == "sim7"
    with pytest.raises(InputError, match="options"):
        parse_sim_source("sim:static:color=red", stage=2)
    with pytest.raises(InputError, match="seeds"):
        parse_seeds("a-b")
    with pytest.raises(InputError, match="unknown simulator preset"):
        load_source("sim:mars", spec="pairedge", stage=2)


@pytest.mark.parametrize("spec", ["pairedge", "liang2026"])
def test_sim_features_rows_and_tasks(spec: str) -> None:
    ds = SimDataset(presets=("static",), seeds=(0,), frames=30, stride=5, task="sim7")
    full = sim_features(spec, ds)
    spec_obj = get_spec(spec)
    assert full.X.shape[1] == spec_obj.stage2_dim and full.labels == SIM7.classes
    assert set(np.unique(full.groups)) == {"static-0"} and np.isfinite(full.X).all()
    assert full.feature_spec_version == str(spec_obj.version) and full.stage == 2
    paper = sim_features(
        spec, SimDataset(presets=("static",), seeds=(0,), frames=30, stride=5, task="paper3")
    )
    assert paper.labels == PAPER3.classes and len(paper.y) == int((full.y < 3).sum())
    assert np.array_equal(paper.X, full.X[full.y < 3])
    stage1 = sim_features(
        spec, SimDataset(presets=("static",), seeds=(0,), frames=30, stride=5, task="stage1")
    )
    assert stage1.labels == STAGE1.classes and stage1.X.shape == (len(full.y), spec_obj.stage1_dim)
    assert np.array_equal(stage1.y, (full.y < 3).astype(np.int64))


def test_cad_builder_on_real_sequence(shared_data: Path) -> None:
    from pairedge.core.io.cad import read_cad_mat

    seq = read_cad_mat(shared_data / "cad_choi" / "annotations" / "anno01.mat")
    data = cad_features([seq], stride=10)
    assert data.labels == CAD8.classes and data.X.shape[1] == get_spec("pairedge").stage2_dim
    assert '"motion": "boxes"' in data.feature_config
    expected = sum(
        int((seq.labels_for(f, seq.pair_labels(f)[0]) >= 0).sum()) for f in range(1, seq.num_frames + 1, 10)
    )
    assert len(data.y) == expected and set(np.unique(data.groups)) == {"cad01"}
    stage1 = cad_features([seq], stage=1, stride=10)
    assert stage1.labels == STAGE1.classes and np.array_equal(
        stage1.y, np.isin(data.y, [4, 5, 6, 7]).astype(int)
    )
    with pytest.raises(InputError, match="optical flow"):
        cad_features([seq], spec="liang2026", stage=2)


def test_seed_ranges_are_counted_before_they_are_expanded() -> None:
    with pytest.raises(InputError, match="100,000,001 seeds, more than the ceiling"):
        parse_seeds("0-100000000")
    with pytest.raises(InputError, match="0 <= A <= B"):
        parse_seeds("5-1")
