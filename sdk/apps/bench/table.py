"""The ``pairedge bench`` table (Markdown and terminal) and its files ``bench.json`` / ``bench.md``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from pairedge.apps.bench.run import BenchResult, BenchRow
from pairedge.measure.metrics.result import Table

#: Markdown columns: accuracy, MPCA and macro-F1 over the true interacting pairs the pipeline scored; the
#: agreement figures, near-ties and logit errors from the comparator (:mod:`pairedge.compare.comparator`).
HEAD = (
    "Backend",
    "Precision",
    "Size",
    "accuracy of scored pairs (misses excluded)",
    "MPCA",
    "MPCA drop (points)",
    "macro-F1",
    "stage-1 gate agreement",
    "stage-2 top-1 agreement",
    "near-tie disagreements (gate / top-1)",
    "max abs logit error (stage 1 / 2)",
    "gate",
)
#: The terminal table: one row per backend x precision, one value per cell and short headers, so that it
#: prints whole at 80 columns (every latency percentile and stage is in bench.json / bench.md).
TERMINAL = ("backend", "prec.", "MPCA", "drop", "gate", "top-1", "verdict", "ms", "FPS")
#: The terminal's verdict of a row that did not run, by status.
NOT_RUN = {"missing": "missing", "unavailable": "n/a", "error": "error"}
#: Pipeline stages shown per crowd size (SPEC 8); every stage is in the JSON.
STAGES = ("flow", "features", "stage1", "stage2", "total")


def _num(v: float, fmt: str = ".3f") -> str:
    return "-" if v is None or not np.isfinite(v) else format(v, fmt)


def _lat(stats: dict[int, dict[str, float]], n: int) -> str:
    s = stats.get(n)
    return "-" if s is None else _ms(s)


def _ms(s: dict[str, float]) -> str:
    """``p50 / p90 / p99`` (p90 absent in results written before it existed)."""
    p90 = f" / {s['p90']:.3f}" if "p90" in s else ""
    return f"{s['p50']:.3f}{p90} / {s['p99']:.3f}"


def columns(result: BenchResult) -> list[str]:
    counts = sorted(
        next((r.stage1_ms for r in result.rows if r.stage1_ms), {}) or result.options["pair_counts"]
    )
    people = result.options["people"]
    return [
        *HEAD,
        *(f"stage1 p50/p90/p99 ms @{n}" for n in counts),
        *(f"stage2 p50/p90/p99 ms @{n}" for n in counts),
        *(f"FPS @{p} people" for p in people),
    ]


def cells(row: BenchRow, result: BenchResult) -> list[str]:
    counts = sorted(int(n) for n in (row.stage1_ms or {n: 0 for n in result.options["pair_counts"]}))
    people = result.options["people"]
    if row.status != "ok":
        first = [row.backend, row.precision, _size(row.size_bytes), f"{row.status}: {row.reason}"]
        return first + [""] * (len(HEAD) - len(first) + 2 * len(counts) + len(people))
    a = row.agreement
    ties = f"{a.get('gate_near_tie_disagreements', 0)} / {a.get('top1_near_tie_disagreements', 0)}"
    errors = (
        f"{_num(a.get('max_abs_logit_error_stage1', float('nan')), '.3g')} / "
        f"{_num(a.get('max_abs_logit_error_stage2', float('nan')), '.3g')}"
    )
    return [
        row.backend,
        row.precision,
        _size(row.size_bytes),
        _num(scored_accuracy_of(row)),
        _num(row.accuracy["mpca"]),
        _num(row.mpca_drop * 100, "+.2f"),
        _num(row.accuracy["macro_f1"]),
        _pct(a.get("gate")),
        _pct(a.get("top1")) + f" ({a.get('top1_rows', '?')} rows)",
        ties,
        errors,
        "PASS" if row.gate_passed else "FAIL",
        *(_lat(row.stage1_ms, n) for n in counts),
        *(_lat(row.stage2_ms, n) for n in counts),
        *(_num(row.fps[p]["fps"], ".0f") if p in row.fps else "-" for p in people),
    ]


def _pct(v: float | None) -> str:
    return "-" if v is None or not np.isfinite(v) else f"{v:.2%}"


def scored_accuracy_of(row: BenchRow) -> float:
    """The row's accuracy of scored pairs (``accuracy`` in results written before it was named so)."""
    acc = row.accuracy or {}
    return float(acc.get("accuracy_scored", acc.get("accuracy", float("nan"))))


def _size(n: int) -> str:
    return "-" if not n else f"{n / 1024:.0f} kB"


