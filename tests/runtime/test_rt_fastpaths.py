"""The runtime's fast paths agree with the general code: detection validation, steady-state smoothing,
column-wise softmax, vectorised group assembly (against a plain Python reference)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from pairedge.core.types import Detections
from pairedge.runtime.config import SmoothingConfig, ValidationConfig
from pairedge.runtime.groups import find_groups
from pairedge.runtime.pipeline import softmax
from pairedge.runtime.smoothing import PairSmoother
from pairedge.runtime.validate import validate_detections

SPECIAL = [np.nan, np.inf, -np.inf, -50.0, 0.0, 0.5, 700.0, 5000.0]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 12), st.integers(0, 2**32 - 1), st.floats(0.0, 0.4))
def test_validation_fast_path_matches_the_full_check(n: int, seed: int, special: float) -> None:
    rng = np.random.default_rng(seed)
    boxes = np.column_stack([rng.uniform(-40, 660, n), rng.uniform(-40, 500, n), rng.uniform(0, 120, (n, 2))])
    hit = rng.random((n, 4)) < special
    boxes[hit] = rng.choice(SPECIAL, int(hit.sum()))
    ids = rng.integers(-1, 8, n) if rng.random() < 0.5 else rng.permutation(n) * 3
    if rng.random() < 0.1 and n:
        ids[0] = -2 if rng.random() < 0.5 else 2**31
    scores = np.where(rng.random(n) < special / 4, np.nan, rng.random(n))
    dets = Detections(boxes.astype(np.float32), ids.astype(np.int64), scores.astype(np.float32))
    duck = SimpleNamespace(boxes=dets.boxes, track_ids=dets.track_ids, scores=dets.scores)  # full check
    config = ValidationConfig()
    fast, dropped_fast = validate_detections(dets, (640, 480), config)
    full, dropped_full = validate_detections(duck, (640, 480), config)
    assert dropped_fast == dropped_full
    np.testing.assert_array_equal(fast.boxes, full.boxes)
    np.testing.assert_array_equal(fast.track_ids, full.track_ids)
    np.testing.assert_array_equal(fast.scores, full.scores)
    assert fast.boxes.dtype == np.float32 and fast.track_ids.dtype == np.int64
    if len(fast):
        assert not np.shares_memory(fast.boxes, dets.boxes)


def test_steady_state_smoothing_is_the_ema_and_results_are_owned() -> None:
    s = PairSmoother(3, SmoothingConfig(alpha=0.6, grace_frames=0))
    pairs = np.array([[1, 2], [1, 5], [2, 5]])
    rng = np.random.default_rng(0)
    expected = None
    for _ in range(6):
        p = rng.random(3).astype(np.float32)
        out = s.smooth_interact(pairs, p)
        expected = p if expected is None else 0.6 * p + 0.4 * expected
        np.testing.assert_allclose(out, expected, rtol=1e-6)
        out[:] = -1.0  # the caller owns the result: the state must not change
        rows = np.array([0, 2])
        probs = s.smooth_probs(rows, np.full((2, 3), 1 / 3, np.float32))
        np.testing.assert_allclose(probs, 1 / 3, rtol=1e-6)
    assert len(s) == 3
    np.testing.assert_allclose(
        s.smooth_interact(pairs[:2], np.zeros(2, np.float32)), 0.4 * expected[:2], rtol=1e-6
    )
    assert len(s) == 2  # pair (2, 5) evicted once the pair set changed


@given(st.integers(0, 50), st.integers(1, 8), st.integers(0, 2**32 - 1))
def test_columnwise_softmax_matches_the_textbook_formula(n: int, c: int, seed: int) -> None:
    logits = np.random.default_rng(seed).normal(0, 20, (n, c)).astype(np.float32)
    ref = np.exp(logits.astype(np.float64) - logits.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    out = softmax(logits)
    assert out.dtype == np.float32 and out.shape == (n, c)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-7)


def _reference_groups(pairs, p, label_ids, probs, tau, labels):  # type: ignore[no-untyped-def]
    parent: dict[int, int] = {}

    def find(a: int) -> int:
        parent.setdefault(a, a)
        while parent[a] != a:
            a = parent[a]
        return a

    for (a, b), q in zip(pairs.tolist(), p.tolist(), strict=True):
        find(a), find(b)
        if q >= tau:
            parent[find(a)] = find(b)
    comps: dict[int, list[int]] = {}
    for node in parent:
        comps.setdefault(find(node), []).append(node)
    out = []
    for members in comps.values():
        if len(members) < 2:  # two or more members were joined by an edge >= tau
            continue
        inside = [
            r
            for r, (a, b) in enumerate(pairs.tolist())
            if a in members and b in members and label_ids[r] >= 0
        ]
        votes = (
            np.bincount(label_ids[inside], minlength=len(labels)) if inside else np.zeros(len(labels), int)
        )
        mass = probs[inside].astype(np.float64).sum(axis=0) if inside else np.zeros(len(labels))
        total = int(votes.sum())
        if total == 0:
            out.append((tuple(sorted(members)), "", -1, 0.0))
            continue
        best = [k for k in range(len(labels)) if votes[k] == votes.max()]
        winner = max(best, key=lambda k: (mass[k], -k))
        out.append((tuple(sorted(members)), labels[winner], winner, votes[winner] / total))
    return sorted(out)


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 14), st.integers(0, 2**32 - 1))
def test_groups_match_a_plain_union_find(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ids = rng.permutation(100)[:n]
    ia, ib = np.triu_indices(n, 1)
    pairs = np.sort(np.stack([ids[ia], ids[ib]], 1), axis=1)
    p = (rng.random(len(ia)) ** 4).astype(np.float32)
    label_ids = np.where(p >= 0.3, rng.integers(0, 3, len(p)), -1)
    probs = np.where(label_ids[:, None] >= 0, rng.dirichlet(np.ones(3), len(p)), 0.0).astype(np.float32)
    labels = ("a", "b", "c")
    got = [
        (g.members, g.activity, g.activity_id, g.vote_share)
        for g in find_groups(pairs, p, label_ids, probs, 0.5, labels)
    ]
    ref = _reference_groups(pairs, p, label_ids, probs, 0.5, labels)
    assert [g[:3] for g in sorted(got)] == [g[:3] for g in ref]
    np.testing.assert_allclose([g[3] for g in sorted(got)], [g[3] for g in ref])


def test_tune_allocator_applies_on_glibc_only() -> None:
    import platform

    from pairedge.runtime.memory import tune_allocator

    expected = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert tune_allocator() is expected
    assert tune_allocator() is expected  # idempotent
