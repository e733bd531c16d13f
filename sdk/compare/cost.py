"""What a model costs per precision: multiply-adds per pair (and how many of them run in int8), bytes, and
ONNX Runtime CPU latency per pair count: the one set of figures ``pairedge calibrate`` and ``pairedge bench``
report.

Multiply-adds are counted from the graph: every Gemm / MatMul with a constant weight does its weight's element
count per row (a weight two Gemms read, a relation network's person encoder, counts twice); such a Gemm is
int8 when both its inputs come from a ``DequantizeLinear`` (the form TensorRT fuses into an int8 GEMM).
Latency calls the runtime's own backends (``Backend.infer``, input validation included) on real feature rows
sampled to each pair count, the variants measured interleaved (round-robin), so a busy shared machine slows
them alike.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.runtime.backends.model import load_model
from pairedge.runtime.backends.ort import OnnxRuntimeBackend

#: The pair counts every latency figure is given at (one person pair ... 100 people's 4,950 pairs).
PAIR_COUNTS = (1, 64, 512, 4950)
_WEIGHTED = ("Gemm", "MatMul")


def _load(model: Any) -> Any:
    import onnx

    return model if isinstance(model, onnx.ModelProto) else onnx.load(str(model), load_external_data=False)


def gemm_macs(model: Any) -> dict[str, tuple[int, bool]]:
    """Every Gemm / MatMul of an ONNX model (ModelProto or path) with a constant weight (through its
    ``DequantizeLinear``): node name -> (multiply-adds per pair, whether it runs in int8: both inputs come
    from a ``DequantizeLinear``)."""
    g = _load(model).graph
    sizes = {t.name: int(np.prod(t.dims)) for t in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    out: dict[str, tuple[int, bool]] = {}
    for node in g.node:
        if node.op_type not in _WEIGHTED or len(node.input) < 2:
            continue
        weight, dq = node.input[1], producer.get(node.input[1])
        quantized = dq is not None and dq.op_type == "DequantizeLinear"
        if quantized:
            weight = dq.input[0]
        if weight in sizes:
            act = producer.get(node.input[0])
            out[node.name] = (
                sizes[weight],
                quantized and act is not None and act.op_type == "DequantizeLinear",
            )
    return out


def graph_macs(model: Any) -> dict[str, Any]:
    """``{"macs_per_pair", "int8_macs_per_pair", "int8_share", "gemms", "int8_gemms"}`` of an ONNX model
    (a ModelProto or a path; see the module docstring)."""
    per_node = gemm_macs(model).values()
    total = sum(m for m, _ in per_node)
    int8 = sum(m for m, q in per_node if q)
    return {
        "macs_per_pair": total,
        "int8_macs_per_pair": int8,
        "int8_share": int8 / max(total, 1),
        "gemms": len(per_node),
        "int8_gemms": sum(q for _, q in per_node),
    }


def percentiles(samples_ms: Sequence[float]) -> dict[str, float]:
    """p50 / p90 / p99 / mean of (n,) samples (n >= 1)."""
    a = np.asarray(samples_ms, np.float64)
    p50, p90, p99 = (float(v) for v in np.percentile(a, [50, 90, 99]))
    return {"p50": p50, "p90": p90, "p99": p99, "mean": float(a.mean())}


def classifier_latency(
    backends: Sequence[Any],
    rows: np.ndarray,
    pair_counts: Sequence[int] = PAIR_COUNTS,
    repeats: int = 100,
    warmup: int = 5,
    rounds: int = 10,
) -> list[dict[int, dict[str, float]]]:
    """Milliseconds of ``backend.infer`` per pair count, for several backends measured **interleaved**.

    The calls are split into ``rounds``; each round times every backend in turn on the same input, so load
    from other processes on a shared machine falls on all variants alike instead of on whichever ran last.

    Args:
        backends: active classifier :class:`~pairedge.runtime.backends.Backend` objects (same input width).
        rows: (M, F) float32 real feature rows (M >= 1), sampled (with repetition) to each pair count.
        repeats: timed calls per backend and pair count (the 4,096+ counts get half, at least 20).

    Returns:
        One ``{pairs: {"p50", "p90", "p99", "mean"}}`` per backend, in order.
    """
    rng = np.random.default_rng(0)
    samples: list[dict[int, list[float]]] = [{int(n): [] for n in pair_counts} for _ in backends]
    for n in pair_counts:
        x = np.ascontiguousarray(rows[rng.integers(0, len(rows), n)], np.float32)
        calls = max(repeats if n < 4096 else repeats // 2, 20)
        per_round = max(calls // rounds, 1)
        for backend in backends:
            for _ in range(warmup):
                backend.infer(x)
        for _ in range(max(calls // per_round, 1)):
            for k, backend in enumerate(backends):
                for _ in range(per_round):
                    t0 = time.perf_counter_ns()
                    backend.infer(x)
                    samples[k][int(n)].append((time.perf_counter_ns() - t0) / 1e6)
    return [{n: percentiles(v) for n, v in s.items()} for s in samples]


def precision_costs(
    files: Mapping[str, Path], rows: np.ndarray, pair_counts: Sequence[int] = PAIR_COUNTS, repeats: int = 30
) -> dict[str, dict[str, Any]]:
    """Per precision: multiply-adds per pair (int8 share), file bytes and ONNX Runtime CPU latency (one
    intra-op thread, the p50 of ``repeats`` interleaved calls) per pair count.

    Args:
        files: precision (``"fp32"``, ``"fp16"``, ``"int8"``) -> the stage's ONNX file.
        rows: (M, F) float32 real feature rows of the stage.

    Returns:
        ``{precision: {"macs_per_pair", "int8_macs_per_pair", "int8_share", "bytes", "latency_ms": {pairs:
        p50}, "vs_fp32": {pairs: ratio}}}`` (``vs_fp32`` when fp32 is among ``files``).
    """

    backends = [OnnxRuntimeBackend(load_model(path)).activate() for path in files.values()]
    try:
        timed = classifier_latency(backends, rows, pair_counts, repeats=repeats, warmup=3, rounds=5)
    finally:
        for b in backends:
            b.deactivate()
    out: dict[str, dict[str, Any]] = {}
    for (name, path), lat in zip(files.items(), timed, strict=True):
        out[name] = {
            **graph_macs(path),
            "bytes": Path(path).stat().st_size,
            "latency_ms": {int(n): v["p50"] for n, v in lat.items()},
        }
    if "fp32" in out:
        base = out["fp32"]["latency_ms"]
        for entry in out.values():
            entry["vs_fp32"] = {n: entry["latency_ms"][n] / max(base[n], 1e-9) for n in base}
    return out
