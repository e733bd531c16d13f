"""PyTorch classifiers for the two stages. Every model takes RAW features and z-scores them first.

The z-scoring statistics are registered buffers (``norm.mean``, ``norm.std``), so an exported ONNX graph is
self-contained: the runtime feeds raw feature values (see :mod:`pairedge.core.modelmeta`). All models map
``features`` (pairs, F) float32 -> ``logits`` (pairs, C) float32.

Architectures (names used in configs, checkpoints and ONNX metadata):

- ``stage1_mlp``: small MLP, F -> hidden... -> C (stage 1: C = 2, class 1 = interacting).
- ``relation_net``: input laid out as ``[a (Fp), b (Fp), pair (Fq)]``; a shared person encoder gives
  ``ea, eb``, a pair encoder gives ``ep``; a head classifies ``[ea, eb, |ea - eb|, ea * eb, ep]``.
- ``residual_mlp``: the paper's stage-2 geometric MLP, ``network`` = Sequential(ResidualBlock(F, 256),
  ResidualBlock(256, 128), Linear(128, C)) with BatchNorm, SiLU, dropout 0.3.
- ``paper_adaptive_geometric``: the paper's stage-1 "adaptive geometric classifier",
  ``classifier(((x + feature_biases) * feature_scales) * feature_weights)``.

The ``network`` / ``classifier`` / ``feature_*`` sub-module names reproduce the paper's released code, so its
checkpoints load into ``model.network`` / the model itself (see :mod:`pairedge.export.paper_import`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from pairedge.core.errors import InputError
from torch import nn

ARCHITECTURES = ("stage1_mlp", "relation_net", "residual_mlp", "paper_adaptive_geometric")
#: Architectures whose hidden activations can be bounded (:attr:`ModelConfig.activation_bound`).
BOUNDED_ARCHITECTURES = ("stage1_mlp", "relation_net")


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a classifier; JSON-serialisable (stored next to every checkpoint).

    Attributes:
        architecture: one of :data:`ARCHITECTURES`.
        num_features: F, the input width.
        num_classes: C, the number of logits.
        hidden: hidden widths (stage1_mlp: the MLP; residual_mlp: the residual blocks;
            relation_net: ``(encoder width, head width)``; paper_adaptive_geometric: the classifier).
        dropout: dropout probability (inactive in eval mode and in the exported graph).
        person_features: Fp, per-person width (relation_net only).
        pair_features: Fq, pair width (relation_net only); ``2 * Fp + Fq`` must equal F.
        ignored_features: input columns the model never sees: their z-scores are multiplied by 0 inside the
            graph, so the input layout (and the runtime's feature extraction) stays the spec's.
        input_squash: ``c``: beyond each column's knee (its training rows' :data:`KNEE_QUANTILE` of ``|z|``)
            a z-score grows as ``knee + c * log1p((|z| - knee) / c)`` inside the graph (:class:`Standardize`);
            None: the plain z-scores.
        activation_bound: ``b``: every hidden activation is ``min(max(x, 0), b)`` (ONNX ``Clip``) instead
            of a ReLU (``stage1_mlp``, ``relation_net``): each hidden int8 range is at most ``b`` by
            construction and a relation network's product ``ea * eb`` at most ``b**2``, whatever row comes
            in; None: ReLU.
    """

    architecture: str
    num_features: int
    num_classes: int
    hidden: tuple[int, ...] = ()
    dropout: float = 0.1
    person_features: int = 0
    pair_features: int = 0
    ignored_features: tuple[int, ...] = ()
    input_squash: float | None = None
    activation_bound: float | None = None

    def __post_init__(self) -> None:
        bound = self.activation_bound
        if bound is not None and (
            isinstance(bound, bool) or not isinstance(bound, int | float) or not 0.01 <= bound <= 100
        ):
            raise InputError(f"model config: activation_bound must be None or in [0.01, 100], got {bound!r}")
        if bound is not None and self.architecture not in BOUNDED_ARCHITECTURES:
            raise InputError(
                f"model config: activation_bound applies to {BOUNDED_ARCHITECTURES}, not "
                f"{self.architecture!r}"
            )
        squash = self.input_squash
        if squash is not None and (
            isinstance(squash, bool) or not isinstance(squash, int | float) or not 0.1 <= squash <= 100
        ):
            raise InputError(
                f"model config: input_squash must be None or a scale in [0.1, 100] std, got {squash!r}"
            )
        if self.architecture not in ARCHITECTURES:
            raise InputError(
                f"model config: unknown architecture {self.architecture!r}; expected one of {ARCHITECTURES}"
            )
        if self.num_features < 1 or self.num_classes < 2:
            raise InputError(
                f"model config: expected num_features >= 1 and num_classes >= 2, "
                f"got {self.num_features} and {self.num_classes}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise InputError(f"model config: dropout must be in [0, 1), got {self.dropout}")
        ignored = tuple(sorted({int(i) for i in self.ignored_features}))
        if ignored and not (0 <= ignored[0] and ignored[-1] < self.num_features):
            raise InputError(
                f"model config: ignored_features must be column indices in [0, {self.num_features}), got "
                f"{ignored}"
            )
        if len(ignored) >= self.num_features:
            raise InputError("model config: every input column is ignored; keep at least one")
        object.__setattr__(self, "ignored_features", ignored)
        if self.architecture == "relation_net":
            fp, fq = self.person_features, self.pair_features
            if fp < 1 or fq < 0 or 2 * fp + fq != self.num_features:
                raise InputError(
                    f"relation_net: expected 2 * person_features + pair_features == num_features, got "
                    f"2 * {fp} + {fq} != {self.num_features}; fix the feature layout [a (Fp), b (Fp), pair "
                    "(Fq)]"
                )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["hidden"] = list(self.hidden)
        out["ignored_features"] = list(self.ignored_features)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["hidden"] = tuple(int(h) for h in known.get("hidden", ()))
        known["ignored_features"] = tuple(int(i) for i in known.get("ignored_features", ()))
        return cls(**known)


DEFAULT_HIDDEN: dict[str, tuple[int, ...]] = {
    "stage1_mlp": (64, 32),
    "relation_net": (64, 128),
    "residual_mlp": (256, 128),
    "paper_adaptive_geometric": (32, 16),
}


#: The knee of the input squash: this quantile of a column's ``|z|`` over the training rows (at least
#: :data:`MIN_KNEE`). 1.0, the largest: every training row is left exactly as it is, so training is unchanged
#: and only rows beyond anything the model saw are bounded. The 0.999 quantile was tried and rejected: it
#: moved stage 2's held-out moving MPCA by -4.6 points and PETS walking/standing agreement from 0.95 to 0.63.
KNEE_QUANTILE, MIN_KNEE = 1.0, 1.0


class Standardize(nn.Module):
    """``(x - mean) / std`` with the statistics as buffers, optionally squashed beyond a knee. x: (N, F)
    float32.

    With ``squash`` (``c``, in standard deviations) each column has a knee (buffer ``knee``, (F,), recorded
    in the model: its training rows' :data:`KNEE_QUANTILE` of ``|z|``, :meth:`set_knee`). Inside it a
    z-score is unchanged; beyond it it grows logarithmically::

        z' = sign(z) * (min(|z|, knee) + c * log1p(max(|z| - knee, 0) / c))

    monotone, with a continuous slope, so a row beyond anything in training (a detector glitch, a box jump on
    real video: hundreds of std) reaches the network, and every precision's first quantized layer, a few units
    beyond the knee instead of hundreds: fp32, fp16 and int8 all see the same bounded input (the squash is
    part of the ONNX graph), and every row inside the training range sees its plain z-scores. With ``ignored``
    columns the result is multiplied by a 0/1 mask (0 there): those inputs cannot influence the model,
    whatever their values. The mask follows from the model config, so it is not part of the state dict.
    """

    mean: torch.Tensor
    std: torch.Tensor
    keep: torch.Tensor | None
    knee: torch.Tensor

    def __init__(self, num_features: int, ignored: Sequence[int] = (), squash: float | None = None) -> None:
        super().__init__()
        self.squash = squash
        self.register_buffer("mean", torch.zeros(num_features))
        self.register_buffer("std", torch.ones(num_features))
        keep = None
        if len(ignored):
            keep = torch.ones(num_features)
            keep[list(ignored)] = 0.0
        self.register_buffer("keep", keep, persistent=False)
        if squash is not None:  # +inf until set_knee: the plain z-scores
            self.register_buffer("knee", torch.full((num_features,), float("inf")))

    def set_stats(self, mean: np.ndarray | Sequence[float], std: np.ndarray | Sequence[float]) -> None:
        """Set the statistics (F,); ``std`` is the divisor and must be positive and finite."""
        m = torch.as_tensor(np.asarray(mean, dtype=np.float32))
        s = torch.as_tensor(np.asarray(std, dtype=np.float32))
        if m.shape != self.mean.shape or s.shape != self.std.shape:
            raise InputError(
                f"normalisation statistics: expected shape {tuple(self.mean.shape)}, "
                f"got {tuple(m.shape)} and {tuple(s.shape)}"
            )
        if not (torch.isfinite(m).all() and torch.isfinite(s).all() and (s > 0).all()):
            raise InputError("normalisation statistics: expected finite mean and positive finite std")
        self.mean.copy_(m)
        self.std.copy_(s)

    def set_knee(self, X: np.ndarray) -> None:
        """Each column's knee from (N, F) raw training rows: the :data:`KNEE_QUANTILE` of ``|z|``, at least
        :data:`MIN_KNEE` (set the statistics first)."""
        if self.squash is None:
            raise InputError("set_knee: this model has no input squash (ModelConfig.input_squash is None)")
        z = np.abs((np.asarray(X, np.float64) - self.mean.numpy()) / self.std.numpy())
        if z.ndim != 2 or z.shape[1] != len(self.knee) or not len(z):
            raise InputError(f"set_knee: expected (N >= 1, {len(self.knee)}) rows, got {z.shape}")
        knee = np.maximum(
            np.nanquantile(np.where(np.isfinite(z), z, np.nan), KNEE_QUANTILE, axis=0), MIN_KNEE
        )
        self.knee.copy_(torch.as_tensor(np.nan_to_num(knee, nan=MIN_KNEE).astype(np.float32)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = (x - self.mean) / self.std
        if self.squash is not None:
            c = float(self.squash)
            a = torch.abs(z)
            z = torch.sign(z) * (torch.minimum(a, self.knee) + c * torch.log1p(torch.relu(a - self.knee) / c))
        return z if self.keep is None else z * self.keep


def hidden_activation(bound: float | None = None) -> nn.Module:
    """A ReLU, or with ``bound`` the ReLU clipped at it (``nn.Hardtanh(0, bound)``, exported as ``Clip``)."""
    return nn.ReLU() if bound is None else nn.Hardtanh(0.0, float(bound))


def _mlp(widths: Sequence[int], dropout: float, bound: float | None = None) -> nn.Sequential:
    """Linear/activation/dropout stack over ``widths`` (in, h1, ..., out); no activation after the last."""
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        layers.append(nn.Linear(n_in, n_out))
        if i < len(widths) - 2:
            layers.append(hidden_activation(bound))
            layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers)


class Stage1MLP(nn.Module):
    """Small MLP on stage-1 features: (N, F) -> (N, C)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.norm = Standardize(config.num_features, config.ignored_features, config.input_squash)
        self.net = _mlp(
            (config.num_features, *config.hidden, config.num_classes), config.dropout, config.activation_bound
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(self.norm(x))


class RelationNet(nn.Module):
    """Relation network on ``[a (Fp), b (Fp), pair (Fq)]``: head([ea, eb, |ea-eb|, ea*eb, ep]) -> (N, C)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if len(config.hidden) != 2:
            raise InputError(
                f"relation_net: expected hidden = (encoder width, head width), got {config.hidden}"
            )
        enc, head = config.hidden
        self.fp, self.fq = config.person_features, config.pair_features
        self.norm = Standardize(config.num_features, config.ignored_features, config.input_squash)
        bound = config.activation_bound
        self.person = nn.Sequential(
            nn.Linear(self.fp, enc), hidden_activation(bound), nn.Linear(enc, enc), hidden_activation(bound)
        )
        pair_width = enc if self.fq > 0 else 0
        self.pair = (
            nn.Sequential(nn.Linear(self.fq, enc), hidden_activation(bound)) if self.fq > 0 else nn.Identity()
        )
        self.head = nn.Sequential(
            nn.Linear(4 * enc + pair_width, head),
            hidden_activation(bound),
            nn.Dropout(config.dropout),
            nn.Linear(head, config.num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.norm(x)
        ea = self.person(z[:, : self.fp])
        eb = self.person(z[:, self.fp : 2 * self.fp])
        parts = [ea, eb, torch.abs(ea - eb), ea * eb]
        if self.fq > 0:
            parts.append(self.pair(z[:, 2 * self.fp :]))
        return self.head(torch.cat(parts, dim=1))


class ResidualBlock(nn.Module):
    """The released code's block: ``drop(silu(bn(fc(x)))) + proj(x)``; proj = Linear if in != out."""

    def __init__(self, n_in: int, n_out: int, dropout: float) -> None:
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)
        self.bn = nn.BatchNorm1d(n_out)
        self.act = nn.SiLU()
        self.drop = nn.Dropout(dropout)
        self.proj: nn.Module = nn.Linear(n_in, n_out) if n_in != n_out else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.act(self.bn(self.fc(x)))) + self.proj(x)


class ResidualMLP(nn.Module):
    """The paper's stage-2 geometric MLP (10 -> 256 -> 128 -> C); ``network`` keys match its checkpoints."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.norm = Standardize(config.num_features, config.ignored_features, config.input_squash)
        widths = (config.num_features, *config.hidden)
        blocks: list[nn.Module] = [
            ResidualBlock(a, b, config.dropout) for a, b in zip(widths[:-1], widths[1:], strict=True)
        ]
        self.network = nn.Sequential(*blocks, nn.Linear(widths[-1], config.num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(self.norm(x))


class AdaptiveGeometricClassifier(nn.Module):
    """The paper's stage-1 classifier: ``classifier(((z + feature_biases) * feature_scales) *
    feature_weights)``.

    ``z`` is the standardised input (identity statistics for imported paper checkpoints, which feed raw
    features). Keys ``feature_biases``, ``feature_scales``, ``feature_weights``, ``classifier.0/3/6.*``.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        f = config.num_features
        self.norm = Standardize(f, config.ignored_features)
        self.feature_biases = nn.Parameter(torch.zeros(f))
        self.feature_scales = nn.Parameter(torch.ones(f))
        self.feature_weights = nn.Parameter(torch.ones(f))
        self.classifier = _mlp((f, *config.hidden, config.num_classes), config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.norm(x)
        return self.classifier(((z + self.feature_biases) * self.feature_scales) * self.feature_weights)


_BUILDERS: dict[str, type[nn.Module]] = {
    "stage1_mlp": Stage1MLP,
    "relation_net": RelationNet,
    "residual_mlp": ResidualMLP,
    "paper_adaptive_geometric": AdaptiveGeometricClassifier,
}


def with_default_hidden(config: ModelConfig) -> ModelConfig:
    """``config`` with the architecture's default hidden widths when none are given."""
    if config.hidden:
        return config
    data = config.to_dict()
    data["hidden"] = list(DEFAULT_HIDDEN[config.architecture])
    return ModelConfig.from_dict(data)


def build_model(config: ModelConfig) -> nn.Module:
    """Instantiate the classifier described by ``config`` (default hidden widths when empty)."""
    config = with_default_hidden(config)
    return _BUILDERS[config.architecture](config)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return int(sum(p.numel() for p in model.parameters()))


def set_normalization(
    model: nn.Module, mean: np.ndarray, std: np.ndarray, X: np.ndarray | None = None
) -> None:
    """Set the model's z-score statistics (F,) float (``std`` is the divisor) and, for a model with an input
    squash, its knees from the (N, F) raw training rows ``X`` (:meth:`Standardize.set_knee`)."""
    norm = getattr(model, "norm", None)
    if not isinstance(norm, Standardize):
        raise InputError(f"{type(model).__name__} has no Standardize module named 'norm'")
    norm.set_stats(mean, std)
    if norm.squash is not None:
        if X is None:
            raise InputError(
                "set_normalization: a model with an input squash needs its training rows for the knees"
            )
        norm.set_knee(X)


def get_normalization(model: nn.Module) -> tuple[np.ndarray, np.ndarray]:
    """The model's z-score statistics as two (F,) float32 arrays."""
    norm = getattr(model, "norm", None)
    if not isinstance(norm, Standardize):
        raise InputError(f"{type(model).__name__} has no Standardize module named 'norm'")
    return norm.mean.detach().cpu().numpy().copy(), norm.std.detach().cpu().numpy().copy()
