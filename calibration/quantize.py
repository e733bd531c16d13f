"""INT8 QDQ quantization in the form TensorRT's explicit quantization accepts.

Settings (fixed, see docs/deployment.md): QDQ format, int8 activations and weights, symmetric (zero point
0), per-channel weights, bias left in float (TensorRT rejects int32 bias Q/DQ), after ONNX Runtime's
pre-processing (shape inference and constant folding,
``onnxruntime.quantization.shape_inference.quant_pre_process``). Nodes listed in ``exclude`` get no Q/DQ
and run in higher precision (TensorRT runs an op without Q/DQ in fp16/fp32).

Q/DQ placement (``QuantConfig.placement``):

- ``"gemm"`` (the default): Q/DQ only on the inputs of the weighted ops (Gemm / MatMul: the activation and
  the weight), as TensorRT's explicit-quantization guide and quantization-aware training do; the point-wise
  ops between them (ReLU, Sub, Abs, Mul, Concat) stay in float, where TensorRT fuses them with the Gemm
  before or the quantization after. The ranges come from :mod:`pairedge.calibration.ranges` (with
  ``headroom`` beyond the calibration rows' extremes) and the graph from :mod:`pairedge.calibration.qdq_graph`
  (weights rounded per channel, every Gemm input read once in int8);
- ``"all"``: ONNX Runtime's own ``quantize_static`` placement, which also quantizes every Gemm output before
  its ReLU, both inputs of a product and the inputs and output of a Concat, each with its own scale (18
  roundings in the relation network instead of 7): the naive baseline the benchmarks compare with.

ONNX Runtime's data reader and entropy calibrator come from :mod:`pairedge.calibration.ort_calibrators`.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.calibration.infer import agreement, logits, session
from pairedge.calibration.ort_calibrators import ArrayReader, entropy_ranges, entropy_ranges_of_file, quiet
from pairedge.calibration.qdq_graph import qdq_graph
from pairedge.calibration.ranges import layer_plans
from pairedge.core.errors import InputError

METHODS = ("minmax", "entropy", "percentile")
PLACEMENTS = ("gemm", "all")
#: Ops whose inputs the "gemm" placement quantizes (the activation in input 0 and the constant weight).
WEIGHTED_OPS = ("Gemm", "MatMul")
#: Bound of the "gemm" range headroom factor.
MAX_HEADROOM = 64.0
PRECISION_KEY = "pairedge.precision"
QUANT_KEY = "pairedge.quantization"


@dataclass(frozen=True)
class QuantConfig:
    """How to quantize one stage.

    Attributes:
        method: "minmax", "entropy" or "percentile" calibration of the activation ranges.
        percentile: the percentile kept by "percentile" (calibrate's default; ONNX Runtime's own is 99.999).
        exclude: node names left without Q/DQ (kept in higher precision).
        batch_rows: rows per calibration batch (equal batches; see the module docstring).
        placement: "gemm" (Q/DQ on the inputs of Gemm / MatMul only) or "all" (ONNX Runtime's placement).
        input_headroom, hidden_headroom: "gemm": each range is this multiple of the calibrated one, for the
            layers that read the standardized features and for the others (rows beyond the calibration
            set's extremes saturate that much later).
    """

    method: str = "percentile"
    percentile: float = 99.9
    exclude: tuple[str, ...] = ()
    batch_rows: int = 8192
    placement: str = "gemm"
    input_headroom: float = 1.0
    hidden_headroom: float = 1.0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise InputError(f"calibration method: expected one of {list(METHODS)}, got {self.method!r}")
        if not 50.0 < self.percentile <= 100.0:
            raise InputError(f"percentile: expected a value in (50, 100], got {self.percentile}")
        if self.batch_rows < 1:
            raise InputError(f"batch_rows: expected >= 1, got {self.batch_rows}")
        if self.placement not in PLACEMENTS:
            raise InputError(f"placement: expected one of {list(PLACEMENTS)}, got {self.placement!r}")
        if (
            not 1.0
            <= min(self.input_headroom, self.hidden_headroom)
            <= max(self.input_headroom, self.hidden_headroom)
            <= MAX_HEADROOM
        ):
            raise InputError(
                f"headroom: expected factors from 1 to {MAX_HEADROOM:g}, got {self.input_headroom:g} "
                f"and {self.hidden_headroom:g}"
            )


def preprocess(model: Any) -> Any:
    """Shape inference and constant folding (ONNX Runtime's ``quant_pre_process``) of a ModelProto."""
    import onnx
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory(prefix="pairedge-pre-") as tmp, quiet():
        src, dst = Path(tmp) / "in.onnx", Path(tmp) / "out.onnx"
        onnx.save(model, str(src))
        quant_pre_process(str(src), str(dst), skip_symbolic_shape=True)
        out = onnx.load(str(dst))
    _copy_metadata(model, out)
    return out


def calibrate_ranges(model: Any, X: np.ndarray, config: QuantConfig) -> Any:
    """What :func:`quantize` calibrates on rows ``X`` for ``config``, computed once to quantize the same model
    several times (with other ``exclude`` lists): "gemm": the layer plans
    (:func:`pairedge.calibration.ranges.layer_plans`); "all": the entropy range overrides (None otherwise)."""
    if config.placement == "gemm":
        return layer_plans(model, X, config)
    return entropy_ranges(model, X, config.batch_rows) if config.method == "entropy" else None


def quantize(model: Any, X: np.ndarray, config: QuantConfig, ranges: Any = None) -> Any:
    """QDQ int8 ModelProto of a pre-processed fp32 ModelProto, calibrated on (N, F) rows ``X``.

    The metadata of ``model`` is kept (every ``pairedge.*`` key); add the precision with :func:`stamp`.
    ``ranges``: :func:`calibrate_ranges` of the same model, rows and config (computed when None).
    """
    if config.placement == "gemm":
        plans = ranges if ranges is not None else calibrate_ranges(model, X, config)
        return qdq_graph(model, plans, config.exclude)
    return _ort_quantize(model, X, config, ranges)


def _ort_quantize(model: Any, X: np.ndarray, config: QuantConfig, ranges: dict[str, Any] | None) -> Any:
    """ONNX Runtime's ``quantize_static`` with its own Q/DQ placement (the "all" placement)."""
    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    method = {
        "minmax": CalibrationMethod.MinMax,
        "entropy": CalibrationMethod.Entropy,
        "percentile": CalibrationMethod.Percentile,
    }[config.method]
    extra: dict[str, Any] = {
        "ActivationSymmetric": True,
        "WeightSymmetric": True,
        "QuantizeBias": False,
        "DedicatedQDQPair": False,
    }
    if config.method == "percentile":
        extra["CalibPercentile"] = config.percentile
    with tempfile.TemporaryDirectory(prefix="pairedge-q-") as tmp, quiet():
        src, dst = Path(tmp) / "in.onnx", Path(tmp) / "out.onnx"
        onnx.save(model, str(src))
        if config.method == "entropy":
            # quantize_static cannot pass the histogram size through and its default (128 bins for 128
            # quantized bins) leaves the KL search a single candidate: the min-max range. Compute the
            # entropy ranges with enough bins and hand them over as range overrides.
            extra["TensorQuantOverrides"] = (
                ranges if ranges is not None else entropy_ranges_of_file(src, Path(tmp), X, config.batch_rows)
            )
            method = CalibrationMethod.MinMax
        try:
            quantize_static(
                str(src),
                str(dst),
                ArrayReader(X, config.batch_rows),
                quant_format=QuantFormat.QDQ,
                per_channel=True,
                reduce_range=False,
                activation_type=QuantType.QInt8,
                weight_type=QuantType.QInt8,
                calibrate_method=method,
                nodes_to_exclude=list(config.exclude),
                extra_options=extra,
            )
        except ValueError as exc:  # ONNX Runtime's histogram calibrators on a tensor that never varies
            if "bins" not in str(exc):
                raise
            raise InputError(
                f"ONNX Runtime's {config.method} calibration cannot histogram a tensor of this graph "
                f"that never varies on the calibration rows ({exc}); with --placement all use "
                "--method minmax"
            ) from None
        out = onnx.load(str(dst))
    _copy_metadata(model, out)
    return float_outputs(out)


def float_outputs(model: Any) -> Any:
    """Remove the Q/DQ pair ONNX Runtime puts on graph outputs (in place): the logits stay float.

    An int8 round trip of the logits adds up to half a quantization step (about 0.2 for a logit range of
    +-30) to every logit for nothing: TensorRT returns float outputs, and the decisions downstream compare
    logits with each other.
    """
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    users: dict[str, int] = {}
    for n in graph.node:
        for i in n.input:
            users[i] = users.get(i, 0) + 1
    for output in graph.output:
        dq = producer.get(output.name)
        if dq is None or dq.op_type != "DequantizeLinear":
            continue
        q = producer.get(dq.input[0])
        if q is None or q.op_type != "QuantizeLinear" or users.get(q.input[0], 0) != 1:
            continue
        source = producer.get(q.input[0])
        if source is None:
            continue
        for k, name in enumerate(source.output):
            if name == q.input[0]:
                source.output[k] = output.name
        graph.node.remove(dq)
        graph.node.remove(q)
    return model


def compute_nodes(model: Any, placement: str = "all") -> list[str]:
    """Names of the nodes that quantization can touch, in graph order: for the "gemm" placement the Gemm /
    MatMul nodes, for "all" every node but Constant."""
    if placement == "gemm":
        return [n.name for n in model.graph.node if n.op_type in WEIGHTED_OPS and n.name]
    return [n.name for n in model.graph.node if n.op_type != "Constant" and n.name]


def stamp(model: Any, precision: str, info: dict[str, Any]) -> Any:
    """Set ``pairedge.precision`` and ``pairedge.quantization`` (JSON of ``info``) in the metadata."""
    props = {p.key: p.value for p in model.metadata_props}
    props[PRECISION_KEY] = precision
    props[QUANT_KEY] = json.dumps(info, sort_keys=True)
    _set_props(model, props)
    return model


def _copy_metadata(src: Any, dst: Any) -> None:
    props = {p.key: p.value for p in dst.metadata_props}
    props.update({p.key: p.value for p in src.metadata_props})
    _set_props(dst, props)
    dst.doc_string = src.doc_string or dst.doc_string
    dst.producer_name = dst.producer_name or src.producer_name


def _set_props(model: Any, props: dict[str, str]) -> None:
    del model.metadata_props[:]
    for key, value in props.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value


@dataclass(frozen=True)
class Step:
    """One step of the mixed-precision search: nodes kept in float so far and the validation agreement."""

    excluded: tuple[str, ...]
    agreement: float
    max_abs: float


@dataclass(frozen=True)
class SearchResult:
    """Per-node sensitivity (agreement when only that node is quantized) and the greedy exclusion path."""

    sensitivity: dict[str, float] = field(default_factory=dict)
    steps: tuple[Step, ...] = ()

    @property
    def excluded(self) -> tuple[str, ...]:
        return self.steps[-1].excluded if self.steps else ()


def search_exclusions(
    model: Any,
    stage: int,
    cal_X: np.ndarray,
    val_X: np.ndarray,
    config: QuantConfig,
    target: float,
    tau: float = 0.5,
    candidates: Iterable[str] | None = None,
    ranges: Any = None,
) -> SearchResult:
    """Find which nodes to keep in float so the validation agreement reaches ``target``.

    The candidates are layers (:func:`weight_groups`: the Gemms of a shared encoder are one layer).
    Per-layer sensitivity: quantize one layer at a time (every other one excluded) and measure the decision
    agreement with fp32 on ``val_X`` (recorded for each of its nodes). Layers whose quantization alone
    changes no decision are never excluded. Then greedy forward selection: at each step, exclude the
    sensitive layer whose exclusion gives the highest agreement of the whole quantized model on ``val_X``,
    until it reaches ``target`` (or no sensitive layer is left). ``val_X`` must not be the data the final
    numbers are reported on. ``ranges``: :func:`calibrate_ranges` of ``model``, ``cal_X`` and ``config``
    (computed when None).
    """

    nodes = list(candidates) if candidates is not None else compute_nodes(model, config.placement)
    layers = weight_groups(model, nodes)
    reference = logits(session(model), val_X)
    # Excluding nodes does not change the calibrated ranges: compute them once.
    ranges = calibrate_ranges(model, cal_X, config) if ranges is None else ranges

    def measure(exclude: Sequence[str]) -> tuple[float, float]:
        q = quantize(model, cal_X, _with_exclude(config, exclude), ranges)
        a = agreement(stage, reference, logits(session(q), val_X), tau)
        return a.agreement, a.max_abs

    sensitivity: dict[str, float] = {}
    for layer in layers:
        others = tuple(sorted((set(nodes) | set(config.exclude)) - set(layer)))
        value = measure(others)[0]
        sensitivity.update(dict.fromkeys(layer, value))
    excluded: list[str] = list(config.exclude)
    first = measure(excluded)
    steps = [Step(tuple(excluded), first[0], first[1])]
    left = [g for g in layers if sensitivity[g[0]] < 1.0 and not set(g) & set(excluded)]
    while steps[-1].agreement < target and left:
        tried = {g: measure([*excluded, *g]) for g in left}
        best = max(left, key=lambda g: (tried[g][0], -sensitivity[g[0]]))
        excluded.extend(best)
        left.remove(best)
        steps.append(Step(tuple(excluded), tried[best][0], tried[best][1]))
    return SearchResult(sensitivity, tuple(steps))


def weight_groups(model: Any, nodes: Sequence[str]) -> list[tuple[str, ...]]:
    """``nodes`` grouped into layers, in graph order: nodes that read the same weight initializer (a shared
    encoder called once per person, exported as one Gemm per call) are one layer, kept in float or
    quantized together; a node without a weight initializer is a layer of its own."""
    weights = {i.name for i in model.graph.initializer}
    wanted = set(nodes)
    groups: dict[str, list[str]] = {}
    for n in model.graph.node:
        if n.name not in wanted:
            continue
        weight = next((i for i in n.input[1:2] if i in weights), None)
        groups.setdefault(weight if weight is not None else f"node:{n.name}", []).append(n.name)
    return [tuple(g) for g in groups.values()]


def _with_exclude(config: QuantConfig, exclude: Sequence[str]) -> QuantConfig:
    return replace(config, exclude=tuple(exclude))
