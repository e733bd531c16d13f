"""benchmarks/bench_metrics.py runs end to end at a tiny size and writes its JSON and Markdown (no timing
asserted)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_metrics_writes_results(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_metrics", ROOT / "benchmarks" / "bench_metrics.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.bench_other_protocols = lambda seed: {
        "pcp": {"error": "skipped in test"},
        "par": {"error": "skipped"},
    }
    assert (
        bench.main(
            ["--n", "20000", "--pairs", "2000", "--frames", "50", "--repeat", "1", "--out", str(tmp_path)]
        )
        == 0
    )
    data = json.loads((tmp_path / "bench_metrics.json").read_text())
    assert data["pairwise"]["n"] == 20000 and data["pairwise"]["classes"] == 8
    assert data["pairwise"]["ratio_vs_bincount"] > 0
    assert data["machine"]["numpy"]
    md = (tmp_path / "bench_metrics.md").read_text()
    assert "OPENBLAS_NUM_THREADS" in md and "pcp: not measured" in md
