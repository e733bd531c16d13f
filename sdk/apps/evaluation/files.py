"""Files of ``pairedge eval``: ``eval.json``, ``eval.md`` and ``confusion.png`` (drawn with OpenCV)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from pairedge.apps.evaluation.confusion_png import render, write_png
from pairedge.apps.evaluation.evaluate import EvalReport
from pairedge.measure.metrics.pairwise.report import ACCURACY_LABELS, DEFINITIONS
from pairedge.measure.metrics.result import Table

METRICS = (
    "accuracy",
    "accuracy_scored",
    "mpca",
    "macro_f1",
    "pair_precision",
    "pair_recall",
    "pair_f1",
    "group_activity_accuracy",
    "group_f1",
)


def metric_label(name: str) -> str:
    """How tables name a metric: the two accuracies say what they count."""

    return ACCURACY_LABELS.get(name, name)


def summary_table(report: EvalReport) -> Table:
    """The headline metrics as a narrow two-column table (one metric per row) for the terminal."""
    s = report.summary()
    rows = tuple((metric_label(m), _fmt(s[m])) for m in METRICS)
    return Table(f"pooled over {len(report.sources)} source(s)", ("metric", "value"), rows)


def _legend() -> list[str]:

    return [f"- `{k}`: {label}; {DEFINITIONS[k]}" for k, label in ACCURACY_LABELS.items()]


def _fmt(v: float | None) -> str:
    return "-" if v is None or not np.isfinite(v) else f"{v:.4f}"


def markdown(report: EvalReport) -> str:
    """The report as Markdown: settings, headline metrics, per-source rows, confusion matrix, latency."""
    s = report.summary()
    lines = [
        "# pairedge eval",
        "",
        f"- Model: `{report.model}` ({report.precision}); classifier {report.backend}; flow {report.flow}",
        f"- Sources ({len(report.sources)}): {', '.join(report.sources)}",
        f"- Frames {report.frames}, pair-frames scored by stage 1 {report.pairs}",
        "",
        "| " + " | ".join(METRICS) + " |",
        "|" + "---:|" * len(METRICS),
        "| " + " | ".join(_fmt(s[m]) for m in METRICS) + " |",
        "",
        *_legend(),
        "",
    ]
    if len(report.per_source) > 1:
        lines += [
            "## Per source",
            "",
            "| source | frames | " + " | ".join(METRICS) + " |",
            "|---|---:|" + "---:|" * len(METRICS),
        ]
        for row in report.per_source:
            lines.append(
                f"| {row['source']} | {row['frames']} | "
                + " | ".join(_fmt(row.get(m)) for m in METRICS)
                + " |"
            )
        lines.append("")
    if report.has_truth:
        lines += [
            "## Confusion matrix (rows = truth, columns = prediction)",
            "",
            "| truth \\ pred | " + " | ".join(report.labels) + " | missing |",
            "|---|" + "---:|" * (len(report.labels) + 1),
        ]
        for k, name in enumerate(report.labels):
            cells = " | ".join(str(int(v)) for v in report.confusion[k])
            lines.append(f"| {name} | {cells} | {int(report.missing[k])} |")
        lines.append("")
    lines += [
        "## Latency (mean ms per frame)",
        "",
        "| " + " | ".join(report.latency_ms) + " |",
        "|" + "---:|" * len(report.latency_ms),
        "| " + " | ".join(f"{v:.3f}" for v in report.latency_ms.values()) + " |",
        "",
    ]
    if report.notes:
        lines += ["## Notes", "", *(f"- {n}" for n in report.notes), ""]
    return "\n".join(lines)


def confusion_png(report: EvalReport, path: Path) -> str | None:
    """Write the confusion matrix as a PNG heat-map (OpenCV, no optional package); None, or why it was
    skipped.

    An unwritable ``path`` raises ``OSError``, as for ``eval.json`` and ``eval.md``.
    """
    if not report.has_truth:
        return "no ground truth: no confusion matrix"
    if not report.labels:
        return "no classes: no confusion matrix"
    title = f"{Path(report.model).name} {report.precision}: MPCA {_fmt(report.summary()['mpca'])}"
    drawn = render(report.confusion, report.labels, title=title, missing=report.missing)
    write_png(drawn.image, path)
    return None


def write_eval(report: EvalReport, out: str | Path) -> dict[str, str]:
    """Write ``eval.json``, ``eval.md`` and ``confusion.png`` into ``out``; returns name -> path (and
    notes)."""
    folder = Path(out).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    files = {"json": str(folder / "eval.json"), "markdown": str(folder / "eval.md")}
    skipped = confusion_png(report, folder / "confusion.png")
    data = report.to_dict()
    if skipped is None:
        files["png"] = str(folder / "confusion.png")
    else:
        data["notes"] = [*data["notes"], skipped]
        files["png_skipped"] = skipped
    (folder / "eval.json").write_text(json.dumps(data, indent=2) + "\n")
    md = markdown(report) + (f"\n- {skipped}\n" if skipped else "")
    (folder / "eval.md").write_text(md)
    return files
