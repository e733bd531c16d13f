"""Shared fixtures: the real third-party data lives in ../shared/data and is never copied into the repo."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of ../shared/data; skips the test with the reason when it is absent (e.g. a user's machine)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not present at {SHARED_DATA} (see shared/data/README.md)")
    return SHARED_DATA
