"""Helpers of ``bench_precisions.py``: int8 coverage of a QDQ model, parity checks through the CLI,
Markdown."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

COMPUTE_OPS = ("Gemm", "MatMul")


def int8_coverage(path: Path) -> dict[str, Any]:
    """How many Gemm / MatMul nodes of an ONNX file compute in int8: both inputs come from DequantizeLinear
    (so TensorRT's explicit quantization fuses them into an int8 layer). ``float``: the names of the
    others."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    producer = {out: node.op_type for node in graph.node for out in node.output}
    compute = [n for n in graph.node if n.op_type in COMPUTE_OPS]
    in_int8 = [n for n in compute if all(producer.get(i) == "DequantizeLinear" for i in n.input[:2])]
    return {
        "nodes": len(compute),
        "int8": len(in_int8),
        "float": [n.name or n.output[0] for n in compute if n not in in_int8],
    }


def run_cli(args: list[str], log: Path) -> int:
    """Run ``pairedge ARGS`` with its output in ``log``; the exit code."""
    with log.open("w") as f:
        return subprocess.run(["pairedge", *args], stdout=f, stderr=subprocess.STDOUT, check=False).returncode


def parity_summary(report_json: Path, rc: int) -> dict[str, Any]:
    """What a ``parity check --json`` report says: verdict, first failing level, the figures per level."""
    if not report_json.is_file():
        return {"verdict": "ERROR", "exit_code": rc, "summary": f"no report (exit {rc})"}
    data = json.loads(report_json.read_text())
    levels = {lv["name"]: lv for lv in data["levels"]}
    first = next((lv["name"] for lv in data["levels"] if lv["status"] == "FAIL"), None)
    feats = levels.get("features", {}).get("metrics", {}).get("columns", {})
    lg, lb = levels.get("logits", {}).get("metrics", {}), levels.get("labels", {}).get("metrics", {})
    task = levels.get("task", {}).get("metrics", {})
    return {
        "verdict": data["verdict"],
        "exit_code": rc,
        "summary": data["summary"],
        "first_failure": first,
        "features_max_drift_std": max((c["max"] for c in feats.values()), default=None),
        "stage1_logit_max": (lg.get("stage1") or {}).get("max"),
        "stage2_logit_max": (lg.get("stage2") or {}).get("max"),
        "gate_agreement": lb.get("gate_agreement"),
        "top1_agreement": lb.get("top1_agreement"),
        "near_tie_disagreements": [
            lb.get("gate_near_tie_disagreements"),
            lb.get("top1_near_tie_disagreements"),
        ],
        "mpca_delta": (task.get("delta") or {}).get("mpca"),
        "statuses": {k: v["status"] for k, v in levels.items()},
    }


def _pct(v: Any) -> str:
    return "-" if not isinstance(v, int | float) else f"{v:.2%}"


def _g(v: Any, fmt: str = ".3g") -> str:
    return "-" if not isinstance(v, int | float) else format(v, fmt)


def accuracy_table(res: dict[str, Any]) -> list[str]:
    lines = [
        "| variant | files | Gemm/MatMul in int8 | stage-1 gate agreement | stage-2 top-1 agreement | "
        "near-tie disagreements (gate / top-1) | MPCA | MPCA drop (points) | max abs logit error (stage 1 / "
        "2) | "
        "target | meets it | classifier ms @100 people |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|",
    ]
    for name, v in res["variants"].items():
        a, cov, t = v["agreement"], v.get("int8_coverage"), v["target"]
        int8 = (
            "-"
            if cov is None
            else f"{cov['stage1']['int8']}/{cov['stage1']['nodes']} + "
            f"{cov['stage2']['int8']}/{cov['stage2']['nodes']}"
        )
        target = (
            f">= {t['min_gate_agreement']:.1%} / {t['min_top1_agreement']:.1%}, drop <= "
            f"{t['max_mpca_drop'] * 100:.1f}"
        )
        meets = "yes" if v["meets_target"] else "**no**: " + "; ".join(v["problems"])
        lines.append(
            f"| {name} | `{v['files']}` | {int8} | {_pct(a['gate'])} ({_pct(a['gate_excl_near_ties'])}) | "
            f"{_pct(a['top1'])} ({_pct(a['top1_excl_near_ties'])}) | {a['gate_near_tie_disagreements']} / "
            f"{a['top1_near_tie_disagreements']} | {v['accuracy']['mpca']:.4f} | "
            f"{v['mpca_drop'] * 100 + 0.0:.2f} | "
            f"{_g(a['max_abs_logit_error_stage1'])} / {_g(a['max_abs_logit_error_stage2'])} | {target} | "
            f"{meets} | "
            f"{_g(v.get('speed_ms'), '.3f')} |"
        )
    return lines


def parity_table(res: dict[str, Any]) -> list[str]:
    packs = res["parity"]["packs"]
    lines = [
        "| pack | variant | verdict | first failing level | feature drift max (std) | logit max (stage 1 / "
        "2) | "
        "gate / top-1 agreement | MPCA delta |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for pack, checks in res["parity"]["checks"].items():
        for name, c in checks.items():
            lines.append(
                f"| {packs[pack]['label']} | {name} | {c['verdict']} | {c.get('first_failure') or '-'} | "
                f"{_g(c.get('features_max_drift_std'))} | {_g(c.get('stage1_logit_max'))} / "
                f"{_g(c.get('stage2_logit_max'))} | {_pct(c.get('gate_agreement'))} / "
                f"{_pct(c.get('top1_agreement'))} | {_g(c.get('mpca_delta'), '+.4f')} |"
            )
    return lines


def cost_table(res: dict[str, Any]) -> list[str]:
    """The per-precision cost (``pairedge.compare.cost.precision_costs``, what calibrate and bench print)."""
    if not res.get("cost"):
        return []
    lines = [
        "## Cost per precision (held-out rows; ONNX Runtime CPU, one thread, p50 ms; TensorRT and DLA timing "
        "are not measured here)",
        "",
        "| stage | variant | MACs per pair | in int8 | bytes | ms @1 | ms @64 | "
        "ms @512 | ms @4950 | vs fp32 @512 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for stage, variants in res["cost"].items():
        for name, c in variants.items():
            lat = {int(k): v for k, v in c["latency_ms"].items()}
            ratio = {int(k): v for k, v in c["vs_fp32"].items()}[512]
            lines.append(
                f"| {stage[-1]} | {name} | {c['macs_per_pair']:,} | {100 * c['int8_share']:.0f} % | "
                f"{c['bytes']:,} | "
                + " | ".join(f"{lat[n]:.3f}" for n in (1, 64, 512, 4950))
                + f" | {ratio:.2f}x |"
            )
    return [*lines, ""]


def markdown(res: dict[str, Any]) -> str:
    ref = res["reference"]
    lines = [
        "# Precisions of the bundled model: fp16, PTQ int8 (pairedge calibrate), QAT int8",
        "",
        f"Held-out data: `{res['data']}` ({ref['pair_frames']:,} pair-frames, {ref['scored_pairs']:,} true "
        "interacting pair-frames; seeds no training, calibration or choice used). Features computed once by "
        "the fp32 pipeline (ONNX Runtime CPU) and fed to every variant; every figure from "
        "`pairedge.compare.comparator`: stage-1 gate agreement on every pair-frame, stage-2 top-1 agreement "
        "on the pair-frames the fp32 reference gates (in brackets: with near-ties, fp32 decisions within "
        "1e-3 of the boundary, excepted, the judged figure), MPCA on the true interacting pair-frames vs "
        "the fp32 reference's. Classifier ms: p50 of stage 1 on 4,950 pairs + stage 2 on 512 pairs, ONNX "
        "Runtime CPU, one thread, variants interleaved.",
        "",
        *accuracy_table(res),
        "",
        *(
            []
            if any(v["target_kind"] == "qat" for v in res["variants"].values())
            else [
                "No QAT int8 in the bundled folder (`stage{1,2}.int8.onnx` absent): its row appears when it "
                "ships.",
                "",
            ]
        ),
        "Calibrations (training seeds only): "
        + "; ".join(
            f"`{' '.join(c['command'])}` ({c['seconds']:.0f} s)" for c in res["calibrations"].values()
        ),
        "",
        "`pairedge bench` on the README-argument folder, same data: its rows equal the comparator's figures "
        f"above: {'yes' if res['bench_matches'] else '**no**'}. {res['bench_recommendation']}",
        "",
        *(f"- bench note: {n}" for n in (res.get("bench") or {}).get("notes", [])),
        "",
        "## Parity checks on held-out packs (`pairedge parity check --backend onnxruntime`, default "
        "tolerances)",
        "",
        *(f"- {p['label']}: `{' '.join(p['command'])}`" for p in res["parity"]["packs"].values()),
        "",
        *parity_table(res),
        "",
        *cost_table(res),
        f"Total wall time: {res['seconds']:.0f} s ({res['machine']}).",
        "",
    ]
    return "\n".join(lines).replace(res.get("tmp", "\0"), "TMP")
