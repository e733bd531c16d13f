"""Checkpoints: a plain state dict (``model.pt``, loaded with ``weights_only=True``) + a JSON config.

``model.json`` holds everything needed to rebuild the model and to write its ONNX metadata:

``{"format": "pairedge-checkpoint", "format_version": 1, "model": ModelConfig, "stage", "labels",
"label_set", "feature_spec", "feature_spec_version", "feature_names", "norm_mean", "norm_std", "thresholds",
"data_fingerprint", "pairedge_version", "train": TrainConfig, "metrics": {...}}``
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pairedge.core import limits
from pairedge.core.errors import FormatError, ModelError
from pairedge.core.io.textio import read_json
from pairedge.core.modelmeta import ModelMetadata, finite_floats
from pairedge.core.version import __version__
from pairedge.export.models import ModelConfig, build_model, get_normalization
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
    """``torch.load(path, weights_only=True)``; any pickle beyond tensors is refused with a ModelError.

    The file must be a regular file (a FIFO or a device is refused unopened) of at most
    ``pairedge.core.limits.MAX_MODEL_BYTES``.
    """
    try:
        size = limits.regular_file(
            path, f"checkpoint weights ({WEIGHTS}, a state dict)", limits.MAX_MODEL_BYTES
        )
    except FormatError as exc:
        raise ModelError(str(exc)) from None
    if size == 0:
        raise ModelError(
            f"{path}: empty file, not a state dict; re-save it with torch.save(model.state_dict())"
        )
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (
        Exception
    ) as exc:  # torch raises UnpicklingError, RuntimeError, KeyError, EOFError, ... on bad bytes
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        first = next(
            (ln for ln in lines if not ln.startswith(("Weights only", "Please file"))), type(exc).__name__
        )
        raise ModelError(
            f"{path}: refused to load: not a plain state dict of tensors ({type(exc).__name__}: "
            f"{first[:160]}); pairedge never unpickles arbitrary objects: re-save the weights with "
            "torch.save(model.state_dict())"
        ) from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ModelError(f"{path}: expected a state dict (name -> tensor), got {type(state).__name__}")
    return state


def _read_config(config_path: Path) -> dict[str, Any]:
    """``model.json`` as a dict with the keys a checkpoint needs (one-line ModelError otherwise).

    Bounded before parsing: a regular file (a FIFO or a device is refused unopened) of at most
    ``pairedge.core.limits.MAX_SIDECAR_BYTES`` with at most ``MAX_JSON_VALUES`` values, read in chunks.
    """
    try:
        doc = read_json(config_path, f"a pairedge checkpoint config ({CONFIG})", limits.MAX_SIDECAR_BYTES)
    except FormatError as exc:  # not a regular file, too big, bad UTF-8, bad JSON, too long an integer
        where = "" if exc.record is None else f", {exc.record}"
        raise ModelError(
            f"{config_path}: not a readable JSON checkpoint config ({exc.problem}{where})"
        ) from None
    if not isinstance(doc, dict):
        raise ModelError(
            f"{config_path}: expected a JSON object (the checkpoint config `pairedge train` writes), "
            f"got {type(doc).__name__}"
        )
    if doc.get("format") != FORMAT:
        raise ModelError(f"{config_path}: expected format {FORMAT!r}, got {doc.get('format')!r:.60}")
    missing = [
        k for k in ("model", "stage", "labels", "feature_spec", "feature_spec_version") if k not in doc
    ]
    if missing:
        raise ModelError(f"{config_path}: checkpoint config lacks {', '.join(missing)}")
    if not isinstance(doc["model"], dict):
        raise ModelError(f"{config_path}: 'model': expected an object (the model configuration)")
    for key, kind in (("thresholds", dict), ("extra", dict), ("norm_mean", list), ("norm_std", list)):
        if key in doc and not isinstance(doc[key], kind):
            raise ModelError(f"{config_path}: {key!r}: expected a JSON {kind.__name__}, got {doc[key]!r:.80}")
    return doc


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Load a pairedge checkpoint (its folder, or ``model.pt`` with ``model.json`` next to it).

    The config is checked field by field (types, ranges: the same rules as ONNX metadata on load) and the
    weights must be finite; every problem is a one-line ModelError naming the file and the field.
    """
    weights, config_path = _paths(path)
    for p, what in ((weights, "weights"), (config_path, "config")):
        if not p.exists():
            raise ModelError(
                f"{p}: checkpoint {what} not found; a pairedge checkpoint is a folder with {WEIGHTS} and "
                f"{CONFIG} (written by `pairedge train`); for the paper's files use "
                "--paper-stage1/--paper-stage2"
            )
    doc = _read_config(config_path)
    try:
        config = ModelConfig.from_dict(doc["model"])
        model = build_model(config)
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"{config_path}: malformed 'model' config ({type(exc).__name__}: {exc})") from None
    try:
        model.load_state_dict(load_state_dict(weights))
    except RuntimeError as exc:  # load_state_dict: missing / unexpected keys or shape mismatch
        first = str(exc).splitlines()[0]
        raise ModelError(f"{weights}: weights do not match the config in {config_path} ({first})") from None
    model.eval()
    check_finite(model, weights)
    mean, std = get_normalization(model)
    stats = [finite_floats(doc.get(k), k, str(config_path)) for k in ("norm_mean", "norm_std")]
    if any(len(s) != len(mean) for s in stats) or not (
        np.allclose(mean, stats[0]) and np.allclose(std, stats[1])
    ):
        raise ModelError(f"{config_path}: normalisation statistics disagree with the weights in {weights}")
    thresholds = doc.get("thresholds", {})
    ckpt = Checkpoint(
        model=model,
        config=config,
        stage=doc["stage"],
        labels=doc["labels"],
        feature_spec=doc["feature_spec"],
        feature_spec_version=doc["feature_spec_version"],
        thresholds=thresholds,
        data_fingerprint=doc.get("data_fingerprint", ""),
        label_set=doc.get("label_set", ""),
        extra=dict(doc.get("extra", {})),
    )
    meta = ckpt.metadata().validated(str(config_path))  # types and ranges of every field
    for key in ("data_fingerprint", "label_set"):
        if not isinstance(doc.get(key, ""), str):
            raise ModelError(f"{config_path}: {key!r}: expected a string, got {doc[key]!r:.80}")
    return replace(
        ckpt,
        stage=meta.stage,
        labels=meta.labels,
        feature_spec=meta.feature_spec,
        feature_spec_version=meta.feature_spec_version,
        thresholds=dict(meta.thresholds),
    )


def check_finite(model: nn.Module, source: str | Path) -> None:
    """Refuse a model whose parameters or buffers hold NaN or infinity (ModelError naming the tensors)."""
    bad = [
        f"{name} ({int((~torch.isfinite(t)).sum())} of {t.numel()})"
        for name, t in (*model.named_parameters(), *model.named_buffers())
        if t.is_floating_point() and not bool(torch.isfinite(t).all())
    ]
    if bad:
        raise ModelError(
            f"{source}: non-finite weights (NaN or infinity) in {', '.join(bad[:4])}"
            f"{' ...' if len(bad) > 4 else ''}; the training diverged or the file is corrupt: retrain or "
            "export an earlier checkpoint"
        )
