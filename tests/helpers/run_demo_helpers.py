"""Shared by ``test_run.py`` and ``test_demo.py``: a toy ``pairedge``-spec model folder and a small
simulated scene on disk (video + MOT / JRDB files)."""

from __future__ import annotations

from pathlib import Path

import cv2
from rt_onnx_models import write_toy_model  # noqa: E402


def toy_model(folder: Path) -> Path:
    """A stage-1 + stage-2 pair of linear ONNX classifiers (``pairedge`` spec, PAPER3 labels) in
    ``folder``."""
    write_toy_model(folder / "stage1.onnx", stage=1, spec_name="pairedge", seed=1)
    write_toy_model(folder / "stage2.onnx", stage=2, spec_name="pairedge", seed=2)
    return folder


def video_frames(path: Path) -> int:
    """Number of frames OpenCV decodes from a video file."""
    capture = cv2.VideoCapture(str(path))
    count = 0
    while capture.read()[0]:
        count += 1
    capture.release()
    return count
