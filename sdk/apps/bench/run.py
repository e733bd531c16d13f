"""``pairedge bench``: every (backend, precision) of a model folder on the same held-out pairs, and a pick.

1. Reference: the fp32 model on ONNX Runtime CPU replays the held-out sources through the streaming
   pipeline (``--data``, default: simulator scenes whose seeds no training or calibration used); every
   pair-frame's features, logits and truth are kept.
2. For each backend x precision: both classifiers on exactly those features -> stage-2 MPCA / macro-F1 /
   accuracy on the true interacting pairs the pipeline scored (stage 2 scored on the true pairs, as in the
   paper; true pairs the pipeline missed are not in the replay, so ``accuracy_scored`` = "accuracy of scored
   pairs (misses excluded)", where ``pairedge eval``'s ``accuracy`` counts misses as wrong); the comparison
   with fp32 by :mod:`pairedge.compare.comparator` (:mod:`pairedge.apps.bench.accuracy`): stage-1 gate
   agreement on every pair-frame, stage-2 top-1 agreement on the pair-frames the fp32 reference gates,
   near-ties counted, logit errors; classifier latency at 1 / 64 / 512 / 4,950 pairs (p50 / p90 / p99); the
   whole pipeline at 2 / 10 / 30 / 100 people: FPS and the latency of every stage (flow, features, stage 1,
   stage 2, total); the process's peak RSS and, where ``nvidia-smi`` tells, its GPU memory.
3. The accuracy gate, judged by the comparator (default: MPCA at most 0.5 points below the fp32 reference's,
   stage-1 gate and stage-2 top-1 agreement >= 99 %, near-ties excepted), and the recommendation: the
   fastest passing variant, by classifier time at 100 people (stage 1 on 4,950 pairs + stage 2 on 512
   pairs, p50). A precision slower than fp32 on the same backend is called out, and on ONNX Runtime CPU
   int8 / fp16 vs fp32 are said with the numbers.

Precisions whose files are missing and backends that cannot run here become rows that say so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.apps.bench.accuracy import Gate, Reference, reference_rows, tau_summary
from pairedge.apps.bench.env import environment
from pairedge.apps.bench.measure import (
    PAIR_COUNTS,
    PEOPLE,
    classifier_latency,
    gpu_memory_mib,
    peak_rss_mib,
    pipeline_fps,
)
from pairedge.apps.evaluation.sources import parse_sources
from pairedge.compare.cost import graph_macs
from pairedge.compare.parity.replay import model_only_logits
from pairedge.compare.parity.verdict import json_safe
from pairedge.core.artefacts import PRECISIONS, check_precision, stage_files
from pairedge.core.bundled import resolve_model_dir
from pairedge.core.errors import BackendError, InputError, ModelError
from pairedge.measure.metrics.pairwise.report import ACCURACY_LABELS, DEFINITIONS
from pairedge.runtime.backends.registry import BACKENDS, canonical_backend_name
from pairedge.runtime.deployment import Deployment

#: Held-out scenes: seeds 2000+ are used by no training recipe (0-11) and no calibration set.
DEFAULT_DATA = "sim:static+moving+noisy:seeds=2000:frames=150"
Progress = Callable[[str], None]


@dataclass(frozen=True)
class BenchOptions:
    """What to measure. ``backends`` are registry names or aliases (``pairedge.runtime.backends.ALIASES``)."""

    precisions: tuple[str, ...] = PRECISIONS
    backends: tuple[str, ...] = ("onnxruntime",)
    data: str = DEFAULT_DATA
    frames: int | None = None
    repeats: int = 100
    pair_counts: tuple[int, ...] = PAIR_COUNTS
    people: tuple[int, ...] = PEOPLE
    fps_frames: int = 30
    gate: Gate = field(default_factory=Gate)


@dataclass
class BenchRow:
    """One backend x precision. ``status``: "ok", "missing" (files), "unavailable" (backend), "error".

    ``backend`` is the registry name (``onnxruntime``, never an alias). ``accuracy`` holds
    ``accuracy_scored`` (accuracy of scored pairs, misses excluded), ``mpca`` and ``macro_f1``, all over the
    true interacting pairs the pipeline scored.
    """

    backend: str
    precision: str
    status: str
    reason: str = ""
    size_bytes: int = 0
    #: per stage, :func:`pairedge.compare.cost.graph_macs` of its file (multiply-adds per pair, int8 share)
    macs: dict[str, dict[str, Any]] = field(default_factory=dict)
    accuracy: dict[str, float] = field(default_factory=dict)
    agreement: dict[str, float] = field(default_factory=dict)
    stage1_ms: dict[int, dict[str, float]] = field(default_factory=dict)
    stage2_ms: dict[int, dict[str, float]] = field(default_factory=dict)
    fps: dict[int, dict[str, Any]] = field(default_factory=dict)
    mpca_drop: float = float("nan")
    gate_passed: bool = False
    speed_ms: float = float("nan")
    #: one line per failed tolerance of the gate (empty when it passes)
    gate_problems: list[str] = field(default_factory=list)
    #: the comparator's full result against the fp32 reference (``Comparison.to_dict()``)
    comparison: dict[str, Any] = field(default_factory=dict)


@dataclass
class BenchResult:
    """Rows, environment, the reference data and the recommendation."""

    model: str
    rows: list[BenchRow]
    environment: dict[str, Any]
    reference: dict[str, Any]
    recommendation: str
    recommended: dict[str, str] | None
    notes: list[str]
    options: dict[str, Any]
    #: ``peak_rss_mib`` of the bench process (reference replay included) and ``gpu_memory_mib`` it held with
    #: every variant open (None where nvidia-smi cannot tell).
    memory: dict[str, float | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return json_safe(asdict(self))


def resolve_backend(name: str) -> str:
    """The registry name of a ``--backends`` entry (aliases such as ``ort-cpu`` accepted; unknown refused).

    Raises:
        InputError: an unknown name, or ``auto`` (a benchmark names what it measures).
    """

    try:
        canonical = canonical_backend_name(name)
    except InputError as exc:
        raise InputError(f"--backends: {exc}") from None
    if canonical == "auto":
        raise InputError(
            f"--backends: name the backends to measure (one or more of {', '.join(BACKENDS)}), not 'auto'"
        )
    return canonical


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def check_options(opts: BenchOptions) -> tuple[BenchOptions, list[Any]]:
    """``opts`` with registry backend names (aliases resolved, repeats dropped) and its sources, all checked
    before any work: unknown backends or precisions, no fp32, bad or too large ``--data``.

    Raises:
        InputError: naming the option and what is accepted.
    """
    from dataclasses import replace

    if not opts.backends:
        raise InputError("--backends: expected at least one classifier backend, e.g. onnxruntime")
    backends = _unique(resolve_backend(b) for b in opts.backends)
    precisions = _unique(p.strip().lower() for p in opts.precisions)
    for p in precisions:
        check_precision(p)  # an unknown precision: one line naming the accepted ones
    if "fp32" not in precisions:
        raise InputError("--precisions must include fp32: the gate and the agreement are measured against it")
    sources = parse_sources(opts.data, frames=opts.frames)  # simulator work bounded (pairedge.core.limits)
    return replace(opts, backends=backends, precisions=precisions), sources


def run_bench(
    model: str | Path, options: BenchOptions | None = None, progress: Progress | None = None
) -> BenchResult:
    """Measure every backend x precision of ``model`` (see the module docstring)."""

    opts, sources = check_options(options or BenchOptions())
    say = progress or (lambda _: None)
    folder = resolve_model_dir(str(model))
    reference_run = reference_rows(folder, sources, opts.frames, say)
    ref, names, scored = reference_run.rows, reference_run.sources, reference_run.scored
    if not scored.any():
        raise InputError(
            f"--data {opts.data}: no true interacting pair with a label of this model; cannot score"
        )
    rows, gpu_mib = _measure_all(folder, reference_run, opts, say)
    _apply_speed(rows)
    text, best, notes = recommend(rows, opts)
    reference = {
        "data": opts.data,
        "sources": names,
        "pair_frames": len(ref),
        "scored_pairs": int(scored.sum()),
        "gate": asdict(opts.gate),
        "speed_definition": _speed_text(opts),
        "accuracy_definition": _accuracy_text(),
        "tau_interact": tau_summary(reference_run.tau),
    }
    memory = {"gpu_memory_mib": gpu_mib, "peak_rss_mib": peak_rss_mib()}
    return BenchResult(
        str(folder), rows, environment(), reference, text, best, notes, json_safe(asdict(opts)), memory
    )


def variants(folder: Path, opts: BenchOptions) -> list[Deployment]:
    """Every backend x precision of ``opts`` on ``folder`` (backend-major, the order of the rows)."""
    return [Deployment(folder, precision=p, backend=b) for b in opts.backends for p in opts.precisions]


def _measure_all(
    folder: Path, reference: Reference, opts: BenchOptions, say: Progress
) -> tuple[list[BenchRow], float | None]:
    """Accuracy per variant, then latency and FPS of all runnable variants measured interleaved; with the GPU
    memory (MiB) held while they are all open (None where nvidia-smi cannot tell)."""
    from contextlib import ExitStack

    rows: list[BenchRow] = []
    pipes: list[Any] = []
    gpu_mib = None
    ref = reference.rows
    with ExitStack() as stack:
        for deployment in variants(folder, opts):
            row, pipe = _open(deployment, reference, opts.gate, say)
            rows.append(row)
            if pipe is not None:
                pipes.append((row, stack.enter_context(pipe)))
        live = [r for r, _ in pipes]
        if live:
            say(f"classifier latency, {len(live)} variant(s) interleaved")
            for stage, width in (("stage1", ref.stage1_features), ("stage2", ref.stage2_features)):
                backends = [getattr(pipe, stage) for _, pipe in pipes]
                for row, stats in zip(
                    live, classifier_latency(backends, width, opts.pair_counts, opts.repeats), strict=True
                ):
                    setattr(row, f"{stage}_ms", stats)
            for n in opts.people:
                say(f"pipeline FPS at {n} people, {len(live)} variant(s) interleaved")
                for row, fps in zip(
                    live, pipeline_fps([pipe for _, pipe in pipes], n, opts.fps_frames), strict=True
                ):
                    row.fps[n] = fps
        gpu_mib = gpu_memory_mib()
    return rows, gpu_mib


def _open(deployment: Deployment, reference: Reference, gate: Gate, say: Progress) -> tuple[BenchRow, Any]:
    """The row of one variant with its accuracy and agreement, and its (open) pipeline, or None."""

    folder, backend, precision = deployment.folder, deployment.backend, deployment.precision
    row = BenchRow(backend, precision, "ok")
    files = [folder / n for n in stage_files(precision)]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        row.status, row.reason = (
            "missing",
            f"{', '.join(missing)} not in {folder} (make them with `pairedge calibrate`)",
        )
        return row, None
    row.size_bytes = sum(f.stat().st_size for f in files)
    say(f"{backend} {precision}: accuracy and agreement")
    try:
        pipe = deployment.load()
    except BackendError as exc:
        row.status, row.reason = "unavailable", str(exc)
        return row, None
    except (ModelError, InputError) as exc:
        row.status, row.reason = "error", str(exc)
        return row, None
    row.macs = {f"stage{k}": graph_macs(f) for k, f in enumerate(files, start=1)}  # files checked by load()
    try:
        l1, l2 = model_only_logits(pipe, reference.rows.stage1_features, reference.rows.stage2_features)
    except (BackendError, InputError) as exc:
        pipe.close()
        row.status, row.reason = "error", str(exc)
        return row, None
    # only pairs the pipeline scored reach here (true pairs it missed are not in the replay): accuracy,
    # MPCA and macro-F1 are over the scored pairs; agreement and the gate come from the comparator
    v = reference.score((l1, l2), gate)
    row.accuracy, row.agreement, row.comparison = v.accuracy, v.agreement, v.comparison
    row.mpca_drop, row.gate_passed, row.gate_problems = v.mpca_drop, v.passed, list(v.problems)
    return row, pipe


def _accuracy_text() -> str:

    return f"{ACCURACY_LABELS['accuracy_scored']}: {DEFINITIONS['accuracy_scored']}"


def _speed_pairs(pair_counts: Iterable[int]) -> tuple[int, int]:
    """The pair counts of the speed figure: stage 1 on the largest, stage 2 on the largest <= 512."""
    counts = list(pair_counts)
    return max(counts), max([n for n in counts if n <= 512] or [min(counts)])


def _speed_text(opts: BenchOptions) -> str:
    big, mid = _speed_pairs(opts.pair_counts)
    return f"classifier p50 at 100 people: stage 1 on {big:,} pairs + stage 2 on {mid:,} pairs"


def _apply_speed(rows: list[BenchRow]) -> None:
    """The recommendation's speed of every measured row (see :func:`_speed_text`)."""
    for r in rows:
        if r.status != "ok" or not r.stage1_ms or not r.stage2_ms:
            continue
        big, mid = _speed_pairs(r.stage1_ms)  # the pair counts measured (both stages: the same counts)
        r.speed_ms = r.stage1_ms[big]["p50"] + r.stage2_ms[mid]["p50"]


