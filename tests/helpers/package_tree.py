"""The installed layout of pairedge's sources (``sdk/`` is ``pairedge``; ``export/``, ``runtime/`` and
``calibration/`` are its subpackages by ``package-dir``), as a copy of the ``.py`` files that static import
analysis (grimp / import-linter, the ast walk of ``test_layers``) can read as one package."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: checkout folder -> its place in the package (the pyproject's package-dir).
PACKAGE_DIR = {"sdk": (), "export": ("export",), "runtime": ("runtime",), "calibration": ("calibration",)}


def source_files() -> dict[str, Path]:
    """Dotted module name -> source file, for every module of the package."""
    out: dict[str, Path] = {}
    for folder, prefix in PACKAGE_DIR.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(("pairedge", *prefix, *parts))] = path
    return out


def copy_tree(dest: Path) -> Path:
    """Copy every module to ``dest/pairedge/...`` as installed; returns ``dest``."""
    for name, path in source_files().items():
        rel = Path(*name.split("."))
        target = dest / rel / "__init__.py" if path.name == "__init__.py" else dest / rel.with_suffix(".py")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return dest
