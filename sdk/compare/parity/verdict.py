"""The parity report: one PASS/FAIL verdict over four levels, as JSON and Markdown."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pairedge.compare.parity.levels import FAIL, SKIP, LevelResult
from pairedge.core import limits

#: Relations of a candidate to the pack's model that let a check pass (see :mod:`.identity`).
VERIFIED_RELATIONS = ("same", "derived")


@dataclass(frozen=True)
class ParityReport:
    """What ``pairedge parity check`` found.

    Attributes:
        pack: the pack's path, clip source, frame and pair counts and its reference settings.
        candidate: the checked model (folder, precision, relation to the pack's model, pipeline).
        mode: "full" (the clip replayed through the device pipeline) or "model-only".
        levels: features, logits, labels, task.
        tolerances: the thresholds applied.
    """

    pack: dict[str, Any]
    candidate: dict[str, Any]
    mode: str
    levels: tuple[LevelResult, ...]
    tolerances: dict[str, Any]

    @property
    def identity_verified(self) -> bool:
        """True when the candidate is the pack's model or derived from it (hashes, recorded provenance)."""
        return self.candidate.get("relation") in VERIFIED_RELATIONS

    @property
    def passed(self) -> bool:
        """Every level passes (or is skipped, one at least ran) and the candidate is the pack's model."""
        levels_ok = all(lv.status != FAIL for lv in self.levels) and any(
            lv.status != SKIP for lv in self.levels
        )
        return levels_ok and self.identity_verified

    @property
    def first_failure(self) -> LevelResult | None:
        return next((lv for lv in self.levels if lv.status == FAIL), None)

    def verdict(self) -> str:
        """The one line: ``PASS ...`` or ``FAIL at <level>: <first problem>``."""
        c = self.candidate
        what = f"{c.get('precision', '?')} model: {c.get('name') or c.get('model')} ({self.mode})"
        if self.passed:
            checked = ", ".join(lv.name for lv in self.levels if lv.status != SKIP)
            return f"PASS: {what} matches the pack's fp32 reference ({checked} within tolerance)"
        parts = [] if self.identity_verified else [f"model mismatch: {self.candidate.get('identity_note')}"]
        first = self.first_failure
        if first is not None:
            more = f" (+{len(first.problems) - 1} more)" if len(first.problems) > 1 else ""
            parts.append(f"at {first.name}: {first.problems[0]}{more}")
        elif not any(lv.status != SKIP for lv in self.levels):
            parts.append("no level could run")
        head = "FAIL " + parts[0] if parts[0].startswith("at ") else "FAIL: " + parts[0]
        return "; ".join([head, *parts[1:]]) + f" — {what}"

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "verdict": "PASS" if self.passed else "FAIL",
                "summary": self.verdict(),
                "mode": self.mode,
                "pack": self.pack,
                "candidate": self.candidate,
                "levels": [asdict(lv) for lv in self.levels],
                "tolerances": self.tolerances,
            }
        )

    def write_json(self, path: str | Path) -> Path:
        return _write(path, json.dumps(self.to_dict(), indent=2) + "\n", "the parity report (--json)")

    def write_markdown(self, path: str | Path) -> Path:
        return _write(path, self.markdown(), "the parity report (--md)")

    def markdown(self) -> str:
        c, p = self.candidate, self.pack
        lines = [
            "# Parity check",
            "",
            f"**{self.verdict()}**",
            "",
            f"- Pack: `{p.get('path')}` — {p.get('source')}, {p.get('frames')} frames, {p.get('pairs')} "
            f"pair-frames; reference flow {p.get('reference', {}).get('flow', {}).get('repr')}",
            f"- Candidate: `{c.get('model')}`, precision {c.get('precision')}, "
            f"{c.get('pipeline', {}).get('stage1')}, flow {c.get('flow', {}).get('repr')}; "
            f"{c.get('identity_note')}",
            f"- Integrity: {c.get('integrity') or '-'}",
            f"- Mode: {self.mode}",
            *([f"- Replayed from the pack: {replayed_line(p['replayed'])}"] if p.get("replayed") else []),
            "",
            "| level | status | problems |",
            "|---|---|---|",
        ]
        for lv in self.levels:
            text = "; ".join(lv.problems) or "; ".join(lv.notes) or "-"
            lines.append(f"| {lv.name} | {lv.status} | {text.replace('|', '/')} |")
        lines += ["", *self._details()]
        return "\n".join(lines) + "\n"

    def _details(self) -> list[str]:
        out: list[str] = []
        by = {lv.name: lv for lv in self.levels}
        cols = by["features"].metrics.get("columns") if "features" in by else None
        if cols:
            top = sorted(cols.items(), key=lambda kv: -kv[1]["p99"])[:10]
            out += [
                "## Features: largest drift (units of the model's normalisation std)",
                "",
                "| column | max | mean | p99 |",
                "|---|---:|---:|---:|",
            ]
            out += [f"| {n} | {s['max']:.3g} | {s['mean']:.3g} | {s['p99']:.3g} |" for n, s in top] + [""]
        lg = by.get("logits")
        if lg and lg.status != SKIP:
            out += ["## Logits: absolute error", "", "| stage | max | mean | p99 |", "|---|---:|---:|---:|"]
            out += [
                f"| {st} | {s['max']:.3g} | {s['mean']:.3g} | {s['p99']:.3g} |"
                for st, s in lg.metrics.items()
                if isinstance(s, dict)
            ]
            out += [
                "",
                f"stage2: the {lg.metrics.get('stage2_pairs', '?')} pair-frames the reference gates (what "
                "stage 2 classifies in the pipeline); stage2_all_pairs: every pair, for information.",
                "",
            ]
        lb = by.get("labels")
        if lb and lb.status != SKIP:
            m = lb.metrics
            out += [
                "## Labels",
                "",
                f"- Stage-1 gate agreement {m['gate_agreement']:.4f}; stage-2 top-1 agreement "
                f"{m['top1_agreement']:.4f} on {m['top1_pairs']} {m['top1_scope']}",
                f"- Reference (rows) vs device (columns) top-1: {m['reference_vs_device']}",
            ]
            if "confusion_delta_vs_truth" in m:
                out.append(
                    f"- Confusion delta vs truth (device - reference): {m['confusion_delta_vs_truth']}"
                )
            out.append("")
        tk = by.get("task")
        if tk and tk.status != SKIP:
            out += [
                "## Task metric vs truth",
                "",
                "| metric | reference | device | delta |",
                "|---|---:|---:|---:|",
            ]
            for name, d in tk.metrics["delta"].items():
                out.append(
                    f"| {name} | {tk.metrics['reference'][name]:.4f} | {tk.metrics['device'][name]:.4f} | "
                    f"{d:+.4f} |"
                )
            out.append("")
        return out


