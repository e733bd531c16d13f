"""Replaying per-frame probabilities through the runtime's smoother; sequence folds; CAD pair rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.export.data import sequence_folds
from pairedge.export.temporal_eval import smooth_like_runtime
from pairedge.runtime.config import SmoothingConfig


def _rows() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    # stream "s": pair (1,2) on frames 1, 2, 4 (absent on 3); pair (1,3) on frame 2; stream "t": (1,2) on 1
    groups = np.array(["s", "s", "s", "s", "t"])
    frame = np.array([1, 2, 2, 4, 1])
    pairs = np.array([[1, 2], [1, 2], [1, 3], [1, 2], [1, 2]])
    probs = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.0, 1.0], [0.2, 0.8]], np.float32)
    return groups, frame, pairs, probs


def test_smoothing_replay_matches_hand_computed_ema() -> None:
    groups, frame, pairs, probs = _rows()
    out = smooth_like_runtime(groups, frame, pairs, probs, SmoothingConfig(alpha=0.25, grace_frames=0))
    assert np.allclose(out[0], [1.0, 0.0])  # first sight: as is
    assert np.allclose(out[1], [0.75, 0.25])  # 0.25 * new + 0.75 * previous
    assert np.allclose(out[2], [0.5, 0.5])  # another pair: its own state
    assert np.allclose(out[3], [0.0, 1.0])  # frame 3 without the pair: state dropped (grace 0)
    assert np.allclose(out[4], [0.2, 0.8])  # another stream: its own smoother


def test_smoothing_replay_grace_alpha_one_and_order() -> None:
    groups, frame, pairs, probs = _rows()
    assert np.allclose(smooth_like_runtime(groups, frame, pairs, probs, SmoothingConfig(alpha=1.0)), probs)
    kept = smooth_like_runtime(groups, frame, pairs, probs, SmoothingConfig(alpha=0.5, grace_frames=1))
    assert np.allclose(kept[3], 0.5 * probs[3] + 0.5 * np.array([0.5, 0.5]))  # survived the gap
    perm = np.array([4, 3, 2, 1, 0])  # input order does not matter
    shuffled = smooth_like_runtime(groups[perm], frame[perm], pairs[perm], probs[perm], SmoothingConfig(0.25))
    assert np.allclose(
        shuffled, smooth_like_runtime(groups, frame, pairs, probs, SmoothingConfig(0.25))[perm]
    )
    with pytest.raises(InputError, match="same N"):
        smooth_like_runtime(groups[:2], frame, pairs, probs)


def test_sequence_folds_partition_the_sequences() -> None:
    rng = np.random.default_rng(0)
    groups = np.repeat([f"seq{i}" for i in range(11)], rng.integers(5, 60, 11))
    fold = sequence_folds(groups, 4, seed=3)
    assert set(fold.tolist()) == {0, 1, 2, 3}
    for g in np.unique(groups):  # every sequence in exactly one fold
        assert len(np.unique(fold[groups == g])) == 1
    sizes = np.bincount(fold)
    assert sizes.max() - sizes.min() <= 60  # greedy balance: within one sequence's size
    assert np.array_equal(fold, sequence_folds(groups, 4, seed=3))
    with pytest.raises(InputError, match="folds"):
        sequence_folds(groups, 12)


def test_cad_pair_rows_match_sequence_rows(shared_data: Path) -> None:
    from pairedge.core.io.cad import read_cad_mat
    from pairedge.export.datasets.cad import extractor_config, sequence_pair_rows, sequence_rows

    seq = read_cad_mat(shared_data / "cad_choi" / "annotations" / "anno01.mat")
    config = extractor_config("pairedge", {"history": 30})
    rows = sequence_pair_rows(seq, "pairedge", 2, 10, config)
    X, y = sequence_rows(seq, "pairedge", 2, 10, config)
    assert np.array_equal(rows.X, X) and np.array_equal(rows.y, y) and len(y) > 0
    assert ((rows.frame - 1) % 10 == 0).all() and (np.diff(rows.frame) >= 0).all()
    assert (rows.pairs[:, 0] < rows.pairs[:, 1]).all()
    assert np.array_equal(seq.labels_for(int(rows.frame[0]), rows.pairs[:1]), rows.y[:1])
