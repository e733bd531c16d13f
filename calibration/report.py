"""Calibration report: per-tensor ranges and held-out clipping rates, strata, parity; JSON and Markdown.

For every activation a QDQ model quantizes (the input of each activation ``QuantizeLinear``), the
calibrated range is ``[-128 s, 127 s]`` (symmetric int8, scale ``s``). The clipping rate is the fraction of
that tensor's held-out values outside the range, measured by running the quantized model itself on rows
that were not used for calibration.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.calibration.infer import session
from pairedge.calibration.qdq_graph import weighted_nodes
from pairedge.calibration.ranges import reads_features
from pairedge.compare.cost import gemm_macs
from pairedge.core.artefacts import CALIBRATION_FILE, CALIBRATION_REPORT_FILE
from pairedge.core.modelmeta import INPUT_NAME


def activation_ranges(qdq: Any, X: np.ndarray) -> list[dict[str, Any]]:
    """Per quantized activation: name, scale, range and the clipping rate over rows ``X`` (N, F).

    Returns a list of ``{"tensor", "scale", "range", "observed_max_abs", "clip_rate", "relu_follows"}`` in
    graph order. When every consumer of the tensor's dequantized value is a ReLU, the negative side is zeroed
    anyway and only values above the range count as clipped.
    """
    import onnx
    from onnx import numpy_helper

    consts = {t.name: numpy_helper.to_array(t) for t in qdq.graph.initializer}
    weights = set(consts)
    found: list[tuple[str, float]] = []
    for node in qdq.graph.node:
        if node.op_type == "QuantizeLinear" and node.input[0] not in weights:
            array = consts.get(node.input[1])
            if array is not None and array.size == 1 and node.input[0] not in {t for t, _ in found}:
                found.append((node.input[0], float(array.reshape(-1)[0])))
    users: dict[str, list[Any]] = {}
    for node in qdq.graph.node:
        for i in node.input:
            users.setdefault(i, []).append(node)

    def relu_follows(tensor: str) -> bool:
        after = [
            u
            for q in users.get(tensor, [])
            if q.op_type == "QuantizeLinear"
            for dq in users.get(q.output[0], [])
            if dq.op_type == "DequantizeLinear"
            for u in users.get(dq.output[0], [])
        ]
        return bool(after) and all(u.op_type == "Relu" for u in after)

    if not found or not len(X):
        return [{"tensor": t, "scale": s, "range": [-128 * s, 127 * s]} for t, s in found]
    probe = onnx.ModelProto()
    probe.CopyFrom(qdq)
    have = {o.name for o in probe.graph.output}
    for tensor, _ in found:
        if tensor not in have:
            probe.graph.output.append(onnx.helper.make_empty_tensor_value_info(tensor))
    names = [t for t, _ in found]
    values = session(probe).run(names, {INPUT_NAME: np.ascontiguousarray(X, np.float32)})
    out = []
    for (tensor, scale), value in zip(found, values, strict=True):
        scale = float(scale)
        lo, hi = -128.5 * scale, 127.5 * scale  # beyond half a step the value saturates
        v = np.asarray(value, np.float32)
        relu = relu_follows(tensor)
        clipped = (v > hi) if relu else ((v < lo) | (v > hi))
        out.append(
            {
                "tensor": tensor,
                "scale": scale,
                "range": [-128 * scale, 127 * scale],
                "observed_max_abs": float(np.abs(v).max()) if v.size else 0.0,
                "clip_rate": float(clipped.mean()) if v.size else 0.0,
                "relu_follows": relu,
            }
        )
    return out


#: What a node without Q/DQ costs inside a TensorRT INT8 engine (the Markdown report quotes these).
GEMM_COST = (
    "TensorRT runs it in fp16 (fp32 where the GPU has no fast fp16) inside the int8 engine, with a "
    "reformat between int8 and fp16 at its edges; Orin's tensor cores do twice as many int8 as fp16 "
    "MACs per clock, so it costs up to 2x its int8 time"
)
POINTWISE_COST = (
    "a point-wise op between quantized Gemms: TensorRT fuses it with the Gemm before it (ReLU) or "
    "with the quantization after it; no Gemm work leaves int8"
)


def float_nodes(model: Any, qdq: Any, config: Any, search: Any) -> dict[str, Any]:
    """Which nodes of a quantized stage compute in float, why, and what that costs on a Jetson.

    ``model``: the fp32 graph that was quantized; ``qdq``: the QDQ result; ``config``: its QuantConfig;
    ``search``: the mixed-precision SearchResult. Returns ``{"gemms", "gemms_in_float", "int8_macs_share",
    "nodes": [{"node", "op", "why", "macs_per_pair", "jetson_cost"}]}``.
    """

    dequantized = {n.output[0] for n in qdq.graph.node if n.op_type == "DequantizeLinear"}
    q_gemms = {
        n.name for n in qdq.graph.node if n.op_type in ("Gemm", "MatMul") and n.input[0] in dequantized
    }
    macs = {name: m for name, (m, _) in gemm_macs(model).items()}
    gemms, nodes = list(macs), []
    for n in model.graph.node:
        if n.op_type == "Constant" or (n.name in q_gemms):
            continue
        if n.name in macs:
            why = (
                "kept in float by the mixed-precision search: quantized alone, it leaves "
                f"{100 * search.sensitivity.get(n.name, float('nan')):.2f} % agreement on the search rows"
                if n.name in config.exclude
                else "no quantized input"
            )
            nodes.append(
                {
                    "node": n.name,
                    "op": n.op_type,
                    "why": why,
                    "macs_per_pair": macs[n.name],
                    "jetson_cost": GEMM_COST,
                }
            )
        elif n.op_type not in ("Sub", "Div") or n.input[0] != "features":
            nodes.append(
                {
                    "node": n.name,
                    "op": n.op_type,
                    "why": "point-wise, no weights (Q/DQ only on Gemm inputs)",
                    "macs_per_pair": 0,
                    "jetson_cost": POINTWISE_COST,
                }
            )
        else:
            nodes.append(
                {
                    "node": n.name,
                    "op": n.op_type,
                    "why": "input standardization (raw features in float32)",
                    "macs_per_pair": 0,
                    "jetson_cost": "one fused point-wise op on the raw input",
                }
            )
    floats = [g for g in gemms if g not in q_gemms]
    total = sum(macs.values()) or 1
    return {
        "gemms": gemms,
        "gemms_in_float": floats,
        "int8_macs_share": float(sum(macs[g] for g in gemms if g in q_gemms) / total),
        "nodes": nodes,
    }


def layer_plans_report(model: Any, plans: Any, config: Any) -> dict[str, Any]:
    """What the "gemm" placement does per quantized weight, and the multiply-adds an engine does.

    ``model``: the fp32 graph that was quantized; ``plans``: weight -> LayerPlan
    (:func:`pairedge.calibration.ranges.layer_plans`); ``config``: the QuantConfig (its ``exclude``).
    Returns ``{"weights": {name: {"nodes", "range", "headroom", "scale", "macs_per_pair",
    "int8_macs_per_pair"}}, "macs_per_pair": {"fp32", "int8", "float", "int8_share"}}`` ({} for the "all"
    placement): the int8 Gemms read their input once, so the engine's multiply-adds are fp32's, split into
    those done in int8 and those left in float.
    """

    if config.placement != "gemm" or not isinstance(plans, dict):
        return {}
    dims = {t.name: int(np.prod(t.dims)) for t in model.graph.initializer}
    weights, fp32, int8_total = {}, 0, 0
    for weight, nodes in weighted_nodes(model).items():
        quantized = [n.name for n in nodes if n.name not in config.exclude]
        macs = dims[weight] * len(nodes)
        fp32 += macs
        plan = plans.get(weight)
        if plan is None or not quantized:
            continue
        first = all(reads_features(model, n.input[0]) for n in nodes)
        int8 = dims[weight] * len(quantized)
        int8_total += int8
        weights[weight] = {
            "nodes": quantized,
            "range": plan.amax,
            "headroom": config.input_headroom if first else config.hidden_headroom,
            "scale": plan.scale,
            "macs_per_pair": macs,
            "int8_macs_per_pair": int8,
        }
    return {
        "weights": weights,
        "macs_per_pair": {
            "fp32": fp32,
            "int8": int8_total,
            "float": fp32 - int8_total,
            "int8_share": int8_total / max(fp32, 1),
        },
    }


def write_reports(folder: Path, report: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``calibration.json`` and ``calibration.md`` into ``folder``."""
    js = folder / CALIBRATION_FILE
    md = folder / CALIBRATION_REPORT_FILE
    js.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    md.write_text(markdown(report))
    return js, md


