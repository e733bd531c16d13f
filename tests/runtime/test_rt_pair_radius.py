"""PipelineConfig.pair_radius: far pairs skipped (features, classifiers, results), checked, liang2026
refused."""

from __future__ import annotations

import numpy as np
import pytest
from pairedge.core.bundled import default_model_dir
from pairedge.core.errors import InputError
from pairedge.core.sim import Scene
from pairedge.runtime import Pipeline, PipelineConfig


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), True, "3"])
def test_pair_radius_must_be_a_positive_number(bad) -> None:
    with pytest.raises(InputError, match="pair_radius"):
        PipelineConfig(pair_radius=bad)


def test_far_pairs_are_not_in_the_results_and_near_ones_are_unchanged() -> None:
    frames = list(Scene("surveillance", 1000).frames(40))
    results = {}
    for radius in (None, 2.0):
        with Pipeline.load(default_model_dir(), config=PipelineConfig(pair_radius=radius)) as pipe:
            results[radius] = [pipe.step(f.image, f.truth, f.timestamp) for f in frames]
    fewer = 0
    for full, near in zip(results[None], results[2.0], strict=True):
        row = {int(k): n for n, k in enumerate(full.track_ids.tolist())}
        b = full.boxes.astype(np.float64)
        c = b[:, :2] + b[:, 2:] / 2
        want = []
        for a, x in full.pairs.tolist():
            i, j = row[a], row[x]
            if np.hypot(*(c[j] - c[i])) <= 2.0 * max((b[i, 3] + b[j, 3]) / 2, 1e-6):
                want.append((a, x))
        assert [tuple(p) for p in near.pairs.tolist()] == want
        fewer += len(full.pairs) - len(near.pairs)
    assert fewer > 0


def test_liang2026_models_are_refused() -> None:
    """The paper's spec computes every pair: a radius there is an error, not silently ignored."""
    from pairedge.core.features import get_spec
    from pairedge.runtime.pipeline import apply_pair_radius

    extractor = get_spec("liang2026").make_extractor()
    with pytest.raises(InputError, match="pair_radius: the 'liang2026' feature spec computes every pair"):
        apply_pair_radius(extractor, "liang2026", 3.0)
    apply_pair_radius(extractor, "liang2026", None)  # no radius: nothing to refuse
    mine = get_spec("pairedge").make_extractor()
    apply_pair_radius(mine, "pairedge", 4)
    assert mine.pair_radius == 4.0
