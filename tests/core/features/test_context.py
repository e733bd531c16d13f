"""``pairedge`` spec v3: the streaming long-horizon / group context against the offline CAD reference,
its bounds, and a v3 model through the pipeline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cad_synth import H, W, sequence
from pairedge.core.errors import InputError
from pairedge.core.features import spec_layout
from pairedge.core.features.context import CONTEXT_NAMES, LAGS_S, ContextHistory
from pairedge.core.features.edge import PAIR_NAMES_V2, PairedgeConfig, PairedgeExtractor
from pairedge.core.labels import CAD8
from pairedge.export.datasets.cad import cad_features, sequence_pair_rows
from pairedge.export.datasets.cad_context import context_features, mirror_sequence, reverse_sequence


def crowd(frames: int = 200, people: int = 7, seed: int = 0):
    """Random walkers and standers with gaps (absences of 1-40 frames), every pair labelled."""
    rng = np.random.default_rng(seed)
    t = np.arange(frames) / 30.0
    h = rng.uniform(60, 160, people)
    start = np.column_stack([rng.uniform(50, 600, people), rng.uniform(150, 350, people)])
    vel = rng.normal(0, 40, (people, 2)) * (rng.random(people) < 0.6)[:, None]
    xy = start[None] + vel[None] * t[:, None, None] + rng.normal(0, 1.5, (frames, people, 2))
    size = np.broadcast_to(np.column_stack([0.4 * h, h]), (frames, people, 2))
    xy = np.clip(xy, 0, np.array([W, H]) - size)  # inside the image (the pipeline drops boxes outside)
    boxes = np.concatenate([xy, size], -1)
    for k in range(people):  # each person leaves once for a while
        a = int(rng.integers(0, frames - 5))
        boxes[a : a + int(rng.integers(1, 40)), k] = np.nan
    labels = np.where(np.isfinite(boxes).all(-1)[:, :, None] & np.isfinite(boxes).all(-1)[:, None, :], 0, -1)
    labels[:, np.arange(people), np.arange(people)] = -1
    return sequence(boxes, labels)


@pytest.mark.parametrize("variant", ["plain", "mirrored", "reversed"])
def test_streaming_context_equals_the_offline_reference(variant: str) -> None:
    seq = crowd()
    seq = {"plain": seq, "mirrored": mirror_sequence(seq), "reversed": reverse_sequence(seq)}[variant]
    rows = sequence_pair_rows(
        seq, "pairedge", 2, 1, {"motion": "boxes", "history": 30}, orientation=False, spec_version="3"
    )
    layout = spec_layout("pairedge", "3")
    assert layout.stage2_names[-len(CONTEXT_NAMES) :] == tuple(f"pair_{n}" for n in CONTEXT_NAMES)
    assert len(rows.y) > 2000
    reference = context_features(seq, rows.frame, rows.pairs)
    np.testing.assert_allclose(rows.X[:, -len(CONTEXT_NAMES) :], reference, atol=2e-5)
    # every kind of value occurs: lags known and unknown, groups and no groups
    for k in range(len(LAGS_S), 2 * len(LAGS_S)):
        assert 0 < reference[:, k].mean() < 1
    assert 0 < reference[:, -1].mean() < 1


def test_v3_rows_are_v2_rows_plus_the_context() -> None:
    seq = crowd(frames=90)
    v2 = cad_features([seq], stride=3, spec_version="2")
    v3 = cad_features([seq], stride=3, spec_version="3")
    assert v3.feature_spec_version == "3" and v3.pair_features == v2.pair_features + len(CONTEXT_NAMES)
    np.testing.assert_array_equal(v3.X[:, : v2.X.shape[1]], v2.X)
    np.testing.assert_array_equal(v3.y, v2.y)
    assert spec_layout("pairedge", "3").stage1_names == PAIR_NAMES_V2 + CONTEXT_NAMES


def test_context_needs_orientation_layout() -> None:
    with pytest.raises(InputError, match="orientation"):
        PairedgeExtractor(PairedgeConfig(motion="boxes"), orientation=False, context=True)


def _boxes(n: int, x0: float = 0.0) -> np.ndarray:
    return np.column_stack([x0 + 50 * np.arange(n), np.full(n, 100.0), np.full(n, 20.0), np.full(n, 50.0)])


def test_distance_change_by_hand() -> None:
    ctx = ContextHistory()
    ia, ib = np.array([0]), np.array([1])
    ids = np.array([1, 2])
    # 30 fps; B walks toward A at 25 px/s = 0.5 heights/s (height 50)
    for f in range(121):
        t = f / 30
        b = np.array([[0, 100, 20, 50], [500 - 25 * t, 100, 20, 50]], float)
        out = ctx.step(ids, b, t, 1 / 30, ia, ib)
    np.testing.assert_allclose(out[0, :3], [-0.5, -0.5, -0.5], atol=1e-9)
    assert out[0, 3:6].tolist() == [1, 1, 1]


def test_high_frame_rate_beyond_the_capacity_loses_the_long_lags_only() -> None:
    ctx = ContextHistory(capacity=64)
    ids, b = np.array([1, 2]), _boxes(2)
    for f in range(5 * 30):
        out = ctx.step(ids, b, f / 30, 1 / 30, np.array([0]), np.array([1]))
    # 64 samples at 30 fps cover 2.1 s: the 1 and 2 s lags are known, the 4 s lag is not
    assert out[0, 3:6].tolist() == [1, 1, 0]


def test_track_store_is_bounded_and_time_going_back_resets() -> None:
    ctx = ContextHistory(max_tracks=8)
    for f in range(50):  # 3 new ids every frame: a flood of identities
        ids = np.arange(3 * f, 3 * f + 3)
        ctx.step(ids, _boxes(3), f / 30, 1 / 30, np.array([0]), np.array([1]))
        assert len(ctx) <= 8 + 3
    # a frame with more people than max_tracks still gets every one of them
    ctx.step(np.arange(1000, 1020), _boxes(20), 2.0, 1 / 30, np.array([0]), np.array([1]))
    assert len(ctx) >= 20
    ctx.step(np.array([1, 2]), _boxes(2), 0.5, 1 / 30, np.array([0]), np.array([1]))  # time went back
    assert len(ctx) == 2


def test_unseen_tracks_are_dropped_after_the_horizon() -> None:
    ctx = ContextHistory()
    ctx.step(np.array([1, 2]), _boxes(2), 0.0, 1 / 30, np.array([0]), np.array([1]))
    ctx.step(np.array([3]), _boxes(1), 4.5, 1 / 30, np.zeros(0, int), np.zeros(0, int))
    assert len(ctx) == 3
    ctx.step(np.array([3]), _boxes(1), 5.5, 1 / 30, np.zeros(0, int), np.zeros(0, int))
    assert len(ctx) == 1


def test_a_v3_model_runs_in_the_pipeline(tmp_path: Path) -> None:
    """Box-only v3 toy models: the pipeline feeds them exactly the v3 extractor's features."""

    from pairedge.runtime import Pipeline, PipelineConfig, SmoothingConfig
    from pairedge.runtime.pipeline import softmax
    from rt_onnx_models import write_toy_model

    layout = spec_layout("pairedge", "3")
    folder = tmp_path / "v3"
    ws = []
    for stage, width in ((1, layout.stage1_dim), (2, layout.stage2_dim)):
        ws.append(
            write_toy_model(
                folder / f"stage{stage}.onnx",
                stage=stage,
                spec_name="pairedge",
                seed=stage,
                feature_spec_version="3",
                num_features=width,
                norm_mean=(0.0,) * width,
                norm_std=(1.0,) * width,
                extra={"feature_config": {"motion": "boxes"}},
                labels=None if stage == 1 else CAD8.classes,
            )
        )
    seq = crowd(frames=150, people=5, seed=3)
    extractor = layout.make_extractor({"motion": "boxes"})
    config = PipelineConfig(smoothing=SmoothingConfig(alpha=1.0), box_shape="off")
    with Pipeline.load(folder, config=config) as pipe:
        assert pipe.describe()["feature_spec"] == "pairedge v3"
        for _f, t, det in seq.frames(orientation=False):
            result = pipe.step(None, det, t, image_size=seq.frame_size)
            feats = extractor.step(det, t, seq.frame_size)
            np.testing.assert_array_equal(result.pairs, feats.pairs)
            np.testing.assert_allclose(
                result.p_interact, softmax(ws[0].reference(feats.stage1))[:, 1], atol=1e-5
            )
        assert np.abs(feats.stage1[:, -len(CONTEXT_NAMES) :]).sum() > 0


