"""The Jetson install's documents, read for the tests: README's "Deploying to a Jetson" section,
docs/jetson.md, their bash blocks as argv lists, pyproject's extras, and the ``pairedge`` (sub)command an argv
runs. Shared by tests/apps/test_jetson_install.py and tests/apps/test_dockerfiles.py."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer.main
from packaging.requirements import Requirement
from pairedge.apps.cli import app

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (JetPack 6)
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
JETSON = ROOT / "install" / "jetson"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]
OPENCV = (
    "opencv-python",
    "opencv-python-headless",
    "opencv-contrib-python",
    "opencv-contrib-python-headless",
)
#: JetPack -> the gpu extra of its CUDA major
GPU_EXTRA = {"jp6": "gpu-cu12", "jp7": "gpu-cu13"}


def readme_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Deploying to a Jetson\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def docs_text() -> str:
    return (ROOT / "docs" / "jetson.md").read_text()


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def commands(block: str) -> list[list[str]]:
    """Each command of a bash block as argv: trailing comments dropped, ``&&`` chains split."""
    out: list[list[str]] = []
    for line in block.splitlines():
        line = re.sub(r"\s+#\s.*$", "", line).strip()
        if not line or line.startswith("#"):
            continue
        for part in line.split("&&"):
            argv = shlex.split(part.replace("<this repository's URL>", "URL"))
            if argv:
                out.append(argv)
    return out


def all_commands() -> list[list[str]]:
    return [
        argv for text in (readme_section(), docs_text()) for b in bash_blocks(text) for argv in commands(b)
    ]


def read_reqs(path: Path) -> dict[str, Requirement]:
    reqs = [
        Requirement(ln.strip())
        for ln in path.read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    return {r.name: r for r in reqs}


def command_of(argv: list[str]):  # type: ignore[no-untyped-def]
    """The (sub)command ``argv`` runs and its remaining words (Typer's click is duck-typed: it may be
    vendored)."""
    cmd = typer.main.get_command(app)
    words = argv[1:]
    while hasattr(cmd, "commands") and words and words[0] in cmd.commands:
        cmd = cmd.commands[words.pop(0)]
    assert not hasattr(cmd, "commands"), f"{' '.join(argv)}: no such pairedge command"
    return cmd, words
