"""bench_ego_refine: the closed-form similarity against hand-made transforms, and a short run end to end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_ego_refine as ego  # noqa: E402


def test_closed_form_recovers_an_exact_similarity() -> None:
    rng = np.random.default_rng(0)
    src = rng.uniform(0, 320, (200, 2))
    angle, scale = 0.03, 1.02
    a, b = scale * np.cos(angle), scale * np.sin(angle)
    want = np.array([[a, -b, 4.0], [b, a, -2.5]])
    dst = src @ want[:, :2].T + want[:, 2]
    np.testing.assert_allclose(ego.closed_form(src, dst), want, rtol=0, atol=1e-12)


def test_closed_form_is_the_least_squares_solution() -> None:
    # the normal equations of dst ~ [[a, -b], [b, a]] src + t, solved by numpy's lstsq, give the same matrix
    rng = np.random.default_rng(1)
    src = rng.uniform(0, 100, (50, 2))
    dst = src * 0.9 + rng.normal(scale=2.0, size=src.shape) + [3.0, 1.0]
    rows = np.zeros((100, 4))
    rows[0::2] = np.c_[src[:, 0], -src[:, 1], np.ones(50), np.zeros(50)]
    rows[1::2] = np.c_[src[:, 1], src[:, 0], np.zeros(50), np.ones(50)]
    a, b, tx, ty = np.linalg.lstsq(rows, dst.reshape(-1), rcond=None)[0]
    np.testing.assert_allclose(ego.closed_form(src, dst), [[a, -b, tx], [b, a, ty]], rtol=0, atol=1e-10)


def test_closed_form_fit_refines_only_the_ransac_inliers() -> None:
    rng = np.random.default_rng(2)
    points = rng.uniform(0, 300, (400, 2)).astype(np.float32)
    vectors = np.full_like(points, 0.5) + rng.normal(scale=0.05, size=points.shape).astype(np.float32)
    vectors[:40] += 25.0  # outliers: people moving
    m = ego.closed_form_fit(points, vectors)
    assert m is not None
    np.testing.assert_allclose(m[:, 2], [0.5, 0.5], atol=0.05)
    np.testing.assert_allclose(m[:, :2], np.eye(2), atol=1e-3)


def test_short_run_writes_its_tables(tmp_path: Path) -> None:
    assert ego.main(["--frames", "4", "--repeats", "1", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "bench_ego_refine.json").read_text())
    assert res["fits"]["fits"] > 0 and res["fits"]["ransac_search_us"] > 0
    assert set(res["features"]) == {"simulator moving:1000"}
    assert "RANSAC search" in (tmp_path / "bench_ego_refine.md").read_text()


def test_bad_arguments_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        ego.main(["--frames", "1", "--out", str(tmp_path)])
    assert exc.value.code == 2


@pytest.mark.parametrize("flag", ["--model", "--data"])
def test_missing_model_or_data_is_one_error_line(flag: str, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        ego.main([flag, str(tmp_path / "[missing]"), "--out", str(tmp_path)])
    assert str(exc.value).startswith("error: ") and "[missing]" in str(exc.value)
    assert not (tmp_path / "bench_ego_refine.json").exists()