def _float_lines(st: dict[str, Any]) -> list[str]:
    """The report's plain statement of what computes in float, and what it costs on a Jetson."""
    info = st.get("float_nodes")
    if not info:
        return [f"Nodes kept in float (no Q/DQ): {', '.join(st['excluded_nodes']) or 'none'}."]
    n, f = len(info["gemms"]), info["gemms_in_float"]
    head = (
        f"**{n - len(f)} of {n} Gemms run in int8** ({100 * info['int8_macs_share']:.1f} % of the MACs)"
        + (f"; in float: {', '.join(f'`{g}`' for g in f)}." if f else ": an INT8 engine on a Jetson.")
    )
    lines = [head, ""]
    layers = st.get("layers") or {}
    if layers.get("weights"):
        cost = layers["macs_per_pair"]
        lines += [
            f"Every int8 Gemm reads its input once with int8 weights of the fp32 shape: {cost['fp32']:,} "
            f"multiply-adds per pair, as fp32, {cost['int8']:,} of them in int8 "
            f"({100 * cost['int8_share']:.1f} %).",
            "",
            "| weight | range | headroom | int8 step | MACs per pair |",
            "|---|---:|---:|---:|---:|",
        ]
        lines += [
            f"| `{w}` | {d['range']:.4g} | {d['headroom']:g}x | {d['scale']:.4g} | {d['macs_per_pair']:,} |"
            for w, d in layers["weights"].items()
        ]
        lines.append("")
    lines += ["| node in float | op | why | MACs per pair | on a Jetson |", "|---|---|---|---:|---|"]
    lines += [
        f"| `{d['node']}` | {d['op']} | {d['why']} | {d['macs_per_pair']} | {d['jetson_cost']} |"
        for d in info["nodes"]
    ]
    return lines


