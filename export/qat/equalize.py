"""Range equalisation: every channel of every quantized tensor fills its int8 grid, at no cost in fp32.

TensorRT quantizes activations per tensor: one scale for all the channels of a layer's input. The
channels' *ranges* differ widely (the z-scored inputs: a distance spans +-2 std, a speed with rare fast
walkers +-50; the hidden units of a ReLU network: some fire up to 0.1, others up to 10), so one scale gives
the narrow channels a handful of int8 steps. :func:`equalize` rescales channels where it is exact in fp32:

- **inputs**: each z-scored column is multiplied by ``gain[c]`` inside the normalisation
  (:class:`EqualizedStandardize`) and the first layers' weight columns by ``1 / gain[c]``;
- **hidden units** (cross-layer equalisation, Nagel et al. 2019; ReLU models only: a bounded activation
  ``min(max(x, 0), b)`` is not homogeneous, and bounded already): a ReLU is positively homogeneous, so unit
  ``k`` of a layer can be scaled by ``s[k] > 0`` (its weight row and bias) and the next layer's weight
  column divided by ``s[k]``; a relation network's head reads ``ea``, ``eb``, ``|ea - eb|`` (scaled by
  ``s``) and ``ea * eb`` (scaled by ``s**2``), and its columns are divided accordingly.

``s[k] = (1 / range[k]) ** strength``, ``range[k]`` a high percentile of the channel's magnitudes on
training rows: ``strength`` 1 gives every channel the range 1, 0.5 shares the spread between the tensor
and the next layer's weights (whose per-channel int8 grid then sees the spread). A relation network's two
persons share one encoder, so their input columns share one gain. Per-channel weight quantization is
unchanged by the row scaling; the per-tensor activation ranges are calibrated afterwards.

The same homogeneity bounds the hidden units at the source (:func:`unit_bounds`, :func:`bound_units`):
every unit clipped at a percentile of its own training outputs, ``min(relu(x), c)``, is rewritten exactly as
``c * min(relu(x / c), 1)``, a model of the same architecture with ``activation_bound=1`` whose every hidden
value lies in ``[0, 1]``, each unit filling the same range: the fp32 model changes only on the rows beyond a
unit's percentile, and every per-tensor int8 grid of a hidden layer serves all its units alike.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from pairedge.core.errors import ModelError
from pairedge.export.models import RelationNet, Stage1MLP, Standardize
from pairedge.export.qat.fake import mse_range
from torch import nn

#: Bounds of every gain (a channel that never fires, or a constant column, keeps a bounded factor).
MIN_GAIN, MAX_GAIN = 1e-2, 1e2
#: Rows used to measure channel ranges (evenly subsampled above it).
RANGE_ROWS = 100_000


class EqualizedStandardize(Standardize):
    """``(x - mean) / std * gain``: the z-scoring (and its squashing) followed by the per-column input gains
    (F,)."""

    gain: torch.Tensor

    def __init__(self, norm: Standardize, gain: np.ndarray) -> None:
        super().__init__(len(norm.mean), squash=norm.squash)
        if norm.keep is not None:
            raise ModelError("range equalisation: models with ignored feature columns are not supported")
        self.mean.copy_(norm.mean)
        self.std.copy_(norm.std)
        if norm.squash is not None:
            self.knee.copy_(norm.knee)
        self.register_buffer("gain", torch.from_numpy(np.asarray(gain, np.float32)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * self.gain


@dataclass(frozen=True)
class Link:
    """Hidden units that can be rescaled: the ReLU whose output is measured, the layer producing them, and
    the consumers ``(layer, first column, power)`` whose columns ``first : first + units`` read them."""

    relu: nn.Module
    producer: nn.Linear
    consumers: tuple[tuple[nn.Linear, int, int], ...]


def _first_layers(model: nn.Module) -> list[tuple[nn.Linear, slice]]:
    """The Linear layers that read the z-scored input, each with the input columns it reads."""
    if isinstance(model, Stage1MLP):
        first = model.net[0]
        return [(first, slice(0, first.in_features))]  # type: ignore[list-item]
    if isinstance(model, RelationNet):
        layers = [(model.person[0], slice(0, model.fp))]
        if model.fq > 0:
            layers.append((model.pair[0], slice(2 * model.fp, 2 * model.fp + model.fq)))
        return layers  # type: ignore[return-value]
    raise ModelError(
        f"range equalisation: {type(model).__name__} is not supported (stage1_mlp, relation_net)"
    )


def first_layer_paths(model: nn.Module) -> list[str]:
    """Module paths of the layers that read the z-scored input (``["net.0"]``, ``["person.0", "pair.0"]``)."""
    ids = {id(layer) for layer, _ in _first_layers(model)}
    return [name for name, m in model.named_modules() if id(m) in ids]


def _links(model: nn.Module) -> list[Link]:
    """The hidden-unit links of the two bundled architectures, in forward order."""
    if isinstance(model, Stage1MLP):
        linears = [m for m in model.net if isinstance(m, nn.Linear)]
        relus = [m for m in model.net if isinstance(m, nn.ReLU | nn.Hardtanh)]
        return [Link(r, a, ((b, 0, 1),)) for r, a, b in zip(relus, linears[:-1], linears[1:], strict=True)]
    assert isinstance(model, RelationNet)
    enc = model.person[0].out_features
    head0, head3 = model.head[0], model.head[3]
    links = [
        Link(model.person[1], model.person[0], ((model.person[2], 0, 1),)),
        Link(
            model.person[3],
            model.person[2],
            ((head0, 0, 1), (head0, enc, 1), (head0, 2 * enc, 1), (head0, 3 * enc, 2)),
        ),
    ]
    if model.fq > 0:
        links.append(Link(model.pair[1], model.pair[0], ((head0, 4 * enc, 1),)))
    links.append(Link(model.head[1], head0, ((head3, 0, 1),)))
    return links  # type: ignore[arg-type]


def _gains(ranges: np.ndarray, strength: float) -> np.ndarray:
    return np.clip((1.0 / np.maximum(ranges, 1e-12)) ** strength, MIN_GAIN, MAX_GAIN).astype(np.float32)


def _ranges(magnitudes: np.ndarray, percentile: float | None) -> np.ndarray:
    """(C,) range of every column of (N, C) magnitudes: a percentile, or None: the MSE-optimal int8 range."""
    if percentile is not None:
        return np.percentile(magnitudes, percentile, axis=0)

    return np.array([mse_range(magnitudes[:, c]) for c in range(magnitudes.shape[1])])


def _magnitudes(model: nn.Module, X: torch.Tensor, module: nn.Module) -> np.ndarray:
    """(rows, channels) magnitudes of ``module``'s output over every call during a forward pass of ``X``."""
    seen: list[torch.Tensor] = []
    hook: Callable[..., None] = lambda _m, _i, out: seen.append(out.detach().abs())  # noqa: E731
    handle = module.register_forward_hook(hook)
    try:
        with torch.no_grad():
            model(X)
    finally:
        handle.remove()
    return torch.cat(seen).numpy()


