"""Markdown report of ``bench_runtime.py`` (tables per flow setting, criteria, allocator, accuracy)."""

from __future__ import annotations

from typing import Any

from _runtime_accuracy import METRICS as ACCURACY  # the pooled metrics the accuracy run records

STAGES = ("validate", "track", "flow", "features", "stage1", "stage2", "smooth", "groups", "total")


def latency_table(sweep: dict[str, Any]) -> list[str]:
    lines = [
        "| people | pairs | stage-2 pairs | "
        + " | ".join(STAGES)
        + " | flow alone | FPS | step allocations |",
        "|---:|---:|---:|" + "---:|" * (len(STAGES) + 3),
    ]
    for r in sweep["people"]:
        cells = [
            f"{r['stages_ms'][s]['p50']:.2f} / {r['stages_ms'][s]['p90']:.2f} / "
            f"{r['stages_ms'][s]['p99']:.2f}"
            for s in STAGES
        ]
        fa = r.get("flow_alone_ms")
        flow = f"{fa['p50']:.2f}" if fa else "-"
        lines.append(
            f"| {r['people']} | {r['pairs_per_frame']:.0f} | {r['stage2_pairs_per_frame']:.0f} | "
            + " | ".join(cells)
            + f" | {flow} | {r['fps']:.0f} | {_mib(r.get('step_peak_alloc_mib'))} |"
        )
    return lines


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} MiB"


def criteria_lines(c: dict[str, float] | None) -> list[str]:
    if c is None:
        return ["- (criteria need 10 and 100 people and a flow backend)"]
    lines = [
        f"- Overhead at 10 people: median step {c['step_10_ms']:.2f} ms / median flow alone "
        f"{c['flow_10_ms']:.2f} ms = **{c['overhead_ratio']:.3f}x** (issue 26 target: <= 1.5x).",
    ]
    if "overhead_ratio_100" in c:
        lines.append(
            f"- Overhead at 100 people: median step {c['step_100_ms']:.2f} ms / median flow alone "
            f"{c['flow_100_ms']:.2f} ms = **{c['overhead_ratio_100']:.3f}x** (issue 26 target: <= 2.0x); "
            f"features {c['features_100_ms']:.2f} ms."
        )
    return lines + [
        f"- Scaling: median step at 100 people {c['step_100_ms']:.2f} ms / at 10 people "
        f"{c['step_10_ms']:.2f} ms = **{c['scaling_ratio']:.3f}x**.",
        f"- At 10 people: features {c['features_10_ms']:.2f} ms; the runtime's own work (validate + track + "
        f"stage 1 + stage 2 + smoothing + groups, p50 sum) {c['own_10_ms']:.2f} ms.",
    ]


