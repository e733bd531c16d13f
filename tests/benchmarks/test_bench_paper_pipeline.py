"""The released-code baseline of bench_paper_pipeline: two full-image flows per pair, outputs equal the
runtime's."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_paper_pipeline import NO_SMOOTHING, ReleasedCodePipeline, agreement, time_runtime  # noqa: E402
from rt_onnx_models import write_toy_model  # noqa: E402


def _four_people(tmp_path: Path) -> tuple[Path, list]:
    from pairedge.measure.sim import Scene

    model = tmp_path / "liang"
    write_toy_model(model / "stage1.onnx", 1)
    write_toy_model(model / "stage2.onnx", 2, seed=1)
    frames = []
    for f in Scene("static", 3).frames(3):  # 4 people: 6 pairs, small enough for a unit test
        keep = np.argsort(f.truth.track_ids)[:4]
        dets = type(f.truth)(f.truth.boxes[keep], f.truth.track_ids[keep], f.truth.scores[keep])
        frames.append((f.image, dets, f.timestamp))
    return model, frames


def test_baseline_runs_two_flows_per_pair_and_matches_the_runtime(tmp_path: Path) -> None:
    model, frames = _four_people(tmp_path)
    base = ReleasedCodePipeline(model, "all")
    outputs = [base.step(frames[k - 1][0], frames[k][0], frames[k][1]) for k in (1, 2)]
    assert all(len(o) == 6 for o in outputs)
    assert base.flows == 2 * 6 * 2  # A->B and B->A for every pair of both frames
    check = agreement(outputs, time_runtime(model, frames, NO_SMOOTHING)["results"])
    assert check["pairs_compared"] == 12
    assert check["max_abs_p_interact"] < 1e-5 and check["max_abs_probs"] < 1e-5
    gated = ReleasedCodePipeline(model, "gated")
    out = gated.step(frames[0][0], frames[1][0], frames[1][1])
    passed = [pair for pair, (p, _) in outputs[0].items() if p >= gated.tau]
    assert gated.flows == 2 * len(passed)  # the kinder variant: flows only for pairs that pass stage 1
    assert {pair for pair, (_, probs) in out.items() if probs is not None} == set(passed)


def test_liang_recipe_is_the_bundled_recipe_less_what_only_pairedge_has() -> None:
    # the bundled recipe's pairedge-only options (track history, stage-2 aspect swap) would be refused by the
    # liang2026 spec; everything that picks the training data stays the same
    from bench_paper_pipeline import liang_recipe
    from pairedge.core.bundled import RECIPE
    from pairedge.core.features import get_spec

    recipe = liang_recipe(RECIPE["train_seeds"])
    assert recipe["spec"] == "liang2026" and "aspect_swap" not in recipe["stage2"]
    assert recipe["feature_config"] == {}
    get_spec("liang2026").make_config(recipe["feature_config"])  # accepted
    for key in ("presets", "train_seeds", "test_seeds", "extra_presets", "frames", "stride", "boxes"):
        assert recipe[key] == RECIPE[key]
    assert "confirm" not in recipe and "operating_points" not in recipe["stage1"]
