"""The Markdown of bench_calibrate.py."""

from __future__ import annotations

from typing import Any

from _calibrate_bench import SIZES


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.2f} %"


def _g(v: Any, fmt: str = ".3g") -> str:
    return "-" if not isinstance(v, int | float) else format(v, fmt)


def _macs(m: dict[str, Any]) -> str:
    """``int8 MACs of total (share)`` per stage, e.g. ``2,976 of 2,976 (100 %) / ...``."""
    parts = [f"{v['int8']:,} of {v['fp32']:,} ({100 * v['int8_share']:.0f} %)" for v in m.values() if v]
    return " / ".join(parts) if parts else "-"


def selection_lines(d: dict[str, Any]) -> list[str]:
    sets = list(d["calibration_sets"])
    lines = [
        "## Selection of the defaults (selection rows only; every Gemm int8)",
        "",
        f"Rows: {', '.join(d['selection_rows'])} (300 frames each). Per calibration set ({', '.join(sets)}): "
        "stage-1 gate / stage-2 top-1 agreement (gated pairs), MPCA drop (points, truth-labelled stage-2 "
        "rows) and failing windows of a 30-frame parity pack's size (stage 1 + stage 2, parity's int8 "
        "tolerances at the logits and labels levels). Rule: every agreement >= "
        f"{100 * d['min_selection_agreement']:.1f} % and every MPCA drop <= "
        f"{d['max_selection_mpca_drop_points']:g} points, then the fewest failing windows, then the highest "
        "agreement. Every candidate is plain int8 (the fp32 Gemm shapes, the same cost).",
        "",
        "| candidate | "
        + " | ".join(f"{s}: agreement 1 / 2, MPCA drop, failing windows" for s in sets)
        + " | failing windows | int8 MACs per pair (stage 1 / 2) |",
        "|---|" + "---:|" * (len(sets) + 2),
    ]
    for name, e in d["selection"].items():
        cells = []
        for s in sets:
            v = e["sets"][s]
            cells.append(
                f"{_pct(v['stage1']['agreement'])} / {_pct(v['stage2']['agreement'])}, "
                f"{v['mpca_drop_points']:+.2f}, "
                f"{v['stage1']['failing_windows'] + v['stage2']['failing_windows']}"
            )
        mark = " **(selected)**" if name == d["selected"] else ""
        lines.append(
            f"| {name}{mark} | " + " | ".join(cells) + f" | {e['failing_windows']}/{e['windows']} | "
            f"{_macs(e['macs'])} |"
        )
    met = (
        ""
        if d.get("rule_met", True)
        else (
            " No candidate reaches the rule's agreement bound on every set: the selected one is "
            "the rule's order without that bound (fewest failing windows, then agreement)."
        )
    )
    lines += [
        "",
        f"Selected: **{d['selected']}**; calibrate's defaults ({d['default_options']}) are the selected "
        f"candidate: **{'yes' if d['default_is_selected'] else 'no'}**.{met}",
    ]
    return lines


HEADER = [
    "| set/variant | precision | Gemms int8 | stage-1 gate agreement | stage-2 top-1 agreement (gated) | "
    "stage-2 max abs logit error (gated) | fp32 MPCA | MPCA | MPCA drop (points) |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|",
]


def _line(name: str, e: dict[str, Any], precision: str, gemms: str) -> str:
    p = e[precision]
    g = p.get("stage2_gated", p["stage2"])
    return (
        f"| {name} | {precision} | {gemms} | {_pct(p['stage1']['agreement'])} | {_pct(g['agreement'])} | "
        f"{g['max_abs_logit_error']:.3g} | {e['fp32_mpca']:.4f} | {p['mpca']:.4f} | "
        f"{p['mpca_drop_points']:+.2f} |"
    )


def headline_lines(d: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for seeds in d["test_seeds"]:
        lines += [
            "",
            f"## Headline: test seeds {seeds} ({', '.join(d['presets'])}, {d['frames']} frames)",
            "",
            *HEADER,
        ]
        for name, v in d["results"].items():
            floats = sum(len(f) for f in v["float_nodes"].values())
            gemms = "all" if not floats else f"{floats} in float"
            for precision in ("int8", "fp16"):
                if precision == "fp16" and not name.endswith("/default"):
                    continue
                lines.append(_line(name, v["test"][seeds], precision, gemms if precision == "int8" else "-"))
    lines += [
        "",
        "Gemms kept in float (no Q/DQ; fp16 on TensorRT) and the multiply-adds per pair done in int8 "
        "(stage 1 / 2) per variant:",
        "",
    ]
    lines += [f"- {name}: {v['float_nodes']}; {_macs(v['macs'])}" for name, v in d["results"].items()]
    return lines


def parity_lines(d: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"## parity check on held-out packs ({d['packs']}, 60 frames, default tolerances)",
        "",
        "| calibration set | pack / precision | verdict | failing levels | stage-1 logit max / p99 | "
        "stage-2 logit max / p99 | gate agreement | top-1 agreement (pairs) |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for name, v in d["results"].items():
        for key, c in v.get("parity", {}).items():
            lines.append(
                f"| {name} | {key} | {'PASS' if c['passed'] else 'FAIL'} | {', '.join(c['failing']) or '-'} "
                "| "
                f"{_g(c['stage1_logit_max'])} / {_g(c['stage1_logit_p99'])} | {_g(c['stage2_logit_max'])} / "
                f"{_g(c['stage2_logit_p99'])} | {_pct(c['gate_agreement'])} | {_pct(c['top1_agreement'])} "
                f"({c['top1_pairs']}) |"
            )
    return lines


def latency_lines(d: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Cost per precision (readme/default; `pairedge.compare.cost.precision_costs`, what calibrate and "
        "bench print)",
        "",
        "ONNX Runtime CPU, one intra-op thread, p50 ms per call of interleaved runs. TensorRT "
        "and DLA timing are not measured here (no Jetson).",
        "",
        "| stage | precision | MACs per pair | in int8 | bytes | "
        + " | ".join(f"ms @ {n}" for n in SIZES)
        + " | vs fp32 @ 512 |",
        "|---|---|---:|---:|---:|" + "---:|" * len(SIZES) + "---:|",
    ]
    for stage, costs in d["latency_ms"].items():
        for precision, c in costs.items():
            lat = {int(k): v for k, v in c["latency_ms"].items()}
            ratio = {int(k): v for k, v in c.get("vs_fp32", {}).items()}.get(512)
            lines.append(
                f"| {stage[-1]} | {precision} | {c['macs_per_pair']:,} | {100 * c['int8_share']:.0f} % | "
                f"{c['bytes']:,} | "
                + " | ".join(f"{lat[n]:.3f}" for n in SIZES)
                + f" | {'-' if ratio is None else f'{ratio:.2f}x'} |"
            )
    return lines


def markdown(r: dict[str, Any]) -> str:
    d = r["default"]
    lines = [
        "# bench_calibrate: how calibrate's defaults were chosen, INT8 / FP16 parity, latency",
        "",
        f"Command: `{r['command']}`",
        "",
        f"Bundled model `{d['model']}`. Calibration sets: "
        + "; ".join(f"**{k}** `{v}`" for k, v in d["calibration_sets"].items())
        + f". Test seeds {', '.join(d['test_seeds'])} and the parity packs: never used for training, "
        f"calibration or a choice. Targets: {r['targets']}.",
        "",
        *selection_lines(d),
        *headline_lines(d),
        *parity_lines(d),
        *latency_lines(d),
        "",
        f"Total {r['seconds']} s. Environment: {r['environment']}",
        "",
    ]
    return "\n".join(lines)
