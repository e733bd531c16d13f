"""Shared helpers of the training benchmarks: environment record, evaluation, JSON + Markdown output."""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_DATA = ROOT.parent / "shared" / "data"


def environment() -> dict[str, Any]:
    """Versions and machine facts recorded with every result."""
    import onnxruntime
    import torch
    from pairedge.core.version import __version__

    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "onnxruntime": onnxruntime.__version__,
        "numpy": np.__version__,
        "pairedge": __version__,
    }


def evaluate(model: Any, X: np.ndarray, y: np.ndarray, labels: tuple[str, ...]) -> dict[str, Any]:
    """Pairwise-protocol metrics of ``model`` (torch, eval mode) on raw features X (N, F), labels y (N,)."""
    from pairedge.export.evaluation import classification_metrics
    from pairedge.export.train import predict_logits

    return classification_metrics(y, predict_logits(model, X).argmax(1), labels)


def headline(m: dict[str, Any]) -> str:
    return f"accuracy {m['accuracy']:.3f}, MPCA {m['mpca']:.3f}, macro-F1 {m['macro_f1']:.3f} (n = {m['n']})"


def write(name: str, payload: dict[str, Any], markdown: str, out: Path = RESULTS) -> tuple[Path, Path]:
    """Write ``<name>.json`` and ``<name>.md`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    j, m = out / f"{name}.json", out / f"{name}.md"

    def clean(v: Any) -> Any:
        if isinstance(v, float) and not np.isfinite(v):
            return None
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        if isinstance(v, np.generic):
            return clean(v.item())
        if isinstance(v, np.ndarray):
            return clean(v.tolist())
        return v

    j.write_text(json.dumps(clean(payload), indent=2) + "\n")
    m.write_text(markdown.rstrip() + "\n")
    return j, m