def allocator_lines(res: dict[str, Any]) -> list[str]:
    base = res.get("default_allocator")
    if not base or not res["sweeps"]:
        return []
    tuned = {r["people"]: r for r in res["sweeps"][0]["people"]}
    lines = [
        "## Allocator: tuned (`pairedge.runtime.memory.tune_allocator`) vs glibc default",
        "",
        f"Flow {base['flow']}; p50 ms. The default allocator maps and unmaps every temporary above 128 KiB "
        "(integral images, flow planes) on every frame: page faults and zero-filling.",
        "",
        "| people | allocator | features | stage 1 | total | flow alone | overhead ratio |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in base["people"]:
        for name, row in (("default", r), ("tuned", tuned.get(r["people"]))):
            if row is None:
                continue
            st, fa = row["stages_ms"], row["flow_alone_ms"]["p50"]
            lines.append(
                f"| {row['people']} | {name} | {st['features']['p50']:.2f} | {st['stage1']['p50']:.2f} | "
                f"{st['total']['p50']:.2f} | {fa:.2f} | {st['total']['p50'] / fa:.2f}x |"
            )
    return [*lines, ""]


def accuracy_lines(res: dict[str, Any]) -> list[str]:
    acc = res.get("accuracy")
    if not acc:
        return []
    first = acc[0]
    lines = [
        "## Accuracy per flow setting (same model, held-out simulator scenes, ground-truth boxes)",
        "",
        f"Scenes: {', '.join(first['scenes'])}, {first['frames_per_scene']} frames each; pooled pairwise "
        "metrics (stage 1 on all pairs; stage 2 on the true pairs, a pair stage 1 missed counts wrong).",
        "",
        "| flow | scored pairs | " + " | ".join(ACCURACY) + " |",
        "|---|---:|" + "---:|" * len(ACCURACY),
    ]
    for a in acc:
        cells = " | ".join(f"{a['pooled'][m]:.3f}" for m in ACCURACY)
        lines.append(f"| {a['pipeline']['flow']} | {a['scored_pairs']} | {cells} |")
    return [*lines, ""]


PLOTTED = ("flow", "features", "stage1", "stage2")


def plot(res: dict[str, Any], path: Any) -> str | None:
    """PNG: p50 ms per stage (stacked) against the number of people, one panel per flow setting, with the
    measured p50 total as a line. Returns None, or why no plot was written (matplotlib missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"no plot: matplotlib is not installed ({exc})"
    sweeps = res["sweeps"]
    fig, axes = plt.subplots(1, len(sweeps), figsize=(4.2 * len(sweeps), 3.6), sharey=True, squeeze=False)
    for ax, sweep in zip(axes[0], sweeps, strict=True):
        people = [r["people"] for r in sweep["people"]]
        x = range(len(people))
        bottom = [0.0] * len(people)
        for stage in PLOTTED:
            v = [r["stages_ms"][stage]["p50"] for r in sweep["people"]]
            ax.bar(x, v, bottom=bottom, label=stage)
            bottom = [b + d for b, d in zip(bottom, v, strict=True)]
        ax.plot(x, [r["stages_ms"]["total"]["p50"] for r in sweep["people"]], "k.-", label="total")
        ax.set_xticks(list(x), [str(p) for p in people])
        ax.set_xlabel("people in the frame")
        ax.set_title(f"flow {sweep['flow']}", fontsize=9)
    axes[0][0].set_ylabel("ms per frame (p50)")
    axes[0][0].legend(fontsize=8, loc="upper left")
    fig.suptitle("pairedge runtime, 640 x 480, one thread: per-stage p50 latency", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "# Streaming runtime benchmark",
        "",
        f"Machine: {res['machine']}",
        "",
        f"Models: {res['models']}",
        "",
        f"Scene: {res['scene']}; allocator tuned: {res['allocator_tuned']}",
        "",
    ]
    for sweep in res["sweeps"]:
        first = sweep["people"][0]["pipeline"]
        lines += [
            f"## Flow {sweep['flow']}: per-stage latency at 640 x 480, single thread (ms, p50 / p90 / p99)",
            "",
            f"Pipeline: spec {first['feature_spec']}, feature kernels "
            f"{first.get('feature_kernels', 'numpy')}, flow {first['flow']}, "
            f"classifier {first['stage1']}",
            "",
            *latency_table(sweep),
            "",
            *criteria_lines(sweep["criteria"]),
            "",
        ]
    lines += allocator_lines(res)
    lines += accuracy_lines(res)
    if "long_run" in res:
        lr = res["long_run"]
        lines += [
            "## Long run",
            "",
            f"{lr['frames']} frames in {lr['seconds']:.0f} s; resident memory "
            f"{lr['rss_after_warmup_mb']:.1f} MiB after {lr['warmup_frames']} warm-up frames, peak "
            f"{lr['peak_rss_after_warmup_mb']:.1f} MiB afterwards (sampled every 500 frames): growth "
            f"**{lr['growth_mb']:.2f} MiB** (target < 5 MB); state at the end {lr['state_at_end']}.",
            "",
        ]
    return "\n".join(lines)
