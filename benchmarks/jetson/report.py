"""Collect a ``benchmarks/jetson/run_all.sh`` run into one Markdown report (``report.md`` in the run folder).

Usage: ``python benchmarks/jetson/report.py RUN_FOLDER``. Reads ``status.tsv`` (step, exit code or ``skip``,
command or the reason), ``variants.tsv`` (variant, folder, precision), ``doctor.json``, every engine
manifest under the model folders' ``engines/``, ``parity-<backend>-<variant>.json`` / ``.md`` and
``bench*/bench.json`` / ``bench.md``. The first table is the verdict per precision: the parity check of the
held-out pack and the bench gate, per backend; a step that was skipped says why and is never a PASS.

Prints the verdict lines and exits 1 when a step that ran failed or a verdict is neither PASS nor skipped
(a parity FAIL, a bench gate FAIL, a missing variant), else 0.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

BACKENDS = ("onnxruntime", "tensorrt")


def read_status(run: Path) -> dict[str, tuple[str, str]]:
    """step -> (exit code or "skip", command or the skip reason), in the order run."""
    path = run / "status.tsv"
    out: dict[str, tuple[str, str]] = {}
    for row in path.read_text().splitlines() if path.is_file() else []:
        name, rc, command = (row.split("\t") + ["", ""])[:3]
        out[name] = (rc, command)
    return out


def read_variants(run: Path) -> list[tuple[str, Path, str]]:
    """(variant, folder, precision) of every variant the run checked (fp32 / fp16 / int8 by default)."""
    path = run / "variants.tsv"
    rows = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        name, _, rest = line.partition("\t")
        folder, _, precision = rest.rpartition(" ")
        rows.append((name, Path(folder), precision))
    return rows or [(p, run / "model", p) for p in ("fp32", "fp16", "int8")]


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def parity_cell(run: Path, status: dict[str, tuple[str, str]], backend: str, variant: str) -> str:
    """PASS / FAIL (with the first failing level), skipped (reason), or what went wrong."""
    step = f"parity-{backend}-{variant}"
    rc, text = status.get(step, ("", ""))
    if rc == "skip":
        return f"skipped: {text}"
    data = _load(run / f"{step}.json")
    if isinstance(data, dict) and data.get("verdict") in ("PASS", "FAIL"):
        return str(data["verdict"]) if data["verdict"] == "PASS" else str(data.get("summary", "FAIL"))
    if not rc:
        return "not run"
    return f"error (exit {rc}, see logs/{step}.log)"


def bench_cell(
    run: Path, status: dict[str, tuple[str, str]], folder: Path, backend: str, precision: str
) -> str:
    """The bench gate of (backend, precision) in the bench of ``folder``: PASS / FAIL, or why there is
    none."""
    if backend == "tensorrt" and status.get("bench-tensorrt", ("",))[0] == "skip":
        return f"skipped: {status['bench-tensorrt'][1]}"
    step = "bench-calibrated" if folder.name == "calibrated" else "bench"
    data = _load(run / step / "bench.json")
    if not isinstance(data, dict):
        rc = status.get(step, ("",))[0]
        return "not run" if not rc else f"error (exit {rc}, see logs/{step}.log)"
    for row in data.get("rows", []):
        if row.get("backend") == backend and row.get("precision") == precision:
            if row.get("status") != "ok":
                return f"{row.get('status')}: {row.get('reason', '')}"
            a = row.get("agreement", {})
            figures = (
                f" (gate {_agree(a, 'gate')}; top-1 {_agree(a, 'top1')}; MPCA drop "
                f"{_num(row.get('mpca_drop'), 100)} points)"
            )
            return ("PASS" if row.get("gate_passed") else "FAIL") + figures
    return "not measured"


def _agree(a: dict[str, Any], key: str) -> str:
    """The agreement, and the judged figure when near-tie disagreements were excepted."""
    ties = a.get(f"{key}_near_tie_disagreements") or 0
    text = _pct(a.get(key))
    return (
        f"{text}, {_pct(a.get(f'{key}_excl_near_ties'))} with {ties} near-tie(s) excepted" if ties else text
    )


def _pct(v: Any) -> str:
    return "-" if not isinstance(v, int | float) else f"{v:.2%}"


def _num(v: Any, scale: float = 1.0) -> str:
    return "-" if not isinstance(v, int | float) else f"{v * scale + 0.0:.2f}"


def verdict_rows(run: Path) -> list[tuple[str, ...]]:
    """(variant, files, parity per backend..., bench gate per backend...) for every variant."""
    status = read_status(run)
    rows = []
    for name, folder, precision in read_variants(run):
        cells = [parity_cell(run, status, b, name) for b in BACKENDS]
        cells += [bench_cell(run, status, folder, b, precision) for b in BACKENDS]
        rows.append((name, f"{folder.name}/ {precision}", *cells))
    return rows


def _verdicts(run: Path) -> list[str]:
    pack = _load(run / "parity-onnxruntime-fp32.json") or {}
    bench = _load(run / "bench" / "bench.json") or {}
    source = (pack.get("pack") or {}).get("source")
    data = (bench.get("reference") or {}).get("data")
    lines = [
        f"Parity pack: {source or '(see parity-pack step)'}; bench data: `{data or '-'}` (held-out seeds: "
        "no training, calibration or choice used them).",
        "",
        "| variant | files | parity, onnxruntime | parity, tensorrt | bench gate, onnxruntime | bench gate, "
        "tensorrt |",
        "|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in verdict_rows(run)]
    return lines


def _status(run: Path) -> list[str]:
    lines = ["| step | exit code | command |", "|---|---|---|"]
    for name, (rc, command) in read_status(run).items():
        if rc == "skip":
            lines.append(f"| {name} | skipped | {command} |")
        else:
            lines.append(f"| {name} | {'ok' if rc == '0' else f'**{rc}**'} | `{command}` |")
    return lines


def _doctor(run: Path) -> list[str]:
    data = _load(run / "doctor.json")
    if data is None:
        return ["(no readable doctor.json)"]
    checks = data.get("checks", data) if isinstance(data, dict) else data
    lines = ["| component | ok | detail |", "|---|---|---|"]
    if isinstance(checks, dict):  # `pairedge doctor --json`: {name: {ok, detail}}
        checks = [{"name": k, **v} for k, v in checks.items() if isinstance(v, dict)]
    for check in checks if isinstance(checks, list) else []:
        if isinstance(check, dict):
            lines.append(f"| {check.get('name', '')} | {check.get('ok', '')} | {check.get('detail', '')} |")
    return lines if len(lines) > 2 else ["```", json.dumps(data, indent=1)[:4000], "```"]


def _engines(run: Path) -> list[str]:
    lines = [
        "| engine | TensorRT | device | precision | profile | size (bytes) | build s | builder flags |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for path in sorted(
        p for d in ("model", "calibrated") for p in (run / d / "engines").glob("*/*.engine.json")
    ):
        m = json.loads(path.read_text())
        p, b = m["profile"], m.get("build", {})
        lines.append(
            f"| {path.parent.name}/{m['engine']['file']} | {m['tensorrt_version']} | {m['device_name']} "
            f"sm{m['compute_capability'].replace('.', '')} | {m['precision']} | "
            f"{p['min']}/{p['opt']}/{p['max']} | "
            f"{m['engine']['size']} | {b.get('seconds', '')} | "
            f"{', '.join(b.get('builder_flags', [])) or '-'} |"
        )
    return lines if len(lines) > 2 else ["(no engines were built)"]


def _embed(path: Path, run: Path) -> list[str]:
    if path.is_file():
        return path.read_text().splitlines()
    return [f"({path.relative_to(run)} missing: see status and logs/)"]


def write_report(run: Path) -> Path:
    parts = [
        f"# pairedge on a Jetson: {run.name}",
        "",
        "## Verdicts per precision (held-out data)",
        *_verdicts(run),
        "",
        "## Steps",
        *_status(run),
        "",
        "## This machine",
        *_doctor(run),
        "",
        "## Engines",
        *_engines(run),
        "",
    ]
    status = read_status(run)
    for name, _, _ in read_variants(run):
        for backend in BACKENDS:
            rc, reason = status.get(f"parity-{backend}-{name}", ("", ""))
            body = (
                [f"skipped: {reason}"] if rc == "skip" else _embed(run / f"parity-{backend}-{name}.md", run)
            )
            parts += [f"## Parity, {name} on {backend}", *body, ""]
    for step in ("bench", "bench-calibrated"):
        if (run / step).is_dir() or step == "bench":
            parts += [f"## Benchmark ({step})", *_embed(run / step / "bench.md", run), ""]
    out = run / "report.md"
    out.write_text("\n".join(parts) + "\n")
    return out


def failures(run: Path) -> list[str]:
    """Steps that ran and did not exit 0, and verdicts that are neither PASS nor skipped (with the reason)."""
    out = [
        f"step {name} (exit {rc})" for name, (rc, _) in read_status(run).items() if rc not in ("0", "skip")
    ]
    heads = [f"parity on {b}" for b in BACKENDS] + [f"bench gate on {b}" for b in BACKENDS]
    for row in verdict_rows(run):
        out += [
            f"{row[0]}: {h}"
            for h, c in zip(heads, row[2:], strict=True)
            if not (c.startswith("PASS") or c.startswith("skipped:"))
        ]
    return out


def main(argv: list[str]) -> int:
    run = Path(argv[0])
    print(write_report(run))
    heads = [f"parity {b}" for b in BACKENDS] + [f"bench {b}" for b in BACKENDS]
    for row in verdict_rows(run):
        print(
            f"{row[0]}: "
            + "; ".join(
                f"{h} {c.split(' (')[0] if c.startswith('skipped') else c[:60]}"
                for h, c in zip(heads, row[2:], strict=True)
            )
        )
    bad = failures(run)
    if bad:
        print("NOT PASSED: " + ", ".join(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
