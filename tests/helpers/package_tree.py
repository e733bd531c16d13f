"""The installed layout of pairedge's sources (``sdk/`` is ``pairedge``; ``export/``, ``runtime/`` and
``calibration/`` are its subpackages by ``package-dir``), as a copy of the ``.py`` files that static import
analysis (grimp / import-linter, the ast walk of ``test_layers``) can read as one package."""

from __future__ import annotations

import ast
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


def module_imports(name: str, path: Path, modules: dict[str, Path]) -> list[str]:
    """pairedge modules ``name`` imports anywhere in its file (module level, functions, branches); a name
    that is not a module (``from m import func``) counts as its module. ``if TYPE_CHECKING:`` blocks
    excluded."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if (
                isinstance(child, ast.If)
                and isinstance(child.test, ast.Name)
                and child.test.id == "TYPE_CHECKING"
            ):
                continue
            if isinstance(child, ast.Import):
                found.extend(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.rsplit(".", child.level - 1)[0] if child.level > 1 else package
                    base = f"{up}.{base}" if base else up
                found.extend(
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in child.names
                )
            visit(child)

    visit(ast.parse(path.read_text("utf-8")))
    out = []
    for target in found:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target:
            out.append(target)
    return out
