"""Packaging contract: the wheel holds every subpackage, the runtime never imports torch, lint rules hold."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (JetPack 6)
    import tomli as tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _declared_packages() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["setuptools"]["packages"]


def _package_dirs() -> dict[str, Path]:
    """Every folder with an __init__.py under the four mapped roots, as dotted names."""
    roots = {
        "sdk": "pairedge",
        "export": "pairedge.export",
        "runtime": "pairedge.runtime",
        "calibration": "pairedge.calibration",
    }
    found: dict[str, Path] = {}
    for folder, dotted in roots.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            name = ".".join([dotted, *rel.parts]) if rel.parts else dotted
            found[name] = init.parent
    return found


def test_every_subpackage_is_declared() -> None:
    missing = sorted(set(_package_dirs()) - set(_declared_packages()))
    assert not missing, f"add these to [tool.setuptools] packages in pyproject.toml: {missing}"


@pytest.mark.slow
def test_wheel_contains_every_subpackage(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", "out", "*.so"
        ),
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(src)],
        check=True,
    )
    (wheel,) = (tmp_path / "dist").glob("pairedge-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for package in _declared_packages():
        init = package.replace(".", "/") + "/__init__.py"
        assert init in names, f"{init} missing from {wheel.name}"
    assert "pairedge/py.typed" in names
    for name in (
        "stage1.onnx",
        "stage2.onnx",
        "stage1.int8.onnx",
        "stage2.int8.onnx",
        "recipe.json",
        "manifest.json",
    ):
        assert f"pairedge/models/default/{name}" in names, name
    for name in ("yolox_nano.onnx", "yolox_nano.fp16.onnx", "manifest.json", "LICENSE", "PROVENANCE.md"):
        assert f"pairedge/models/detectors/yolox_nano/{name}" in names, (
            name
        )  # the bundled detector and its licence
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)
    if shutil.which(
        (sysconfig.get_config_var("CC") or "cc").split()[0]
    ):  # the optional C extension (setup.py)
        assert any(n.startswith("pairedge/core/features/_pairkernel.") for n in names), (
            "compiled pair block missing"
        )


def test_runtime_import_does_not_import_torch() -> None:
    code = (
        "import sys, pairedge, pairedge.runtime, pairedge.apps.cli, pairedge.measure.metrics;"
        "bad = sorted(m for m in ('torch', 'tensorrt', 'pycuda') if m in sys.modules);"
        "print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"importing the runtime pulled in: {out}"


def test_ruff_lint_passes() -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff not installed (pip install -e '.[dev]')")
    result = subprocess.run([ruff, "check", str(ROOT)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_bans_module_level_torch_outside_export(tmp_path: Path) -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff not installed (pip install -e '.[dev]')")
    bad = ROOT / "runtime" / "_ruff_probe_tmp.py"
    bad.write_text("import torch\n\n\ndef f():\n    return torch\n")
    try:
        result = subprocess.run(
            [ruff, "check", "--no-cache", str(bad)], capture_output=True, text=True, cwd=ROOT
        )
    finally:
        bad.unlink()
    assert result.returncode != 0 and "TID253" in result.stdout