def recommend(rows: list[BenchRow], opts: BenchOptions) -> tuple[str, dict[str, str] | None, list[str]]:
    """The recommendation line, the pick (backend, precision) and one note per notable row."""
    notes = _row_notes(rows, opts) + _cpu_notes(rows, opts)
    passing = [r for r in rows if r.status == "ok" and r.gate_passed]
    if not passing:
        return "no variant passes the accuracy gate (fp32 did not run?)", None, notes
    best = min(passing, key=lambda r: r.speed_ms)
    text = (
        f"Recommended: {best.precision} on {best.backend} — the fastest variant that passes the accuracy "
        f"gate: {best.speed_ms:.3f} ms ({_speed_text(opts)}), MPCA {best.accuracy['mpca']:.4f} "
        f"({-best.mpca_drop * 100 + 0.0:+.2f} points vs fp32), stage-2 top-1 agreement "
        f"{best.agreement['top1']:.2%}, stage-1 gate agreement {best.agreement['gate']:.2%}."
    )
    slower = [
        r
        for r in passing
        if r is not best and r.precision != "fp32" and r.backend == best.backend and best.precision == "fp32"
    ]
    if slower:
        text += (
            " " + ", ".join(r.precision for r in slower) + " also pass(es) but run(s) slower than fp32 here."
        )
    return text, {"backend": best.backend, "precision": best.precision}, notes