def markdown(result: BenchResult) -> str:
    env, ref = result.environment, result.reference
    cols = columns(result)
    lines = [
        "# pairedge bench",
        "",
        f"Model: `{result.model}`",
        "",
        f"**{result.recommendation}**",
        "",
        "| " + " | ".join(cols) + " |",
        "|---|---|" + "---:|" * (len(cols) - 2),
        *("| " + " | ".join(c.replace("|", "/") for c in cells(r, result)) + " |" for r in result.rows),
        "",
        f"Accuracy and agreement: {ref['pair_frames']} pair-frames from {', '.join(ref['sources'])} "
        f"(`{ref['data']}`), features computed once by the fp32 pipeline on ONNX Runtime CPU and fed to "
        f"every variant. Accuracy of scored pairs / MPCA / macro-F1: stage 2 on the {ref['scored_pairs']} "
        "true interacting pair-frames the pipeline tracked, whatever stage 1 decided (true pairs it never "
        "tracked are left out, unlike `pairedge eval`'s accuracy over true pairs, where a miss counts as "
        "wrong); MPCA drop: the fp32 reference's MPCA minus the variant's, in points. Agreement with fp32 "
        "(`pairedge.compare.comparator`, the comparison `pairedge calibrate` and `pairedge parity check` "
        "use): stage-1 gate agreement on every pair-frame, stage-2 top-1 agreement on the pair-frames the "
        "fp32 reference gates; a near-tie is a row whose fp32 decision is within 1e-3 (probability) of its "
        "boundary: its disagreements are counted and excepted from the gate. Gate: MPCA drop <= "
        f"{ref['gate']['max_mpca_drop'] * 100:.1f} points, gate and top-1 agreement >= "
        f"{ref['gate'].get('min_gate_agreement', 0.99):.0%} / {ref['gate']['min_top1_agreement']:.0%}. Speed "
        f"for the recommendation: {ref['speed_definition']}. Latency: `Backend.infer` wall time (validation "
        "included), ONNX Runtime with one intra-op thread; FPS: whole pipeline (flow, features, both "
        "stages, smoothing, groups) at 640 x 480 with exactly N moving people. Variants are timed "
        "interleaved (round-robin), so load from other processes falls on all alike; p99 on a shared "
        "machine mostly measures that load.",
        "",
    ]
    lines += cost_lines(result)
    lines += stage_lines(result)
    mem = result.memory or {}
    rss, gpu = mem.get("peak_rss_mib"), mem.get("gpu_memory_mib")
    gpu_text = (
        "n/a (no nvidia-smi: no NVIDIA GPU, or a Jetson, where tegrastats reports it)"
        if gpu is None
        else f"{gpu:.0f} MiB"
    )
    lines += [
        f"Memory: peak RSS of the bench process {_num(rss, '.0f')} MiB (the reference replay and every "
        f"variant included); GPU memory held with every variant open: {gpu_text}.",
        "",
    ]
    if result.notes:
        lines += ["## Notes", "", *(f"- {n}" for n in result.notes), ""]
    lines += [
        "## Environment",
        "",
        f"- CPU: {env['cpu']}",
        f"- Platform: {env['platform']}",
        f"- GPU: {env['gpu']}",
    ]
    lines += [f"- {k}: {v}" for k, v in env["libraries"].items()]
    if env.get("jetson"):
        lines += [f"- Jetson: {json.dumps(env['jetson'])}"]
    return "\n".join(lines) + "\n"