def equalize(
    model: nn.Module,
    X: np.ndarray,
    percentile: float | None = 99.99,
    strength: float = 0.5,
    hidden_strength: float | None = None,
) -> np.ndarray:
    """Equalise ``model``'s channel ranges in place (module docstring); returns the (F,) input gains.

    Args:
        X: (N, F) float32 raw training rows the ranges are measured on.
        percentile: the percentile of each channel's magnitudes taken as its range; None: the range that
            minimises the channel's own mean squared int8 error (:func:`pairedge.export.qat.fake.mse_range`).
        strength: 0 changes nothing, 1 equalises fully (the inputs, and the hidden units unless
            ``hidden_strength`` is given).
    """
    layers = _first_layers(model)
    hidden = strength if hidden_strength is None else hidden_strength
    links = _links(model) if hidden > 0 else []
    bounded = [link.relu for link in links if not isinstance(link.relu, nn.ReLU)]
    if bounded:  # min(max(x, 0), b) is not positively homogeneous: scaling a unit moves its bound
        raise ModelError(
            f"range equalisation: hidden units behind {type(bounded[0]).__name__} (a bounded activation) "
            "cannot be rescaled exactly; use hidden_strength 0 (their ranges are bounded already)"
        )
    rows = torch.from_numpy(np.ascontiguousarray(X[:: max(1, -(-len(X) // RANGE_ROWS))], np.float32))
    norm = model.norm
    assert isinstance(norm, Standardize)
    model.eval()
    with torch.no_grad():
        z = norm(rows).abs().numpy()
    ranges = _ranges(z, percentile)
    if isinstance(model, RelationNet):  # one encoder for both persons: one gain per person column
        fp = model.fp
        ranges[:fp] = ranges[fp : 2 * fp] = np.maximum(ranges[:fp], ranges[fp : 2 * fp])
    gain = _gains(ranges, strength)
    model.norm = EqualizedStandardize(norm, gain)
    with torch.no_grad():
        for layer, cols in layers:
            layer.weight.div_(torch.from_numpy(gain[cols])[None, :])
        for link in links:
            s = _gains(_ranges(_magnitudes(model, rows, link.relu), percentile), hidden)
            scale = torch.from_numpy(s)
            link.producer.weight.mul_(scale[:, None])
            link.producer.bias.mul_(scale)
            for layer, first, power in link.consumers:
                layer.weight[:, first : first + len(s)].div_(scale[None, :] ** power)
    return gain


#: Smallest bound of a unit, as a share of the median bound of its layer's units that fire (a unit that
#: fires on fewer rows than the percentile leaves keeps a small, non-zero bound).
UNIT_BOUND_FLOOR = 1e-2


def unit_bounds(model: nn.Module, X: np.ndarray, percentile: float) -> list[np.ndarray]:
    """Per hidden unit, the ``percentile`` of its ReLU's outputs on (N, F) raw rows ``X`` (evenly subsampled
    to :data:`RANGE_ROWS`; both persons' calls of a relation network's encoder pooled): one (units,) array
    per link of :func:`_links`, in forward order, each at least :data:`UNIT_BOUND_FLOOR` of its layer's
    median firing bound (and 1e-3)."""
    if not 0.0 < percentile <= 100.0:
        raise ModelError(f"unit bounds: expected a percentile in (0, 100], got {percentile!r}")
    links = _links(model)
    bounded = [link.relu for link in links if not isinstance(link.relu, nn.ReLU)]
    if bounded:
        raise ModelError(
            f"unit bounds: the model's hidden units are bounded already ({type(bounded[0]).__name__})"
        )
    rows = torch.from_numpy(np.ascontiguousarray(X[:: max(1, -(-len(X) // RANGE_ROWS))], np.float32))
    model.eval()
    out = []
    for link in links:
        q = np.percentile(_magnitudes(model, rows, link.relu), percentile, axis=0).astype(np.float64)
        firing = q[q > 0]
        floor = max(1e-3, UNIT_BOUND_FLOOR * float(np.median(firing))) if firing.size else 1e-3
        out.append(np.maximum(q, floor))
    return out


def bound_units(model: nn.Module, bounded: nn.Module, bounds: list[np.ndarray]) -> nn.Module:
    """``bounded`` (a fresh model of ``model``'s architecture built with ``activation_bound=1``) loaded with
    ``model``'s weights rescaled so that it computes ``model`` with every hidden unit ``k`` of link ``i``
    clipped at ``bounds[i][k]``: ``min(relu(w.x + b), c) = c * min(relu(w.x / c + b / c), 1)``, the unit's row
    divided by ``c`` and its consumers' columns multiplied by ``c`` (``c**2`` for a relation network's
    ``ea * eb``). Exact up to float rounding; ``model`` is not modified. Returns ``bounded`` (eval mode)."""
    work = copy.deepcopy(model).eval()
    links = _links(work)
    if len(bounds) != len(links):
        raise ModelError(
            f"unit bounds: expected {len(links)} arrays (one per hidden layer), got {len(bounds)}"
        )
    with torch.no_grad():
        for link, c in zip(links, bounds, strict=True):
            if c.shape != (link.producer.out_features,) or not (np.isfinite(c).all() and (c > 0).all()):
                raise ModelError(
                    f"unit bounds: expected {link.producer.out_features} finite positive bounds, "
                    f"got shape {c.shape}"
                )
            scale = torch.from_numpy(c.astype(np.float64))
            link.producer.weight.copy_((link.producer.weight.double() / scale[:, None]).float())
            link.producer.bias.copy_((link.producer.bias.double() / scale).float())
            for layer, first, power in link.consumers:
                cols = layer.weight[:, first : first + len(c)].double() * scale[None, :] ** power
                layer.weight[:, first : first + len(c)] = cols.float()
    inner = [m for m in bounded.modules() if isinstance(m, nn.Hardtanh)]
    if len(inner) != len(links) or any(m.min_val != 0.0 or m.max_val != 1.0 for m in inner):
        raise ModelError("unit bounds: the target model must be built with activation_bound=1")
    bounded.load_state_dict(work.state_dict())
    return bounded.eval()


def clip_units(model: nn.Module, bounds: list[np.ndarray]) -> nn.Module:
    """A copy of ``model`` whose every hidden unit ``k`` of link ``i`` is clipped at ``bounds[i][k]`` by
    forward hooks: the definition :func:`bound_units` rewrites exactly (for checks and diagnostics)."""
    work = copy.deepcopy(model).eval()
    for link, c in zip(_links(work), bounds, strict=True):
        cap = torch.from_numpy(np.asarray(c, np.float32))
        link.relu.register_forward_hook(lambda _m, _i, out, cap=cap: torch.minimum(out, cap))
    return work