def _row_notes(rows: list[BenchRow], opts: BenchOptions) -> list[str]:
    """Rows that did not run (one note per backend and reason), failed the gate, disagreed on near-ties, or
    ran slower than fp32 (ONNX Runtime CPU: see :func:`_cpu_notes`)."""
    notes: list[str] = []
    not_run: dict[tuple[str, str, str], list[str]] = {}
    fp32 = {r.backend: r for r in rows if r.precision == "fp32" and r.status == "ok"}
    for r in rows:
        if r.status != "ok":
            not_run.setdefault((r.backend, r.status, r.reason), []).append(r.precision)
            continue
        if not r.gate_passed:
            notes.append(
                f"{r.precision} on {r.backend} fails the accuracy gate: " + "; ".join(r.gate_problems)
            )
        ties = [
            f"{r.agreement.get(f'{k}_near_tie_disagreements', 0)} {what}"
            for k, what in (("gate", "stage-1 gate"), ("top1", "stage-2 top-1"))
            if r.agreement.get(f"{k}_near_tie_disagreements")
        ]
        if ties:
            notes.append(
                f"{r.precision} on {r.backend}: {' and '.join(ties)} disagreement(s) on near-ties (the fp32 "
                "decision within 1e-3 of its boundary): counted, and excepted from the gate"
            )
        base = fp32.get(r.backend)
        if base is not None and r is not base and r.speed_ms > base.speed_ms and r.backend != "onnxruntime":
            notes.append(
                f"{r.precision} on {r.backend} is {r.speed_ms / base.speed_ms:.2f}x SLOWER than fp32 "
                f"({r.speed_ms:.3f} vs {base.speed_ms:.3f} ms, {_speed_text(opts)})"
            )
    gone = [f"{', '.join(p)} on {b}: {status} — {reason}" for (b, status, reason), p in not_run.items()]
    return gone + notes