def cost_lines(st: dict[str, Any]) -> list[str]:
    """The per-precision cost table of a stage: multiply-adds per pair (in int8), bytes, ONNX Runtime CPU
    latency per pair count (:func:`pairedge.compare.cost.precision_costs`), and what stays in float."""
    cost = st.get("cost")
    if not cost:
        return []
    counts = list(next(iter(cost.values()))["latency_ms"])
    lines = [
        "Cost per precision (ONNX Runtime CPU, one thread, p50; TensorRT and DLA timing are not measured "
        "here):",
        "",
        "| precision | MACs per pair | in int8 | bytes | "
        + " | ".join(f"ms @ {n}" for n in counts)
        + " | vs fp32 @ 512 |",
        "|---|---:|---:|---:|" + "---:|" * len(counts) + "---:|",
    ]
    for name, c in cost.items():
        ratio = c.get("vs_fp32", {}).get(512, c.get("vs_fp32", {}).get("512"))
        lines.append(
            f"| {name} | {c['macs_per_pair']:,} | {100 * c['int8_share']:.0f} % | {c['bytes']:,} | "
            + " | ".join(f"{v:.3f}" for v in c["latency_ms"].values())
            + f" | {'-' if ratio is None else f'{ratio:.2f}x'} |"
        )
    mixed = st.get("mixed_precision")
    if mixed:
        kept = ", ".join(f"`{g}`" for g in mixed["float_gemms"]) or "none"
        lines += [
            "",
            f"Kept in float (fp16 on TensorRT): {kept} ({100 * mixed['float_macs_share']:.1f} % of the "
            f"multiply-adds); {mixed['why']}.",
        ]
    return lines


