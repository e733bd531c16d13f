"""Collect a ``benchmarks/jetson/run_all.sh`` run into one Markdown report (``report.md`` in the run folder).

Usage: ``python benchmarks/jetson/report.py RUN_FOLDER``. Reads ``status.tsv`` (step, exit code, command),
``doctor.json``, every engine manifest under ``model/engines/``, ``parity-*.md`` and ``bench/bench.md``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _status(run: Path) -> list[str]:
    lines = ["| step | exit code | command |", "|---|---|---|"]
    path = run / "status.tsv"
    for row in path.read_text().splitlines() if path.is_file() else []:
        name, rc, command = (row.split("\t") + ["", ""])[:3]
        lines.append(f"| {name} | {'ok' if rc == '0' else f'**{rc}**'} | `{command}` |")
    return lines


def _doctor(run: Path) -> list[str]:
    try:
        data = json.loads((run / "doctor.json").read_text())
    except (OSError, json.JSONDecodeError):
        return ["(no readable doctor.json)"]
    checks = data.get("checks", data) if isinstance(data, dict) else data
    lines = ["| component | ok | detail |", "|---|---|---|"]
    for check in checks if isinstance(checks, list) else []:
        if isinstance(check, dict):
            lines.append(f"| {check.get('name', '')} | {check.get('ok', '')} | {check.get('detail', '')} |")
    return lines if len(lines) > 2 else ["```", json.dumps(data, indent=1)[:4000], "```"]


def _engines(run: Path) -> list[str]:
    lines = [
        "| engine | TensorRT | device | precision | profile | size (bytes) | build s | builder flags |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for path in sorted((run / "model" / "engines").glob("*/*.engine.json")):
        m = json.loads(path.read_text())
        p, b = m["profile"], m.get("build", {})
        lines.append(
            f"| {path.parent.name}/{m['engine']['file']} | {m['tensorrt_version']} | {m['device_name']} "
            f"sm{m['compute_capability'].replace('.', '')} | {m['precision']} | {p['min']}/{p['opt']}/{p['max']} | "
            f"{m['engine']['size']} | {b.get('seconds', '')} | {', '.join(b.get('builder_flags', [])) or '-'} |"
        )
    return lines if len(lines) > 2 else ["(no engines were built)"]


def _embed(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.is_file() else [f"({path.name} missing: see logs/)"]


def write_report(run: Path) -> Path:
    parts = [f"# pairedge on a Jetson: {run.name}", "", "## Steps", *_status(run), "", "## This machine",
             *_doctor(run), "", "## Engines", *_engines(run), ""]  # fmt: skip
    for precision in ("fp32", "fp16", "int8"):
        parts += [f"## Parity, native TensorRT {precision}", *_embed(run / f"parity-{precision}.md"), ""]
    parts += ["## Benchmark", *_embed(run / "bench" / "bench.md"), ""]
    out = run / "report.md"
    out.write_text("\n".join(parts) + "\n")
    return out


if __name__ == "__main__":
    print(write_report(Path(sys.argv[1])))
