"""Imports at the module head: a pairedge import inside a function is kept only where it must be: a heavy or
optional module (torch-side ``pairedge.export``, TensorRT, CUDA, a compiled extension) that a light one uses.

The count is a ratchet: 329 such imports before they were hoisted, 23 after (the last import cycles broken);
it may go down, not up."""

from __future__ import annotations

import ast

from package_tree import source_files

#: The most in-function pairedge imports the package may hold.
CEILING = 23


def in_function_imports() -> list[str]:
    """``module:line`` of every ``import pairedge...`` / ``from pairedge... import`` inside a function."""
    out = []
    for name, path in source_files().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if (
                    isinstance(node, ast.ImportFrom)
                    and node.level == 0
                    and (node.module or "").startswith("pairedge")
                ):
                    out.append(f"{name}:{node.lineno}")
                elif isinstance(node, ast.Import) and any(a.name.startswith("pairedge") for a in node.names):
                    out.append(f"{name}:{node.lineno}")
    return sorted(set(out))


def test_in_function_imports_stay_few() -> None:
    found = in_function_imports()
    assert len(found) <= CEILING, (
        f"{len(found)} in-function pairedge imports (ceiling {CEILING}):\n" + "\n".join(found)
    )
