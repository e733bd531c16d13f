"""Shared helpers of the calibration tests: the bundled model and real pair features of a short scene."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
from pairedge.calibration.collect import Collected, collect_scenes
from pairedge.core.bundled import default_model_dir


def model_dir() -> Path:
    return default_model_dir()


@lru_cache(maxsize=1)
def scene_samples() -> Collected:
    """Stage-1/2 samples of two short simulator scenes through the bundled model's pipeline (cached)."""
    return collect_scenes(model_dir(), [("static", (0,)), ("moving", (0,))], frames=90, stride=3)


def save_npz(path: Path, stage: int, **override: object) -> Path:
    """Write the scene samples of ``stage`` as a training-format features file (fields overridable)."""
    from pairedge.core.features import get_spec

    st = scene_samples().stage1 if stage == 1 else scene_samples().stage2
    spec = get_spec("pairedge")
    keep = st.truth >= 0
    fields: dict[str, object] = {
        "X": st.X[keep],
        "y": st.truth[keep],
        "groups": st.group[keep],
        "labels": np.asarray(st.labels),
        "feature_spec": np.asarray("pairedge"),
        "feature_spec_version": np.asarray(str(spec.version)),
        "stage": np.asarray(stage),
    }
    fields.update(override)
    np.savez(path, **fields)  # type: ignore[arg-type]
    return path
