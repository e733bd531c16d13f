"""Shared fixtures: the real third-party data lives in ../shared/data and is never copied into the repo."""

from __future__ import annotations

import os
import resource
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Shared test helpers (toy models, scenes, the package tree) are plain modules in tests/helpers/.
sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of ../shared/data; skips the test with the reason when it is absent (e.g. a user's machine)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not present at {SHARED_DATA} (see shared/data/README.md)")
    return SHARED_DATA


@pytest.fixture()
def bounded() -> Iterator[None]:
    """Fail instead of hanging (a FIFO opened) or eating the machine (/dev/zero read whole): 20 s of wall
    time and 2 GiB more address space than the process has now."""

    def timeout(signum: int, frame: object) -> None:
        raise TimeoutError("blocked: a FIFO or device was opened")

    size = next(
        int(ln.split()[1]) * 1024
        for ln in Path("/proc/self/status").read_text().splitlines()
        if ln.startswith("VmSize:")
    )
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = size + (2 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    old = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(20)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture()
def non_regular() -> Callable[[Path, str], Path]:
    """``non_regular(path, kind)``: ``path`` made a FIFO (``"fifo"``), a symlink to /dev/zero
    (``"dev-zero"``) or a folder (``"folder"``); returns ``path``."""
    return _make_non_regular


def _make_non_regular(path: Path, kind: str) -> Path:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    else:
        raise ValueError(kind)
    return path
