"""bench_features_equal.py: this tree's features replayed through a baseline revision's feature modules."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _git_ok() -> bool:
    if shutil.which("git") is None:
        return False
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True)
    return done.returncode == 0


@pytest.mark.skipif(not _git_ok(), reason="needs a git checkout")
def test_features_equal_their_own_revision(tmp_path: Path):
    """Against HEAD (the committed feature modules, loaded from git into a temporary package) the replay
    finds every value bit-identical: the mechanism compares what it claims to."""
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "sdk/core/features"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    if dirty:
        pytest.skip("uncommitted changes in sdk/core/features")
    out = tmp_path / "equal"
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_features_equal.py",
            "--baseline",
            "HEAD",
            "--frames",
            "4",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    res = json.loads(out.with_suffix(".json").read_text())
    assert len(res["streams"]) == 4
    for r in res["streams"].values():
        assert r["pairs_equal"] and r["bit_identical"] == 1.0 and r["values"] > 0


def test_a_changed_feature_module_is_caught(tmp_path: Path):
    """A copy of the feature modules with one constant changed, replayed the same way, differs."""
    import pickle

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_features_equal as bench
    finally:
        sys.path.pop(0)
    from pairedge.apps.bench.measure import boxes_scene
    from pairedge.core.bundled import default_model_dir

    streams: dict = {}
    bench.record(streams, "scene", boxes_scene(6, 5), default_model_dir())
    pkg = tmp_path / "features"
    shutil.copytree(ROOT / "sdk" / "core" / "features", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    source = (pkg / "pairblock.py").read_text()
    assert "MOVING_SPEED = 0.15" in source
    (pkg / "pairblock.py").write_text(source.replace("MOVING_SPEED = 0.15", "MOVING_SPEED = 0.0"))
    inputs, outputs = tmp_path / "in.pkl", tmp_path / "out.pkl"
    inputs.write_bytes(bench.replay_inputs(streams))
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_features_equal.py"),
            "--replay",
            str(pkg),
            str(inputs),
            str(outputs),
        ],
        check=True,
        timeout=120,
    )
    result = bench.compare(streams["scene"][1:], pickle.loads(outputs.read_bytes())["scene"])
    assert result["pairs_equal"] and not result["pass"] and result["bit_identical"] < 1.0
