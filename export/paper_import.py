"""Import checkpoints saved by the paper's released code (Liang et al. 2026), weights-only, for export.

Formats (SPEC §4):

- stage 1, "adaptive geometric classifier": a state dict with ``feature_biases``, ``feature_scales``,
  ``feature_weights`` (F = 7) and ``classifier.0/3/6.*``; raw liang2026 stage-1 features in, class 1 =
  interacting. (A dict holding that state dict under ``model_state_dict`` is accepted too.) The released
  feature function defaults to ``panoramic=True`` (horizontal distances wrap around) and the released
  training never turns it off, so the import stores ``{"wrap": True}`` as the model's feature config unless
  told otherwise; the runtime applies it.
- stage 2, "geometric MLP": a dict with ``model_state_dict`` (``network.0.proj/fc/bn.*``, ``network.1.*``,
  ``network.2.*``), ``config`` (plain dict) and ``normalization_stats`` = {``mean``, ``std`` (numpy arrays of
  length 10), ``n_samples``}; inputs normalised as ``(x - mean) / (std + 1e-8)``. Classes 0 walking,
  1 standing, 2 sitting together.

Files are read with ``torch.load(..., weights_only=True)`` and an explicit allow-list of the numpy types such
files contain (arrays, dtypes, scalars, under both the numpy 1.x and 2.x module paths). Anything else in the
pickle (code, arbitrary classes) is refused with a :class:`~pairedge.core.errors.ModelError`.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pairedge.core.errors import FormatError, ModelError, PairedgeError
from pairedge.core.features import get_spec
from pairedge.core.labels import PAPER3, STAGE1
from pairedge.export.checkpoint import DEFAULT_THRESHOLDS, Checkpoint
from pairedge.export.models import ModelConfig, build_model, set_normalization

#: The released code normalises stage-2 inputs as (x - mean) / (std + STD_EPS).
STD_EPS = 1e-8


def numpy_allowlist() -> list[Any]:
    """The numpy globals a weights-only load may construct: ndarray, dtype (numeric kinds) and scalars.

    Object dtypes are not allowed, so no array can smuggle pickled Python objects.
    """
    import importlib

    import numpy.dtypes as nd

    try:
        multiarray = importlib.import_module("numpy._core.multiarray")  # numpy >= 2
    except ImportError:  # pragma: no cover - numpy 1.x
        multiarray = importlib.import_module("numpy.core.multiarray")
    entries: list[Any] = [np.ndarray, np.dtype]
    for name in (
        "Float16DType",
        "Float32DType",
        "Float64DType",
        "Int8DType",
        "Int16DType",
        "Int32DType",
        "Int64DType",
        "UInt8DType",
        "UInt16DType",
        "UInt32DType",
        "UInt64DType",
        "BoolDType",
    ):
        entries.append(getattr(nd, name))
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        entries.append((multiarray._reconstruct, f"{module}._reconstruct"))
        entries.append((multiarray.scalar, f"{module}.scalar"))
    return entries


@contextmanager
def folded_warnings(what: str = "torch") -> Iterator[None]:
    """Keep warnings raised inside off stderr; a :class:`~pairedge.core.errors.PairedgeError` raised inside
    gets them folded into its one-line message (``torch warned: ...``).

    ``torch.load`` warns before it fails on a hostile file (e.g. "Detected pickle protocol 4 ..."): printed,
    that is two more stderr lines before the error. On success the warnings are dropped: a weights-only
    load that succeeded loaded tensors and plain containers only.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        except PairedgeError as exc:
            said = _warning_text(caught)
            if not said:
                raise
            raise _with_note(exc, f"{what} warned: {said}") from None


def _warning_text(caught: list[warnings.WarningMessage]) -> str:
    """The distinct warnings of ``caught``, one line, their first sentences only."""
    seen: list[str] = []
    for w in caught:
        text = " ".join(str(w.message).split())
        first = text.split(". ")[0].rstrip(".")[:200]
        if first and first not in seen:
            seen.append(first)
    return "; ".join(seen[:3])


def _with_note(exc: PairedgeError, note: str) -> PairedgeError:
    """A copy of ``exc`` with ``note`` appended to its message (a FormatError keeps its path and record)."""

    if isinstance(exc, FormatError):
        return FormatError(exc.path, f"{exc.problem} ({note})", exc.record)
    try:
        return type(exc)(f"{exc} ({note})")
    except TypeError:  # an error type with another constructor: the message still carries the note
        return ModelError(f"{exc} ({note})")


