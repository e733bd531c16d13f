"""Training report: final metrics (JSON + Markdown, with the confusion matrix) and curves (PNG)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.errors import MissingDependencyError
from pairedge.core.optional import require
from pairedge.export.train import TrainResult


def report_dict(result: TrainResult) -> dict[str, Any]:
    """Everything about a run, JSON-serialisable."""
    return {
        "stage": result.stage,
        "labels": list(result.labels),
        "model": result.model_config.to_dict(),
        "num_parameters": result.num_parameters,
        "train_config": result.train_config.to_dict(),
        "data_fingerprint": result.data_fingerprint,
        "val_groups": result.val_groups,
        "best_epoch": result.best_epoch,
        "epochs_run": len(result.history),
        "validation": result.val_metrics,
        "training": result.train_metrics,
        "history": result.history,
        "info": result.info,
    }


def confusion_markdown(confusion: list[list[int]], labels: list[str] | tuple[str, ...]) -> str:
    """A Markdown table: rows = truth, columns = prediction."""
    short = [lab[:14] for lab in labels]
    lines = ["| truth \\ pred | " + " | ".join(short) + " |", "|---" * (len(labels) + 1) + "|"]
    for name, row in zip(labels, confusion, strict=True):
        lines.append(f"| {name} | " + " | ".join(str(v) for v in row) + " |")
    return "\n".join(lines)


def metrics_markdown(metrics: dict[str, Any]) -> str:
    """Headline numbers, the per-class table and the confusion matrix of one evaluation."""
    lines = [
        f"- rows: {metrics['n']}",
        f"- accuracy: {metrics['accuracy']:.4f}",
        f"- MPCA (classes present in the ground truth): {metrics['mpca']:.4f}",
        f"- MPCA (all classes, absent = 0): {metrics['mpca_all_classes']:.4f}",
        f"- macro-F1 (P = TP / (TP + FP)): {metrics['macro_f1']:.4f}",
        "",
        "| class | precision | recall | F1 | support |",
        "|---|---|---|---|---|",
    ]
    for name, row in metrics["per_class"].items():
        lines.append(
            f"| {name} | {row['precision']:.3f} | {row['recall']:.3f} | {row['f1']:.3f} | {row['support']} |"
        )
    lines += ["", "Confusion matrix (rows = truth, columns = prediction):", ""]
    lines.append(confusion_markdown(metrics["confusion"], metrics["labels"]))
    return "\n".join(lines)


def _augmented_lines(info: dict[str, Any]) -> list[str]:
    """Report lines of :func:`pairedge.export.augmented.train_augmented`'s copies and refit (none without)."""
    lines = []
    if info.get("augmented_rows"):
        lines.append(f"- plus {info['augmented_rows']} augmented rows (copies of the training sequences)")
    if info.get("refit"):
        r = info["refit"]
        lines.append(
            f"- **refit**: the model written is a fresh one trained on all {r['rows']} rows for "
            f"{r['epochs']} epochs; the validation numbers below are the early-stopped model's"
        )
    return lines


def report_markdown(result: TrainResult, title: str = "Training report") -> str:
    cfg = result.model_config
    return "\n".join(
        [
            f"# {title}",
            "",
            f"- stage {result.stage}, architecture `{cfg.architecture}`, hidden {list(cfg.hidden)}, "
            f"{result.num_parameters} parameters",
            f"- data fingerprint `{result.data_fingerprint}`",
            f"- best epoch {result.best_epoch} of {len(result.history)} run "
            f"(early stopping on validation MPCA, patience {result.train_config.patience})",
            f"- validation sequences ({len(result.val_groups)}): {', '.join(result.val_groups)}",
            *_augmented_lines(result.info),
            "",
            "## Validation",
            "",
            metrics_markdown(result.val_metrics),
            "",
            "## Training rows (best epoch)",
            "",
            f"accuracy {result.train_metrics['accuracy']:.4f}, MPCA {result.train_metrics['mpca']:.4f}, "
            f"macro-F1 {result.train_metrics['macro_f1']:.4f}",
            "",
        ]
    )


def plot_curves(result: TrainResult, path: Path) -> None:
    """Loss and validation accuracy / MPCA / macro-F1 per epoch (needs matplotlib)."""

    require("matplotlib", purpose="training curves")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = np.array([h["epoch"] for h in result.history])
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 3.8))
    ax0.plot(epochs, [h["loss"] for h in result.history])
    ax0.set(xlabel="epoch", ylabel="focal loss", title="training loss")
    for key in ("val_accuracy", "val_mpca", "val_macro_f1"):
        ax1.plot(epochs, [h[key] for h in result.history], label=key[4:])
    ax1.axvline(result.best_epoch, color="gray", linestyle="--", label="best")
    ax1.set(xlabel="epoch", ylabel="score", title="validation", ylim=(0, 1))
    ax1.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(result: TrainResult, out_dir: str | Path, title: str = "Training report") -> dict[str, Path]:
    """Write ``report.json``, ``report.md`` and (with matplotlib) ``curves.png``; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "markdown": out / "report.md"}
    paths["json"].write_text(json.dumps(report_dict(result), indent=2) + "\n")
    text = report_markdown(result, title)
    try:
        plot_curves(result, out / "curves.png")
        paths["curves"] = out / "curves.png"
        text += "\n![curves](curves.png)\n"
    except MissingDependencyError as exc:
        text += f"\n(no curves: {exc})\n"
    paths["markdown"].write_text(text)
    return paths
