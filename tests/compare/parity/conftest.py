"""Shared fixtures of the parity tests: one real pack of the bundled model and candidate model folders."""

from __future__ import annotations

from pathlib import Path

import pytest
from pairedge.core.bundled import default_model_dir

FRAMES = 12


@pytest.fixture(scope="session")
def pack_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 12-frame pack of the bundled model on simulator scene static:0 (ground-truth boxes)."""
    from pairedge.apps.evaluation.sources import parse_scene
    from pairedge.compare.parity.build import build_pack

    out = tmp_path_factory.mktemp("pack") / "pack.npz"
    build_pack(default_model_dir(), parse_scene("static:0", FRAMES), out, frames=FRAMES)
    return out