def safe_load(path: str | Path) -> Any:
    """``torch.load(path, weights_only=True)`` with :func:`numpy_allowlist`; every failure is a ModelError.

    A pickle that needs a class outside the allow-list is *refused* (named in the message); bytes that are
    no checkpoint at all (text, an empty or truncated file) are reported as such.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: checkpoint file not found")
    if path.stat().st_size == 0:
        raise ModelError(f"{path}: empty file, not a PyTorch checkpoint; copy the checkpoint again")
    with folded_warnings("torch.load"):
        return _load(path)


def _load(path: Path) -> Any:
    try:
        with torch.serialization.safe_globals(numpy_allowlist()):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        why = next((ln for ln in lines if "GLOBAL" in ln or "global" in ln), None)
        if why is None:
            raise _not_a_checkpoint(path, exc) from None
        raise ModelError(
            f"{path}: refused to load: the file is not a weights-only checkpoint ({why[:300]}); pairedge "
            "loads tensors, plain containers and numpy arrays only and never unpickles arbitrary objects"
        ) from None
    except (
        Exception
    ) as exc:  # torch raises RuntimeError, KeyError, EOFError, ... on bytes that are no checkpoint
        raise _not_a_checkpoint(path, exc) from None


def _not_a_checkpoint(path: Path, exc: BaseException) -> ModelError:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    # torch's weights-only errors open with a paragraph about torch 2.6; the reason is the line after it
    first = next((ln for ln in lines if not ln.startswith(("Weights only", "Please file"))), "")
    if "zip archive" in first or isinstance(exc, EOFError):
        what = "a corrupt or truncated PyTorch checkpoint"
    else:
        what = "not a PyTorch checkpoint"
    with open(path, "rb") as fh:
        head = fh.read(8)
    return ModelError(
        f"{path}: {what} (torch.load: {type(exc).__name__}: {first[:100]}; the file starts with {head!r}); "
        "pass the .pt/.pth file the released code saved with torch.save"
    )


def file_fingerprint(path: str | Path) -> str:
    """``paper-checkpoint:<sha256 of the file>``."""
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return f"paper-checkpoint:{digest}"


def _state_dict(obj: Any, path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a state dict (optionally under ``model_state_dict``; ``module.`` prefixes dropped)."""
    if isinstance(obj, Mapping) and "model_state_dict" in obj:
        obj = obj["model_state_dict"]
    if not isinstance(obj, Mapping) or not obj:
        raise ModelError(f"{path}: expected a state dict (name -> tensor), got {type(obj).__name__}")
    out: dict[str, torch.Tensor] = {}
    for key, value in obj.items():
        if not isinstance(value, torch.Tensor):
            raise ModelError(
                f"{path}: state dict entry {key!r} is a {type(value).__name__}, expected a tensor"
            )
        out[key.removeprefix("module.")] = value
    return out


def _load_into(
    model: torch.nn.Module, target: torch.nn.Module, state: dict[str, torch.Tensor], path: Path
) -> None:
    """Strict load of ``state`` into ``target`` with a ModelError naming missing / unexpected keys."""
    try:
        target.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        detail = " ".join(str(exc).split())[:400]
        raise ModelError(f"{path}: parameters do not match the released-code layout ({detail})") from None
    model.eval()


def _shape(state: dict[str, torch.Tensor], key: str, path: Path) -> tuple[int, ...]:
    if key not in state:
        raise ModelError(
            f"{path}: expected parameter {key!r} of the released-code layout; found {sorted(state)[:8]}"
        )
    return tuple(state[key].shape)


def _spec_version(name: str) -> str:

    return str(get_spec(name).version)


#: The released stage-1 feature function defaults to ``panoramic=True`` and the released training never
#: turns it off (also for CAD): every released stage-1 checkpoint was trained on wrapped distances.
RELEASED_PANORAMIC = True


def import_paper_stage1(path: str | Path, panoramic: bool = RELEASED_PANORAMIC) -> Checkpoint:
    """Load the paper's stage-1 adaptive geometric classifier as a :class:`Checkpoint` (liang2026 spec).

    Args:
        path: the released code's state dict file.
        panoramic: the wrap setting the checkpoint was trained with, stored in the exported model's feature
            config (``extra["feature_config"] = {"wrap": panoramic}``) so the runtime computes the same
            features. Default True, as the released training always does; pass False only for a checkpoint
            you trained yourself with ``panoramic=False``.
    """
    if not isinstance(panoramic, bool):
        raise ModelError(f"panoramic: expected True or False, got {panoramic!r}")
    path = Path(path)
    state = _state_dict(safe_load(path), path)
    f = _shape(state, "feature_biases", path)[0]
    hidden = (_shape(state, "classifier.0.weight", path)[0], _shape(state, "classifier.3.weight", path)[0])
    classes = _shape(state, "classifier.6.weight", path)[0]
    if classes != 2:
        raise ModelError(f"{path}: stage 1 must have 2 outputs (not / interacting), got {classes}")
    config = ModelConfig("paper_adaptive_geometric", f, 2, hidden=hidden, dropout=0.1)
    model = build_model(config)
    _load_into(model, model, {**state, "norm.mean": torch.zeros(f), "norm.std": torch.ones(f)}, path)
    return Checkpoint(
        model=model,
        config=config,
        stage=1,
        labels=STAGE1.classes,
        feature_spec="liang2026",
        feature_spec_version=_spec_version("liang2026"),
        thresholds=dict(DEFAULT_THRESHOLDS),
        data_fingerprint=file_fingerprint(path),
        label_set=STAGE1.name,
        extra={
            "source": "paper released code, stage 1 adaptive geometric classifier",
            "feature_config": {"wrap": panoramic},
        },
    )