def replayed_line(r: dict[str, Any]) -> str:
    """One sentence of what the check replayed as packed
    (:func:`pairedge.compare.parity.check.replayed_state`)."""
    n = r.get("box_shape_ignored_frames", 0)
    ratio = f" (detector ratio {r['fixed_ratio']:.4f})" if r.get("fixed_ratio") else ""
    shape = f"box shape ignored on {n} frame(s){ratio}" if n else "box shape used on every frame"
    taus = ", ".join(f"{t:g}" for t in r.get("gate_thresholds", []))
    changes = f", changing at clip frame(s) {r['gate_changes_at']}" if r.get("gate_changes_at") else ""
    start = (
        f"; the clip starts at frame {r['start']} of the stream (its state there restored)"
        if r.get("stream_state")
        else ""
    )
    return f"{shape}; gate threshold {taus}{changes}{start}"


def _write(path: str | Path, text: str, what: str) -> Path:
    """Write ``text`` to ``path``; an existing path that is not a regular file (a FIFO would block, a device
    swallow the report) is refused first."""

    out = Path(path).expanduser()
    if out.exists():
        limits.regular_file(out, f"a file to overwrite with {what}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return out


def json_safe(value: Any) -> Any:
    """``value`` made JSON-safe: non-finite floats -> None, keys -> str, tuples and numpy arrays -> lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if hasattr(value, "tolist"):
        return json_safe(value.tolist())
    return value