def _pct(v: float | None) -> str:
    return "n/a" if v is None or v != v else f"{100 * v:.2f} %"


def markdown(report: dict[str, Any]) -> str:
    """The Markdown form of a calibration report."""
    lines = [
        "# Calibration report",
        "",
        f"- model: `{report['model']['folder']}` (spec {report['model']['feature_spec']}, "
        f"labels {', '.join(report['model']['labels'])})",
        f"- method: **{report['method']}**, equalization: {report['equalize']}, "
        f"target agreement {report['target_agreement']}",
        f"- sources: {', '.join(report['sources'])}",
        f"- pairedge {report['pairedge_version']}, onnxruntime {report['onnxruntime_version']}",
        "",
        "## Inputs (SHA-256)",
        "",
        "| file | sha256 |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | `{sha}` |" for name, sha in report["inputs_sha256"].items()]
    for key, st in report["stages"].items():
        lines += [
            "",
            f"## {key}",
            "",
            f"Rows: {st['rows']['collected']} collected, {st['rows']['calibration']} used for calibration, "
            f"{st['rows']['held_out']} held out ({st['rows']['held_out_groups']} sequence(s)). Motion "
            f"tertile edges: {st['motion_edges']}.",
            "",
            "| stratum | collected | calibration |",
            "|---|---:|---:|",
        ]
        for name, n in st["strata"]["collected"].items():
            lines.append(f"| {name} | {n} | {st['strata']['calibration'].get(name, 0)} |")
        if st["warnings"]:
            lines += ["", "Warnings:", ""] + [f"- {w}" for w in st["warnings"]]
        scaled = (
            ", ".join(f"`{k}` ({v.get('folded_into', '')})" for k, v in st["equalized"].items()) or "none"
        )
        lines += [
            "",
            *_float_lines(st),
            "",
            f"Per-column scales absorbed before the Gemms of: {scaled}.",
            "",
            f"Held-out parity vs fp32 on the report rows ({st['rows'].get('report', '?')} rows of "
            f"{', '.join(st['rows'].get('report_groups', [])) or '?'}; never used for a choice; `_gated`: "
            "the rows the fp32 gate passes, which `parity check` judges):",
            "",
            "| precision | rows | agreement | max abs logit error | p99 |",
            "|---|---:|---:|---:|---:|",
        ]
        for prec, a in st["held_out"].items():
            lines.append(
                f"| {prec} | {a['n']} | {_pct(a['agreement'])} | {a['max_abs_logit_error']:.4g} | "
                f"{a['p99_abs_logit_error']:.4g} |"
            )
        lines += ["", *cost_lines(st)]
        if st["search"]["steps"]:
            lines += [
                "",
                "Mixed-precision search (agreement on the search rows after each node kept in float):",
                "",
            ]
            lines += [
                f"- {', '.join(s['excluded'][-1:]) or '(all quantized)'}: {_pct(s['agreement'])}"
                for s in st["search"]["steps"]
            ]
        lines += [
            "",
            "| tensor | range | held-out max abs | clipping rate (positive side only before a ReLU) |",
            "|---|---|---:|---:|",
        ]
        for t in st["tensors"]:
            clip = _pct(t.get("clip_rate"))
            lines.append(
                f"| `{t['tensor']}` | ±{t['range'][1]:.4g} | {t.get('observed_max_abs', float('nan')):.4g} | "
                f"{clip} |"
            )
    return "\n".join(lines) + "\n"
