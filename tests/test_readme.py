"""The README's Python blocks run as written, and the numbers it quotes come from the code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DATA = ROOT.parent / "shared" / "data"


def python_blocks() -> list[tuple[str, str]]:
    """``(section heading, code)`` of every ```python block of the README, in order."""
    blocks, heading = [], ""
    for match in re.finditer(r"^(## [^\n]*)$|^```python\n(.*?)^```", README, re.M | re.S):
        if match.group(1):
            heading = match.group(1)[3:].strip()
        else:
            blocks.append((heading, match.group(2)))
    return blocks


BLOCKS = python_blocks()


def test_the_readme_has_its_blocks() -> None:
    headings = [h for h, _ in BLOCKS]
    assert "Embedding the runtime" in headings and len(BLOCKS) >= 5


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working folder like the README's: a simulated scene in ``sim/`` and ``../shared`` where it is."""
    base = tmp_path_factory.mktemp("readme")
    work = base / "work"
    work.mkdir()
    if DATA.is_dir():
        (base / "shared").symlink_to(DATA.parent)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pairedge.apps.cli",
            "simulate",
            "--preset",
            "static",
            "--seed",
            "3",
            "--frames",
            "30",
            "--out",
            "sim",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return work


@pytest.mark.slow
@pytest.mark.parametrize(
    "index", range(len(BLOCKS)), ids=[f"{k}-{h[:24]}" for k, (h, _) in enumerate(BLOCKS)]
)
def test_python_block_runs(index: int, workdir: Path) -> None:
    heading, code = BLOCKS[index]
    if "../shared/data" in code and not DATA.is_dir():
        pytest.skip("needs ../shared/data")
    if "read_cad_dir" in code:
        pytest.importorskip("scipy")
    env = {**os.environ, "PYTHONWARNINGS": "error::DeprecationWarning:pairedge"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, f"README block {index} ({heading}) failed:\n{done.stderr[-3000:]}"
    if heading == "Embedding the runtime":
        lines = done.stdout.splitlines()
        assert any("walking_together" in line or "standing_together" in line for line in lines), lines[-5:]


def test_feature_widths_quoted_are_the_code_s() -> None:
    """README and docs/features.md quote each spec version's stage-1 + stage-2 widths as the code builds
    them."""
    from pairedge.core.features import get_spec

    features_md = (ROOT / "docs" / "features.md").read_text(encoding="utf-8")
    liang = get_spec("liang2026")
    assert f"`liang2026` ({liang.stage1_dim} + {liang.stage2_dim} values" in README
    spec = get_spec("pairedge")
    quoted = {
        "1": r"version 1: (\d+) \+ (\d+)",
        "2": r"version 2, the current one and the bundled model's: (\d+) \+ (\d+)",
        "3": r"version 3 with long-horizon and group context: (\d+) \+ (\d+)",
    }
    for version, pattern in quoted.items():
        found = re.search(pattern, README.replace("\n", " "))
        assert found, pattern
        layout = spec.for_version(version)
        assert (int(found.group(1)), int(found.group(2))) == (layout.stage1_dim, layout.stage2_dim), version
        row = re.search(rf"^\| `pairedge` \| {version}\b[^|]*\| (\d+) \| (\d+)", features_md, re.M)
        assert row and (int(row.group(1)), int(row.group(2))) == (layout.stage1_dim, layout.stage2_dim)
    assert str(spec.version) == "2", "the README calls version 2 the current one"
    from pairedge.core.bundled import RECIPE

    assert RECIPE["spec"] == "pairedge"


def _results(name: str) -> dict:
    import json

    return json.loads((ROOT / "benchmarks" / "results" / f"{name}.json").read_text(encoding="utf-8"))


def _flat() -> str:
    return " ".join(README.split())


def test_latency_figures_quoted_are_the_benchmark_results() -> None:
    """The README's latency numbers are those of the committed benchmark results they cite."""
    text = _flat()
    pets = _results("bench_pets")
    totals = sorted(
        run["latency_ms"]["total"]["p50"] for flow in pets["runs"].values() for run in flow.values()
    )
    assert f"at a {totals[0]:.1f}-{totals[-1]:.1f} ms median step (`python benchmarks/bench_pets.py`)" in text
    speed = _results("bench_paper_pipeline")["speed"]
    rows = {k: v["cpu_ms"]["p50"] for k, v in speed["rows"].items()}
    assert (
        f"**{speed['like_for_like']:.0f}x** faster ({rows['released']:,.0f} vs "
        f"{rows['runtime_liang2026']:.1f} ms)" in text
    )
    assert f"the ratio is {speed['pairedge_spec']:,.0f}x ({rows['runtime_pairedge']:.1f} ms)" in text
    features = _results("bench_features")
    liang = next(r for r in features["liang2026"] if r["people"] == 100)
    ours = next(r for r in features["pairedge"] if r["people"] == 100)
    assert (
        f"{liang['integral_ms']:.1f} ms/frame for `liang2026` (mask-based reference: about "
        f"{liang['reference_ms'] / 1000:.1f} s), {ours['flow_affine_ms']:.1f} ms/frame for `pairedge` with "
        "flow"
    ) in text


@pytest.mark.slow
def test_demo_metrics_quoted_are_what_the_demo_prints(tmp_path: Path) -> None:
    """`pairedge demo` is deterministic apart from its timings: the README quotes its metrics."""
    import json

    done = subprocess.run(
        [sys.executable, "-m", "pairedge.apps.cli", "demo", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    m = json.loads((tmp_path / "metrics.json").read_text())["summary"]
    text = _flat()
    assert (
        f"stage-1 pair F1 {m['pair_f1']:.2f} (precision {m['pair_precision']:.2f}, recall "
        f"{m['pair_recall']:.2f}), stage-2 accuracy {m['accuracy']:.2f} / MPCA {m['mpca']:.2f} / macro-F1 "
        f"{m['macro_f1']:.2f}"
    ) in text
    assert f"({m['accuracy_scored']:.2f} on the pairs stage 1 passed" in text
    assert f"group activity accuracy {m['group_activity_accuracy']:.2f}" in text
