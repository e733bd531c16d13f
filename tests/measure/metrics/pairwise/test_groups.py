"""Stage-1 pair detection, group activity by majority vote, and group detection by size (hand-computed)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pairedge.core.errors import InputError
from pairedge.measure.metrics.pairwise import Groups, group_activity, group_detection, pair_detection
from pairedge.measure.metrics.pairwise.keys import first_duplicate, lookup, row_keys


def make_groups(groups: list[tuple[int, list[int], int]]) -> Groups:
    """Groups from ``[(frame, members, activity), ...]``."""
    frame = np.array([g[0] for g in groups], np.int64)
    activity = np.array([g[2] for g in groups], np.int64)
    member_group = np.array([i for i, g in enumerate(groups) for _ in g[1]], np.int64)
    member_id = np.array([m for g in groups for m in g[1]], np.int64)
    return Groups(frame, activity, member_group, member_id)


# ---------------------------------------------------------------- keys


def test_row_keys_match_rows_across_tables_including_huge_ids() -> None:
    a = np.array([[1, 2, 3], [1, 3, 2], [2**40, -(2**40), 5]])
    b = np.array([[1, 3, 2], [9, 9, 9], [2**40, -(2**40), 5]])
    ka, kb = row_keys(a, b)
    assert ka[1] == kb[0] and ka[2] == kb[2] and ka[0] != kb[0] and len(set(ka) | set(kb)) == 4
    big = np.array([[2**61, 0, 0], [-(2**61), 0, 0], [2**61, 0, 0]])  # key space too large: ranks rows
    (kbig,) = row_keys(big)
    assert kbig[0] == kbig[2] != kbig[1]


def test_lookup_and_first_duplicate() -> None:
    keys = np.array([2, 5, 9])
    np.testing.assert_array_equal(
        lookup(keys, np.array([20, 50, 90]), np.array([5, 1, 9, 10])), [50, -1, 90, -1]
    )
    assert first_duplicate(np.array([4, 1, 7, 1, 4])) == (1, 3)
    assert first_duplicate(np.array([1, 2, 3])) is None


# ---------------------------------------------------------------- stage 1


def test_pair_detection_hand_computed() -> None:
    pred = np.array([[0, 1, 2], [0, 3, 4], [1, 1, 2]])
    gold = np.array([[0, 1, 2], [1, 1, 2], [1, 5, 6], [2, 1, 2]])
    s = pair_detection(pred, gold)
    assert (s.tp, s.fp, s.fn) == (2, 1, 2)
    assert s.precision == pytest.approx(2 / 3) and s.recall == pytest.approx(1 / 2)
    assert s.f1 == pytest.approx(2 * 2 / (2 * 2 + 1 + 2))


def test_pair_detection_empty_prediction_is_nan_precision() -> None:
    s = pair_detection(np.zeros((0, 3), np.int64), np.array([[0, 1, 2]]))
    assert np.isnan(s.precision) and s.recall == 0.0 and s.f1 == 0.0
    assert np.isnan(pair_detection(np.zeros((0, 3)), np.zeros((0, 3))).f1)


def test_pair_detection_is_unordered_and_rejects_duplicates() -> None:
    s = pair_detection(np.array([[0, 2, 1]]), np.array([[0, 1, 2]]))
    assert (s.tp, s.fp, s.fn) == (1, 0, 0)
    with pytest.raises(InputError, match="same pair"):
        pair_detection(np.array([[0, 1, 2], [0, 2, 1]]), np.array([[0, 1, 2]]))
    with pytest.raises(InputError, match="with itself"):
        pair_detection(np.array([[0, 3, 3]]), np.array([[0, 1, 2]]))
    with pytest.raises(InputError, match="integer"):
        pair_detection(np.array([[0.5, 1, 2]]), np.array([[0, 1, 2]]))


@settings(max_examples=100, deadline=None)
@given(
    st.sets(st.tuples(st.integers(0, 5), st.integers(0, 6), st.integers(0, 6)), max_size=40),
    st.sets(st.tuples(st.integers(0, 5), st.integers(0, 6), st.integers(0, 6)), max_size=40),
)
def test_pair_detection_equals_python_sets(pred: set[tuple[int, ...]], gold: set[tuple[int, ...]]) -> None:
    pred = {(f, a, b) for f, a, b in pred if a < b}
    gold = {(f, a, b) for f, a, b in gold if a < b}
    s = pair_detection(np.array(sorted(pred)).reshape(-1, 3), np.array(sorted(gold)).reshape(-1, 3))
    assert (s.tp, s.fp, s.fn) == (len(pred & gold), len(pred - gold), len(gold - pred))


# ---------------------------------------------------------------- group activity


def test_group_activity_majority_tie_break_and_no_votes() -> None:
    gold = make_groups(
        [
            (0, [1, 2, 3], 0),  # votes 0, 0, 1 -> 0 (correct), share 2/3
            (0, [4, 5, 6], 2),  # votes 1, 2 -> tie, weights favour 2 -> correct
            (1, [1, 2], 1),  # no predicted pair inside -> wrong
            (1, [7], 0),  # singleton: not scored
            (2, [8, 9], -1),  # no activity: not scored
        ]
    )
    rows = np.array(
        [[0, 1, 2], [0, 1, 3], [0, 2, 3], [0, 4, 5], [0, 4, 6], [0, 3, 4], [1, 1, 7], [2, 8, 9]], np.int64
    )
    labels = np.array([0, 0, 1, 1, 2, 2, 1, 0])  # [0, 3, 4] crosses groups: ignored
    weights = np.zeros((8, 3))
    weights[3] = [0.0, 0.55, 0.45]
    weights[4] = [0.0, 0.10, 0.90]  # summed: class 1 -> 0.65, class 2 -> 1.35
    s = group_activity(gold, rows, labels, 3, weights)
    np.testing.assert_array_equal(s.winner, [0, 2, -1, -1, -1])
    assert (s.n_scored, s.n_correct, s.n_no_votes) == (3, 2, 1)
    assert s.accuracy == pytest.approx(2 / 3)
    assert s.vote_share[0] == pytest.approx(2 / 3) and s.vote_share[1] == pytest.approx(1 / 2)
    assert s.mean_vote_share == pytest.approx((2 / 3 + 1 / 2) / 2)
    # without weights a tie goes to the lower class id
    plain = group_activity(gold, rows, labels, 3)
    assert plain.winner[1] == 1 and plain.n_correct == 1


def test_group_activity_ignores_unlabelled_pairs_and_other_frames() -> None:
    gold = make_groups([(5, [1, 2, 3], 1)])
    rows = np.array([[5, 1, 2], [5, 2, 3], [6, 1, 2], [6, 2, 3]])
    s = group_activity(gold, rows, np.array([1, -1, 0, 0]), 2)
    assert s.winner[0] == 1 and s.vote_share[0] == 1.0 and s.accuracy == 1.0


def test_group_activity_without_groups_is_nan() -> None:
    s = group_activity(Groups.empty(), np.zeros((0, 3)), np.zeros(0, np.int64), 3)
    assert s.n_scored == 0 and np.isnan(s.accuracy) and np.isnan(s.mean_vote_share)


# ---------------------------------------------------------------- group detection


def test_group_detection_iou_threshold_is_strict() -> None:
    gold = make_groups([(0, [1, 2, 3, 4], -1), (1, [1, 2, 3, 4], -1)])
    pred = make_groups([(0, [1, 2], -1), (1, [1, 2, 3], -1)])  # IoU 0.5 (no match), 0.75 (match)
    s = group_detection(pred, gold)
    assert (s.overall.tp, s.overall.fp, s.overall.fn) == (1, 1, 1)
    # TP and FN by the true size (4), FP by the predicted size (2)
    assert (s.by_size[3].tp, s.by_size[3].fn, s.by_size[3].fp) == (1, 1, 0)
    assert (s.by_size[1].tp, s.by_size[1].fp, s.by_size[1].fn) == (0, 1, 0)
    np.testing.assert_array_equal(s.n_true, [0, 0, 0, 2, 0])
    np.testing.assert_array_equal(s.n_pred, [0, 1, 1, 0, 0])


def test_group_detection_by_size_buckets_and_frames() -> None:
    gold = make_groups(
        [(0, [1], -1), (0, [2, 3], -1), (0, [4, 5, 6, 7, 8, 9], -1), (1, [2, 3], -1), (1, [10, 11, 12], -1)]
    )
    pred = make_groups(
        [
            (0, [1], -1),  # TP size 1
            (0, [2, 3], -1),  # TP size 2
            (0, [4, 5, 6, 7, 8], -1),  # IoU 5/6: TP in bucket 5+
            (1, [2, 3, 20], -1),  # IoU 2/3: TP in bucket 2 (true size)
            (2, [10, 11, 12], -1),  # another frame: FP size 3; gold frame-1 {10,11,12} is FN size 3
        ]
    )
    s = group_detection(pred, gold)
    assert [b.tp for b in s.by_size] == [1, 2, 0, 0, 1]
    assert [b.fp for b in s.by_size] == [0, 0, 1, 0, 0]
    assert [b.fn for b in s.by_size] == [0, 0, 1, 0, 0]
    assert s.overall.f1 == pytest.approx(2 * 4 / (2 * 4 + 1 + 1))
    assert np.isnan(s.by_size[3].precision) and np.isnan(s.by_size[3].f1)


def test_group_detection_rejects_person_in_two_groups() -> None:
    bad = make_groups([(0, [1, 2], -1), (0, [2, 3], -1)])
    with pytest.raises(InputError, match="person 2 appears twice in frame 0"):
        group_detection(bad, make_groups([(0, [1, 2], -1)]))


def _brute_force(
    pred: list[tuple[int, list[int]]], gold: list[tuple[int, list[int]]]
) -> tuple[list[int], ...]:
    tp, fp, fn = [0] * 5, [0] * 5, [0] * 5
    pred_hit = [False] * len(pred)
    for gf, gm in gold:
        hit = False
        for k, (pf, pm) in enumerate(pred):
            inter = len(set(gm) & set(pm))
            if pf == gf and inter / len(set(gm) | set(pm)) > 0.5:
                hit = pred_hit[k] = True
        (tp if hit else fn)[min(len(gm), 5) - 1] += 1
    for (_, pm), hit in zip(pred, pred_hit, strict=True):
        if not hit:
            fp[min(len(pm), 5) - 1] += 1
    return tp, fp, fn


@st.composite
def partitions(draw: st.DrawFn) -> list[tuple[int, list[int]]]:
    """Random disjoint groups over a few frames."""
    out = []
    for frame in range(draw(st.integers(1, 3))):
        people = draw(st.permutations(range(12)))[: draw(st.integers(0, 12))]
        cuts = sorted(draw(st.sets(st.integers(1, max(len(people) - 1, 1)), max_size=4)))
        for lo, hi in itertools.pairwise([0, *cuts, len(people)]):
            if people[lo:hi]:
                out.append((frame, list(people[lo:hi])))
    return out


@settings(max_examples=150, deadline=None)
@given(partitions(), partitions())
def test_group_detection_equals_brute_force(
    pred: list[tuple[int, list[int]]], gold: list[tuple[int, list[int]]]
) -> None:
    s = group_detection(
        make_groups([(f, m, -1) for f, m in pred]), make_groups([(f, m, -1) for f, m in gold])
    )
    tp, fp, fn = _brute_force(pred, gold)
    assert [b.tp for b in s.by_size] == tp
    assert [b.fp for b in s.by_size] == fp
    assert [b.fn for b in s.by_size] == fn