def _normalisation(obj: Mapping[str, Any], f: int, path: Path) -> tuple[np.ndarray, np.ndarray, Any]:
    stats = obj.get("normalization_stats")
    if not isinstance(stats, Mapping) or "mean" not in stats or "std" not in stats:
        raise ModelError(f"{path}: expected normalization_stats = {{mean, std, n_samples}} in the checkpoint")
    mean = np.asarray(stats["mean"], dtype=np.float64).reshape(-1)
    std = np.asarray(stats["std"], dtype=np.float64).reshape(-1)
    if mean.shape != (f,) or std.shape != (f,) or not (np.isfinite(mean).all() and np.isfinite(std).all()):
        raise ModelError(
            f"{path}: expected finite normalisation mean/std of length {f}, got {mean.shape}/{std.shape}"
        )
    n = stats.get("n_samples")
    return mean, std + STD_EPS, int(n) if isinstance(n, int | np.integer | float) else None


def _jsonable(config: Any) -> dict[str, Any]:
    """The plain-dict ``config`` of a checkpoint, reduced to what JSON can hold."""
    if not isinstance(config, Mapping):
        return {}
    return json.loads(json.dumps({str(k): v for k, v in config.items()}, default=lambda v: repr(v)))


def import_paper_stage2(path: str | Path, labels: tuple[str, ...] | None = None) -> Checkpoint:
    """Load the paper's stage-2 geometric MLP (with its normalisation statistics) as a :class:`Checkpoint`.

    Args:
        path: the released code's ``.pt`` / ``.pth`` file.
        labels: class names; default PAPER3 (walking / standing / sitting together) for 3 outputs.
    """
    path = Path(path)
    obj = safe_load(path)
    if not isinstance(obj, Mapping) or "model_state_dict" not in obj:
        raise ModelError(f"{path}: expected a dict with model_state_dict, config and normalization_stats")
    state = _state_dict(obj, path)
    blocks = sorted({int(k.split(".")[1]) for k in state if k.startswith("network.") and ".fc." in k})
    if not blocks:
        raise ModelError(f"{path}: no network.N.fc.* parameters: not the released stage-2 geometric MLP")
    widths = [_shape(state, f"network.{i}.fc.weight", path) for i in blocks]
    f, hidden = widths[0][1], tuple(w[0] for w in widths)
    classes = _shape(state, f"network.{len(blocks)}.weight", path)[0]
    if labels is None:
        if classes != len(PAPER3):
            raise ModelError(f"{path}: {classes} classes; pass the label set (e.g. --labels cad8)")
        labels = PAPER3.classes
    if len(labels) != classes:
        raise ModelError(f"{path}: the model has {classes} outputs but {len(labels)} labels were given")
    mean, divisor, n_samples = _normalisation(obj, f, path)
    config = ModelConfig("residual_mlp", f, classes, hidden=hidden, dropout=0.3)
    model = build_model(config)
    _load_into(model, model.network, {k.removeprefix("network."): v for k, v in state.items()}, path)
    set_normalization(model, mean, divisor)
    return Checkpoint(
        model=model,
        config=config,
        stage=2,
        labels=tuple(labels),
        feature_spec="liang2026",
        feature_spec_version=_spec_version("liang2026"),
        thresholds=dict(DEFAULT_THRESHOLDS),
        data_fingerprint=file_fingerprint(path),
        label_set=PAPER3.name if tuple(labels) == PAPER3.classes else "",
        extra={
            "source": "paper released code, stage 2 geometric MLP",
            "normalization": "(x - mean) / (std + 1e-8); norm_std holds std + 1e-8",
            "n_samples": n_samples,
            "paper_config": _jsonable(obj.get("config")),
        },
    )
