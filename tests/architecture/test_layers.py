"""The layers of docs/architecture.md hold: import-linter's contracts (pyproject ``[tool.importlinter]``) are
kept, and an ast walk that counts every import, those inside functions too, finds no cycle between layers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from package_tree import ROOT, copy_tree, module_imports, source_files

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

#: Layers, top to bottom (the order of the import-linter contract).
LAYERS = ("apps", "export", "calibration", "compare", "measure", "runtime", "gpu", "core")


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def _layer_edges() -> dict[tuple[str, str], list[str]]:
    modules = source_files()
    edges: dict[tuple[str, str], list[str]] = {}
    for name, path in modules.items():
        for target in module_imports(name, path, modules):
            a, b = _layer(name), _layer(target)
            if a and b and a != b:
                edges.setdefault((a, b), []).append(f"{name} -> {target}")
    return edges


def test_every_module_belongs_to_a_layer() -> None:
    modules = source_files()
    assert len(modules) > 200
    loose = [m for m in modules if m != "pairedge" and _layer(m) is None]
    assert loose == [], "modules outside the layers (docs/architecture.md)"


def test_no_layer_imports_a_layer_above_it_counting_lazy_imports() -> None:
    upward = {k: v for k, v in _layer_edges().items() if LAYERS.index(k[0]) > LAYERS.index(k[1])}
    assert upward == {}, f"imports up the layers: {upward}"


def test_the_layer_graph_has_no_cycle() -> None:
    graph: dict[str, set[str]] = {layer: set() for layer in LAYERS}
    for a, b in _layer_edges():
        graph[a].add(b)
    seen: dict[str, int] = {}  # 1 on the stack, 2 done

    def cyclic(node: str) -> bool:
        seen[node] = 1
        for nxt in graph[node]:
            if seen.get(nxt) == 1 or (nxt not in seen and cyclic(nxt)):
                return True
        seen[node] = 2
        return False

    assert not any(cyclic(layer) for layer in LAYERS if layer not in seen)


def test_the_walk_sees_lazy_imports() -> None:
    """The walk must count an import inside a function: the CLI imports the runtime only lazily."""
    edges = _layer_edges()
    assert any("pairedge.apps.cli.run" in e for e in edges[("apps", "runtime")])


def test_import_linter_contracts_are_kept(tmp_path: Path) -> None:
    pytest.importorskip("importlinter", reason="import-linter comes with the dev extra")
    copy_tree(tmp_path)
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text("utf-8"))
    contracts = tomllib.loads((tmp_path / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert [c["layers"] for c in contracts if c["type"] == "layers"] == [[f"pairedge.{x}" for x in LAYERS]]
    lint = Path(sys.executable).with_name("lint-imports")
    res = subprocess.run(
        [str(lint), "--no-cache"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert f"Contracts: {len(contracts)} kept, 0 broken." in res.stdout


def test_docs_architecture_matches_the_tree() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    modules = source_files()
    for layer in LAYERS:
        assert f"pairedge.{layer}" in doc
        # every subpackage of a layer, and every module of sdk/apps, is named in the map
        children = {
            m.split(".")[2] for m in modules if m.startswith(f"pairedge.{layer}.") and len(m.split(".")) > 3
        }
        if layer == "apps":
            children |= {m.split(".")[2] for m in modules if m.startswith("pairedge.apps.")}
        missing = sorted(c for c in children if c not in doc)
        assert missing == [], f"docs/architecture.md does not name {layer}'s {missing}"
    for folder in (
        "sdk/core",
        "sdk/gpu",
        "sdk/measure",
        "sdk/compare",
        "sdk/apps",
        "tests/helpers",
        "tests/benchmarks",
    ):
        assert folder.split("/")[-1] in doc and (ROOT / folder).is_dir()
    for tests_dir in ("core", "gpu", "runtime", "measure", "compare", "export", "calibration", "apps"):
        assert (ROOT / "tests" / tests_dir).is_dir() and f"tests/{tests_dir}/" in doc