def _cpu_notes(rows: list[BenchRow], opts: BenchOptions) -> list[str]:
    """int8 vs fp16 vs fp32 on ONNX Runtime CPU, said with the numbers measured."""
    cpu = {r.precision: r for r in rows if r.backend == "onnxruntime" and r.status == "ok"}
    base = cpu.get("fp32")
    others = [p for p in PRECISIONS if p != "fp32" and p in cpu]
    if base is None or not others or not np.isfinite(base.speed_ms):
        return []
    ratios = ", ".join(
        f"{p} {cpu[p].speed_ms:.3f} ms ({cpu[p].speed_ms / base.speed_ms:.2f}x fp32)" for p in others
    )
    text = f"ONNX Runtime CPU, {_speed_text(opts)}: fp32 {base.speed_ms:.3f} ms, {ratios}."
    slower = [p for p in others if cpu[p].speed_ms > base.speed_ms]
    if slower:
        text += f" {' and '.join(slower)} {'is' if len(slower) == 1 else 'are'} SLOWER than fp32 here."
    if "int8" in slower:
        text += (
            " ONNX Runtime's CPU kernels add quantize / dequantize work around layers this small that their "
            "int8 arithmetic does not win back."
        )
    if "fp16" in slower:
        text += (
            " The fp16 files keep float32 inputs and outputs, and this CPU gains nothing from fp16 layers."
        )
    return [
        text
        + " int8 / fp16 pay off on a GPU: on a Jetson, rerun with --backends tensorrt and pick from its rows."
    ]
