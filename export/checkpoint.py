"""Checkpoints: a plain state dict (``model.pt``, loaded with ``weights_only=True``) + a JSON config.

``model.json`` holds everything needed to rebuild the model and to write its ONNX metadata:

``{"format": "pairedge-checkpoint", "format_version": 1, "model": ModelConfig, "stage", "labels",
"label_set", "feature_spec", "feature_spec_version", "feature_names", "norm_mean", "norm_std", "thresholds",
"data_fingerprint", "pairedge_version", "train": TrainConfig, "metrics": {...}}``
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pairedge.errors import ModelError
from pairedge.export.models import ModelConfig, build_model, get_normalization
from pairedge.modelmeta import ModelMetadata
from torch import nn

FORMAT = "pairedge-checkpoint"
FORMAT_VERSION = 1
WEIGHTS = "model.pt"
CONFIG = "model.json"
DEFAULT_THRESHOLDS = {"p_interact": 0.5, "tau_group": 0.5}


@dataclass(frozen=True)
class Checkpoint:
    """A model with what it declares about itself. ``model`` is in eval mode."""

    model: nn.Module
    config: ModelConfig
    stage: int
    labels: tuple[str, ...]
    feature_spec: str
    feature_spec_version: str
    thresholds: dict[str, float] = field(default_factory=dict)
    data_fingerprint: str = ""
    label_set: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def metadata(self) -> ModelMetadata:
        """The ONNX metadata of this model (normalisation statistics read from its buffers)."""
        from pairedge import __version__

        mean, std = get_normalization(self.model)
        return ModelMetadata(
            stage=self.stage,
            feature_spec=self.feature_spec,
            feature_spec_version=self.feature_spec_version,
            labels=self.labels,
            num_features=self.config.num_features,
            norm_mean=tuple(float(v) for v in mean),
            norm_std=tuple(float(v) for v in std),
            thresholds=dict(self.thresholds),
            architecture=self.config.architecture,
            data_fingerprint=self.data_fingerprint,
            pairedge_version=__version__,
            extra={"label_set": self.label_set, **self.extra},
        )


def save_checkpoint(ckpt: Checkpoint, out_dir: str | Path, info: dict[str, Any] | None = None) -> Path:
    """Write ``model.pt`` (state dict) and ``model.json`` into ``out_dir``; returns the weights path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt.model.state_dict(), out / WEIGHTS)
    meta = ckpt.metadata()
    doc = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model": ckpt.config.to_dict(),
        "stage": ckpt.stage,
        "labels": list(ckpt.labels),
        "label_set": ckpt.label_set,
        "feature_spec": ckpt.feature_spec,
        "feature_spec_version": ckpt.feature_spec_version,
        "norm_mean": list(meta.norm_mean),
        "norm_std": list(meta.norm_std),
        "thresholds": dict(ckpt.thresholds),
        "data_fingerprint": ckpt.data_fingerprint,
        "pairedge_version": meta.pairedge_version,
        "extra": ckpt.extra,
        **(info or {}),
    }
    (out / CONFIG).write_text(json.dumps(doc, indent=2) + "\n")
    return out / WEIGHTS


def _paths(path: str | Path) -> tuple[Path, Path]:
    """(weights, config) of a checkpoint folder or of its weights file."""
    p = Path(path)
    if p.is_dir():
        return p / WEIGHTS, p / CONFIG
    return p, p.parent / CONFIG


def load_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """``torch.load(path, weights_only=True)``; any pickle beyond tensors is refused with a ModelError."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, AttributeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(
            f"{path}: refused to load: not a plain state dict of tensors ({first}); pairedge never unpickles "
            "arbitrary objects: re-save the weights with torch.save(model.state_dict())"
        ) from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ModelError(f"{path}: expected a state dict (name -> tensor), got {type(state).__name__}")
    return state


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Load a pairedge checkpoint (its folder, or ``model.pt`` with ``model.json`` next to it)."""
    weights, config_path = _paths(path)
    for p, what in ((weights, "weights"), (config_path, "config")):
        if not p.is_file():
            raise ModelError(
                f"{p}: checkpoint {what} not found; a pairedge checkpoint is a folder with {WEIGHTS} and "
                f"{CONFIG} (written by `pairedge train`); for the paper's files use --paper-stage1/--paper-stage2"
            )
    try:
        doc = json.loads(config_path.read_text())
        if doc.get("format") != FORMAT:
            raise ModelError(f"{config_path}: expected format {FORMAT!r}, got {doc.get('format')!r}")
        config = ModelConfig.from_dict(doc["model"])
        model = build_model(config)
        model.load_state_dict(load_state_dict(weights))
        model.eval()
        mean, std = get_normalization(model)
        if not np.allclose(mean, doc["norm_mean"]) or not np.allclose(std, doc["norm_std"]):
            raise ModelError(
                f"{config_path}: normalisation statistics disagree with the weights in {weights}"
            )
        return Checkpoint(
            model=model,
            config=config,
            stage=int(doc["stage"]),
            labels=tuple(doc["labels"]),
            feature_spec=str(doc["feature_spec"]),
            feature_spec_version=str(doc["feature_spec_version"]),
            thresholds={k: float(v) for k, v in doc.get("thresholds", {}).items()},
            data_fingerprint=str(doc.get("data_fingerprint", "")),
            label_set=str(doc.get("label_set", "")),
            extra=dict(doc.get("extra", {})),
        )
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ModelError(
            f"{config_path}: malformed checkpoint config ({type(exc).__name__}: {exc})"
        ) from None
    except RuntimeError as exc:  # load_state_dict: missing / unexpected keys or shape mismatch
        first = str(exc).splitlines()[0]
        raise ModelError(f"{weights}: weights do not match the config in {config_path} ({first})") from None
