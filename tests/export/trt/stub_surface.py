"""The TensorRT Python API surface recorded in the ``tensorrt-stubs`` package (stubs generated from the real
bindings), as ``{"Class": [members], "Class.Nested": [...], "": [module-level names]}``.

The stubs cannot be installed into the project's environment (the package depends on ``tensorrt``, and its
``tensorrt/__init__.pyi`` would make ``import tensorrt`` succeed as an empty namespace package), so the
surface is extracted once into ``data/tensorrt-<version>-surface.json`` and committed. Regenerate it::

    pip download --no-deps tensorrt-stubs==10.13.0.35.1 -d /tmp/trtstubs
    python tests/export/trt/stub_surface.py /tmp/trtstubs/tensorrt_stubs-10.13.0.35.1-py3-none-any.whl

The .pyi has parameters named ``in`` (a keyword) and signatures ``ast`` rejects; signatures are replaced by
``(*args, **kwargs)`` before parsing (only names are kept).
"""

from __future__ import annotations

import ast
import json
import re
import sys
import zipfile
from pathlib import Path

DATA = Path(__file__).with_name("data")


def extract(pyi_text: str) -> dict[str, list[str]]:
    """Class -> member names (methods, properties, annotated attributes, enum members), nested classes too."""
    # Only names matter: replace every (one-line) signature, which also drops the `in` parameters and the
    # "non-default argument follows default argument" signatures that ast rejects.
    text = re.sub(r"^(\s*def \w+)\(.*\)(\s*->.*)?:\s*$", r"\1(*args, **kwargs):", pyi_text, flags=re.M)
    tree = ast.parse(text)
    surface: dict[str, set[str]] = {"": set()}

    def visit_class(node: ast.ClassDef, prefix: str) -> None:
        name = f"{prefix}{node.name}"
        members = surface.setdefault(name, set())
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                members.add(item.name)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                members.add(item.target.id)
            elif isinstance(item, ast.Assign):
                members.update(t.id for t in item.targets if isinstance(t, ast.Name))
            elif isinstance(item, ast.ClassDef):
                members.add(item.name)
                visit_class(item, name + ".")

    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            surface[""].add(node.name)
            visit_class(node, "")
        elif isinstance(node, ast.FunctionDef):
            surface[""].add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            surface[""].add(node.target.id)
    return {k: sorted(v) for k, v in sorted(surface.items())}


def from_wheel(wheel: Path) -> tuple[str, dict[str, list[str]]]:
    """(TensorRT version, surface) of a tensorrt-stubs wheel: the bindings' classes + the package's names."""
    with zipfile.ZipFile(wheel) as zf:
        bindings = zf.read("tensorrt_bindings/tensorrt.pyi").decode()
        package = zf.read("tensorrt/__init__.pyi").decode()
    surface = extract(bindings)
    version = re.search(r"__version__: str = '([^']+)'", package)
    exported = re.search(r"__all__ = \[([^\]]*)\]", package)
    names = set(surface[""])
    if exported:
        names.update(re.findall(r"'([^']+)'", exported.group(1)))
    names.add("__version__")
    surface[""] = sorted(names)
    return (version.group(1) if version else "unknown"), surface


def load(version: str = "10.13.0.35") -> dict:
    """``{"source": wheel name, "surface": {class: [members]}}`` as committed in data/."""
    return json.loads((DATA / f"tensorrt-{version}-surface.json").read_text())


if __name__ == "__main__":
    ver, surf = from_wheel(Path(sys.argv[1]))
    out = DATA / f"tensorrt-{ver}-surface.json"
    out.write_text(
        json.dumps({"source": Path(sys.argv[1]).name, "surface": surf}, indent=1, sort_keys=True) + "\n"
    )
    print(f"wrote {out}: {len(surf)} classes")