def cost_lines(result: BenchResult) -> list[str]:
    """Markdown: per variant, multiply-adds per pair and the share done in int8 (per stage), bytes, and the
    classifier's p50 ms at 512 pairs vs fp32 on the same backend (:mod:`pairedge.compare.cost`, the figures
    ``pairedge calibrate`` reports)."""
    ok = [r for r in result.rows if r.status == "ok" and r.macs]
    if not ok:
        return []
    base = {r.backend: r for r in ok if r.precision == "fp32"}
    lines = [
        "## Cost per precision",
        "",
        "| Backend | Precision | MACs per pair (stage 1 / 2) | in int8 | bytes | "
        "stage 1 + 2 p50 ms @512 | vs fp32 |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in ok:
        macs = [r.macs[k]["macs_per_pair"] for k in ("stage1", "stage2")]
        int8 = sum(r.macs[k]["int8_macs_per_pair"] for k in ("stage1", "stage2")) / max(sum(macs), 1)
        ms = _ms512(r)
        ref = _ms512(base[r.backend]) if r.backend in base else float("nan")
        lines.append(
            f"| {r.backend} | {r.precision} | {macs[0]:,} / {macs[1]:,} | {100 * int8:.0f} % | "
            f"{r.size_bytes:,} | {_num(ms)} | {_num(ms / ref, '.2f')}x |"
        )
    return [*lines, ""]


def _ms512(row: BenchRow) -> float:
    """Both stages' p50 ms at 512 pairs (NaN when 512 was not measured)."""
    one, two = row.stage1_ms.get(512), row.stage2_ms.get(512)
    return float("nan") if one is None or two is None else one["p50"] + two["p50"]


def stage_lines(result: BenchResult) -> list[str]:
    """Markdown: the whole pipeline per variant and crowd size, ms per stage (p50 / p90 / p99) and FPS."""
    ok = [r for r in result.rows if r.status == "ok" and r.fps]
    if not ok:
        return []
    lines = [
        "## Pipeline latency per stage",
        "",
        "ms per frame, p50 / p90 / p99, 640 x 480, exactly N moving people (stages of "
        "`FrameResult.timings_ms`; `total` also holds validation, tracking, groups and smoothing).",
        "",
        "| Backend | Precision | people | pairs | " + " | ".join(STAGES) + " | FPS |",
        "|---|---|---:|---:|" + "---:|" * (len(STAGES) + 1),
    ]
    for r in ok:
        for people, f in sorted(r.fps.items()):
            stages = f.get("stages_ms") or {"total": f["step_ms"]}
            cells = [_ms(stages[s]) if s in stages else "-" for s in STAGES]
            lines.append(
                f"| {r.backend} | {r.precision} | {people} | {f['pairs_per_frame']:.0f} | "
                + " | ".join(cells)
                + f" | {f['fps']:.0f} |"
            )
    return [*lines, ""]


def write_bench(result: BenchResult, out: str | Path) -> dict[str, str]:
    folder = Path(out).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench.json").write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    (folder / "bench.md").write_text(markdown(result))
    return {"json": str(folder / "bench.json"), "markdown": str(folder / "bench.md")}


def _terminal_cells(r: BenchRow, people: int | None) -> tuple[str, ...]:
    if r.status != "ok":
        return (r.backend, r.precision, "-", "-", "-", "-", NOT_RUN.get(r.status, r.status), "-", "-")
    a, fps = r.agreement, (r.fps.get(people) if people is not None else None)

    def agree(key: str) -> str:  # "*": near-tie disagreements excepted by the gate
        return _pct(a.get(key)) + ("*" if a.get(f"{key}_near_tie_disagreements") else "")

    return (
        r.backend,
        r.precision,
        _num(r.accuracy.get("mpca", float("nan"))),
        _num(r.mpca_drop * 100, ".2f"),
        agree("gate"),
        agree("top1"),
        "PASS" if r.gate_passed else "FAIL",
        _num(r.speed_ms),
        _num(fps["fps"], ".0f") if fps else "-",
    )


def terminal_table(result: BenchResult) -> Table:
    """The narrow terminal table: one row per backend x precision, one value per cell (:data:`TERMINAL`)."""
    people = max(result.options["people"], default=None)
    return Table("pairedge bench", TERMINAL, tuple(_terminal_cells(r, people) for r in result.rows))


def terminal_lines(result: BenchResult, width: int = 80) -> list[str]:
    """:func:`terminal_table` as plain text lines of at most ``width`` characters (two spaces between
    columns, one when two do not fit; text columns left-aligned, numbers right-aligned)."""
    table = terminal_table(result)
    grid = [table.columns, *table.rows]
    widths = [max(len(str(row[k])) for row in grid) for k in range(len(table.columns))]
    gap = "  " if sum(widths) + 2 * (len(widths) - 1) <= width else " "

    def line(row: tuple[str, ...]) -> str:
        return gap.join(
            str(c).ljust(w) if k < 2 or k == 6 else str(c).rjust(w)
            for k, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()

    return [line(table.columns), gap.join("-" * w for w in widths), *(line(r) for r in table.rows)]


def terminal_legend(result: BenchResult) -> list[str]:
    """What the terminal table's short headers mean."""
    people = max(result.options["people"], default=0)
    g = result.reference["gate"]
    return [
        f"MPCA: stage 2 on the true interacting pairs the pipeline scored; drop: MPCA points below the fp32 "
        f"reference; gate / top-1: stage-1 gate / stage-2 top-1 agreement with fp32 (top-1 on the pairs fp32 "
        f"gates; *: near-tie disagreements excepted, see the notes); verdict: the accuracy gate (drop <= "
        f"{g['max_mpca_drop'] * 100:.1f}, agreements >= {g.get('min_gate_agreement', 0.99):.0%} / "
        f"{g['min_top1_agreement']:.0%}); ms: {result.reference['speed_definition']}; FPS: whole pipeline at "
        f"{people} people. Every percentile, stage and logit error: bench.json / bench.md (--out).",
    ]