def test_chain_groups_against_a_breadth_first_search() -> None:
    from pairedge.core.features.context import CHAIN, chain_groups

    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(0, 40))
        points, heights = rng.uniform(0, rng.uniform(50, 1500), (n, 2)), rng.uniform(10, 200, n)
        near = (
            np.linalg.norm(points[:, None] - points[None], axis=-1) < CHAIN * (heights[:, None] + heights) / 2
        )
        want = np.full(n, -1)
        for start in range(n):  # components by breadth-first search, named by their smallest index
            if want[start] >= 0:
                continue
            queue, want[start] = [start], start
            while queue:
                i = queue.pop()
                for j in np.flatnonzero(near[i] & (want < 0)):
                    want[j] = start
                    queue.append(int(j))
        np.testing.assert_array_equal(chain_groups(points, heights), want)


def test_group_values_against_a_direct_count() -> None:
    """The vectorised group values against the plain definition, with ties (grid points: pairs whose
    projections on the group axis coincide, members level with A or B)."""
    from pairedge.core.features.context import EPS, chain_groups, group_values

    rng = np.random.default_rng(7)
    for trial in range(200):
        n = int(rng.integers(2, 25))
        grid = trial % 2 == 0
        points = (rng.integers(0, 6, (n, 2)) * 60.0) if grid else rng.uniform(0, 800, (n, 2))
        heights = np.full(n, 50.0) if grid else rng.uniform(30, 150, n)
        ia, ib = np.triu_indices(n, 1)
        got = group_values(points, heights, ia, ib)
        comp = chain_groups(points, heights)
        for m, (a, b) in enumerate(zip(ia, ib, strict=True)):
            if comp[a] != comp[b]:
                assert not got[m].any()
                continue
            members = np.flatnonzero(comp == comp[a])
            p = points[members] / max(float(np.mean(heights[members])), EPS)
            centred = p - p.mean(0)
            evals, evecs = np.linalg.eigh(centred.T @ centred / len(p))  # the same scatter as the code
            axis = evecs[:, 1]
            proj = points @ axis
            lo, hi = sorted((proj[a], proj[b]))
            between = sum(lo < proj[k] < hi for k in members)
            ab = points[b] - points[a]
            want = [
                len(members) / 10,
                1 - evals[0] / max(evals[1], EPS),
                abs(ab @ axis) / max(np.linalg.norm(ab), EPS),
                between / max(len(members) - 2, 1),
                1.0,
            ]
            np.testing.assert_allclose(got[m], want, atol=1e-9)
