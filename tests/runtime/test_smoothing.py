"""Per-pair smoothing (EMA, eviction, bound) and groups (union-find, majority vote, tie-break)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pairedge.core.errors import InputError
from pairedge.runtime import groups as groups_module
from pairedge.runtime.config import SmoothingConfig
from pairedge.runtime.groups import connected_components, find_groups
from pairedge.runtime.smoothing import PairSmoother, pair_keys

LABELS = ("walking_together", "standing_together", "sitting_together")


def test_pair_keys_are_unique_and_ordered() -> None:
    keys = pair_keys(np.array([[1, 2], [1, 3], [2, 3], [0, (1 << 31) - 1]]))
    assert len(set(keys.tolist())) == 4
    assert keys[0] < keys[1] < keys[2]


def test_ema_of_interaction_probability() -> None:
    s = PairSmoother(3, SmoothingConfig(alpha=0.5))
    pairs = np.array([[1, 2], [2, 5]])
    np.testing.assert_allclose(s.smooth_interact(pairs, np.array([1.0, 0.0], np.float32)), [1.0, 0.0])
    np.testing.assert_allclose(s.smooth_interact(pairs, np.array([0.0, 1.0], np.float32)), [0.5, 0.5])
    # pair order within a frame does not matter
    np.testing.assert_allclose(s.smooth_interact(pairs[::-1], np.array([1.0, 1.0], np.float32)), [0.75, 0.75])


def test_alpha_one_disables_smoothing() -> None:
    s = PairSmoother(3, SmoothingConfig(alpha=1.0))
    pairs = np.array([[1, 2]])
    s.smooth_interact(pairs, np.array([0.9], np.float32))
    assert s.smooth_interact(pairs, np.array([0.1], np.float32))[0] == pytest.approx(0.1)


def test_stage2_probabilities_are_smoothed_only_when_computed() -> None:
    s = PairSmoother(3, SmoothingConfig(alpha=0.5))
    pairs = np.array([[1, 2], [3, 4]])
    s.smooth_interact(pairs, np.array([0.9, 0.9], np.float32))
    out = s.smooth_probs(np.array([1]), np.array([[1.0, 0.0, 0.0]], np.float32))
    np.testing.assert_allclose(out, [[1, 0, 0]])
    s.smooth_interact(pairs, np.array([0.9, 0.9], np.float32))
    out = s.smooth_probs(np.array([0, 1]), np.array([[0, 1, 0], [0, 1, 0]], np.float32))
    np.testing.assert_allclose(out, [[0, 1, 0], [0.5, 0.5, 0]])  # pair (1,2) starts fresh


def test_pair_is_evicted_when_a_track_disappears() -> None:
    s = PairSmoother(3, SmoothingConfig(alpha=0.5, grace_frames=0))
    s.smooth_interact(np.array([[1, 2], [1, 3]]), np.array([1.0, 1.0], np.float32))
    s.smooth_interact(np.array([[1, 3]]), np.array([1.0], np.float32))  # track 2 gone
    assert len(s) == 1
    assert s.smooth_interact(np.array([[1, 2], [1, 3]]), np.array([0.0, 0.0], np.float32))[0] == 0.0


def test_grace_frames_keep_state_through_a_short_gap() -> None:
    s = PairSmoother(3, SmoothingConfig(alpha=0.5, grace_frames=2))
    s.smooth_interact(np.array([[1, 2]]), np.array([1.0], np.float32))
    s.smooth_interact(np.zeros((0, 2), np.int64), np.zeros(0, np.float32))
    assert s.smooth_interact(np.array([[1, 2]]), np.array([0.0], np.float32))[0] == 0.5
    for _ in range(3):
        s.smooth_interact(np.zeros((0, 2), np.int64), np.zeros(0, np.float32))
    assert len(s) == 0


def test_state_is_bounded_over_a_long_stream() -> None:
    s = PairSmoother(3, SmoothingConfig(max_pairs=50, grace_frames=1000))
    rng = np.random.default_rng(0)
    for _ in range(200):
        ids = np.sort(rng.choice(10_000, 8, replace=False))
        ia, ib = np.triu_indices(8, 1)
        pairs = np.stack([ids[ia], ids[ib]], 1)
        p = s.smooth_interact(pairs, rng.random(len(pairs)).astype(np.float32))
        s.smooth_probs(np.arange(len(pairs)), np.full((len(pairs), 3), 1 / 3, np.float32))
        assert len(p) == 28 and len(s) <= 50
    tiny = PairSmoother(3, SmoothingConfig(max_pairs=5))  # fewer slots than pairs: still answers
    out = tiny.smooth_interact(pairs, np.ones(28, np.float32))
    assert len(tiny) == 5 and out.shape == (28,)
    assert tiny.smooth_probs(np.arange(28), np.ones((28, 3), np.float32)).shape == (28, 3)


def test_config_validation() -> None:
    with pytest.raises(InputError):
        SmoothingConfig(alpha=0.0)


def _reference_components(edges: list[tuple[int, int]], n: int) -> list[int]:
    parent = list(range(n))

    def root(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = root(a), root(b)
        parent[max(ra, rb)] = min(ra, rb)
    return [min(i for i in range(n) if root(i) == root(x)) for x in range(n)]


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 30).flatmap(
        lambda n: st.tuples(
            st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=60)
        )
    )
)
def test_connected_components_match_a_reference(case: tuple[int, list[tuple[int, int]]]) -> None:
    """Both ways: union-find for small graphs, vectorised propagation for large ones."""
    n, edges = case
    want = _reference_components(edges, n)
    for small in (groups_module.SMALL_GRAPH, 0):
        saved, groups_module.SMALL_GRAPH = groups_module.SMALL_GRAPH, small
        try:
            got = connected_components(np.array(edges, np.int64).reshape(-1, 2), n)
        finally:
            groups_module.SMALL_GRAPH = saved
        assert got.tolist() == want


def test_groups_majority_vote_and_share() -> None:
    pairs = np.array([[1, 2], [1, 3], [2, 3], [7, 9], [4, 5]])
    p = np.array([0.9, 0.8, 0.7, 0.95, 0.2], np.float32)
    label_ids = np.array([0, 0, 1, 2, -1])
    probs = np.eye(3, dtype=np.float32)[np.maximum(label_ids, 0)]
    groups = find_groups(pairs, p, label_ids, probs, 0.5, LABELS)
    assert [g.members for g in groups] == [(1, 2, 3), (7, 9)]
    assert groups[0].activity == "walking_together" and groups[0].vote_share == pytest.approx(2 / 3)
    assert groups[1].activity == "sitting_together" and groups[1].vote_share == 1.0


def test_group_tie_broken_by_summed_probability() -> None:
    pairs = np.array([[1, 2], [2, 3]])
    label_ids = np.array([0, 1])
    probs = np.array([[0.5, 0.3, 0.2], [0.1, 0.9, 0.0]], np.float32)
    (group,) = find_groups(pairs, np.array([0.9, 0.9]), label_ids, probs, 0.5, LABELS)
    assert group.members == (1, 2, 3)
    assert group.activity == "standing_together" and group.vote_share == 0.5  # 0.3 + 0.9 > 0.5 + 0.1


def test_pairs_below_tau_group_do_not_link_but_still_vote() -> None:
    pairs = np.array([[1, 2], [2, 3], [1, 3]])
    p = np.array([0.9, 0.9, 0.55])
    label_ids = np.array([0, 0, 1])
    probs = np.eye(3, dtype=np.float32)[label_ids]
    (group,) = find_groups(pairs, p, label_ids, probs, 0.6, LABELS)
    assert group.members == (1, 2, 3) and group.vote_share == pytest.approx(2 / 3)
    assert find_groups(pairs, p, label_ids, probs, 0.95, LABELS) == ()


def test_no_group_without_a_labelled_link() -> None:
    """A pair above tau_group that stage 2 never labelled (not gated or not confirmed) links nobody."""
    assert (
        find_groups(np.array([[3, 8]]), np.array([0.9]), np.array([-1]), np.zeros((1, 3)), 0.5, LABELS) == ()
    )
    pairs = np.array([[1, 2], [2, 3]])
    (group,) = find_groups(pairs, np.array([0.9, 0.9]), np.array([0, -1]), np.eye(3)[[0, 0]], 0.5, LABELS)
    assert group.members == (1, 2) and group.activity == "walking_together"


def test_groups_from_row_index_with_unsorted_track_ids() -> None:
    from pairedge.runtime.groups import groups_from_index

    node_ids = np.array([9, 3, 7, 20, 15])  # detection order, not sorted
    index = np.array([[0, 1], [1, 2], [3, 4], [0, 3]])
    p = np.array([0.9, 0.9, 0.8, 0.1])
    label_ids = np.array([2, 2, 0, -1])
    probs = np.eye(3, dtype=np.float32)[np.maximum(label_ids, 0)]
    groups = groups_from_index(index, node_ids, p, label_ids, probs, 0.5, LABELS)
    assert [g.members for g in groups] == [(3, 7, 9), (15, 20)]
    assert [g.activity for g in groups] == ["sitting_together", "walking_together"]
    pairs = node_ids[index]
    assert find_groups(pairs, p, label_ids, probs, 0.5, LABELS) == groups
