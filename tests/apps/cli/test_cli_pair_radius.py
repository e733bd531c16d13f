"""pairedge run --pair-radius: far pairs skipped; a bad radius is one line."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
from pairedge.apps.cli import app
from typer.testing import CliRunner

runner = CliRunner()


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    frames = tmp_path / "frames"
    frames.mkdir()
    for k, image in enumerate(np.random.default_rng(0).integers(0, 255, (3, 240, 640, 3), dtype=np.uint8)):
        cv2.imwrite(str(frames / f"{k:06d}.png"), image)
    det = tmp_path / "det.txt"  # people 1 and 2 side by side, 3 far to the right
    det.write_text(
        "".join(
            f"{f},{i},{x},60,30,80,1,-1,-1,-1\n" for f in range(1, 4) for i, x in ((1, 20), (2, 60), (3, 560))
        )
    )
    return frames, det


def _scored_pairs(out: Path) -> int:
    """Pairs scored over the run (summary.json): 3 frames x the pairs each frame kept."""
    return int(json.loads((out / "summary.json").read_text())["pairs"])


def test_run_pair_radius(tmp_path: Path) -> None:
    frames, det = _inputs(tmp_path)
    base = ["run", str(frames), "--detections", str(det), "--no-video"]
    assert runner.invoke(app, [*base, "--out", str(tmp_path / "all")]).exit_code == 0
    res = runner.invoke(app, [*base, "--pair-radius", "2", "--out", str(tmp_path / "near")])
    assert res.exit_code == 0, res.output
    assert _scored_pairs(tmp_path / "all") == 3 * 3  # (1, 2), (1, 3), (2, 3) in every frame
    assert _scored_pairs(tmp_path / "near") == 3 * 1  # only (1, 2): 40 px apart, 80 px tall
    bad = runner.invoke(app, [*base, "--pair-radius", "0", "--out", str(tmp_path / "bad")])
    lines = bad.stderr.splitlines()
    assert bad.exit_code == 1 and len(lines) == 1 and "pair_radius" in lines[0]
