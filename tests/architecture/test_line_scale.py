"""Line scale of the whole tree: ruff format owns the layout, lines stay within 110 characters.

``pyproject.toml`` sets ``line-length = 110`` and selects E501 with no per-file exception; these tests run
ruff itself (a dev dependency) so that CI, which runs only pytest, enforces both.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 110
#: ``# fmt: skip`` is for a table that reads better as typed; more than this means layout is hand-kept again.
MAX_FMT_SKIPS = 50


def python_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [ROOT / p for p in out.stdout.split() if (ROOT / p).is_file()]


@functools.cache
def tree_lines() -> tuple[tuple[str, int, str], ...]:
    """(path relative to the root, line number, line) of every tracked Python file, read once."""
    return tuple(
        (str(path.relative_to(ROOT)), n, line)
        for path in python_files()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
    )


def ruff() -> list[str]:
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if exe is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    return [exe]


def test_no_line_is_longer_than_the_limit() -> None:
    long = [f"{path}:{n}: {len(line)} characters" for path, n, line in tree_lines() if len(line) > LIMIT]
    assert not long, "lines over 110 characters:\n" + "\n".join(long)


def test_fmt_skip_is_rare() -> None:
    skips = [f"{path}:{n}" for path, n, line in tree_lines() if "fmt: skip" in line or "fmt: off" in line]
    assert len(skips) < MAX_FMT_SKIPS, f"{len(skips)} hand-kept layouts:\n" + "\n".join(skips)


def test_ruff_format_owns_the_layout() -> None:
    out = subprocess.run([*ruff(), "format", "--check", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, f"run `ruff format .`:\n{out.stdout}{out.stderr}"


def test_ruff_lint_passes_with_the_line_limit() -> None:
    out = subprocess.run([*ruff(), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, f"`ruff check .` fails:\n{out.stdout}{out.stderr}"
