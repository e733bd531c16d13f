"""``pairedge demo``: simulate a scene, run the bundled model, print interactions, metrics and latency."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from pairedge.apps.cli.app import app, console, handle_errors
from pairedge.apps.cli.settings import Chosen, with_settings
from pairedge.apps.cli.summary import check_scored, frame_progress, summary_table
from pairedge.apps.demo import DEMO_SEED, DemoOptions, cpu_deployment, run_demo
from pairedge.core.io.textio import printable
from pairedge.runtime.memory import tune_allocator
from rich.markup import escape

if TYPE_CHECKING:
    from pairedge.apps.demo import DemoResult, FrameExample


@app.command()
@handle_errors
@with_settings("model", "flow_preset", "flow_scale")
def demo(
    out: Path = typer.Option(
        Path("pairedge_demo"),
        "--out",
        help="Output folder (created); the files of an earlier demo there are "
        "replaced (demo.mp4, results.jsonl, pairs_gt*.jsonl, metrics.json, summary.json).",
    ),
    preset: str = typer.Option("static", "--preset", help="Simulator preset: static | moving | noisy | ..."),
    seed: int | None = typer.Option(
        None,
        "--seed",
        min=0,
        help="Scene seed (default 1000, pairedge.apps.demo.DEMO_SEED: held out, a test seed of the bundled "
        "model; it trained on seeds 0-11).",
        show_default=False,
    ),
    frames: int = typer.Option(150, "--frames", min=2, help="Number of frames to simulate."),
    boxes: str = typer.Option(
        "truth",
        "--boxes",
        help="truth (ground-truth boxes and ids) or detections (simulated detector + tracker).",
    ),
    no_video: bool = typer.Option(False, "--no-video", help="Do not write the annotated video."),
    *,
    settings: Chosen,
) -> None:
    """Main job in one command: simulate a scene, run the bundled model on CPU, score it, write a video."""

    tune_allocator()

    options = DemoOptions(
        preset=preset,
        seed=DEMO_SEED if seed is None else seed,
        frames=frames,
        boxes=boxes,
        deployment=cpu_deployment(settings["model"]),
        video=not no_video,
        flow=settings.run().config.flow,
    )
    with frame_progress(f"simulating and running {printable(preset)} seed {options.seed}", frames) as advance:
        result = run_demo(out, options, on_frame=advance)
    print_demo(result)
    check_scored(result.summary)


def print_demo(result: DemoResult) -> None:
    """The scene (seed, box source, held out or not), interactions of a few frames, metrics, latency,
    files."""

    style = "yellow" if result.scene.role in ("training", "validation") else "bold"
    console.print(
        f"[{style}]{escape(printable(result.scene.line(), 1000))}[/]", highlight=False, soft_wrap=True
    )
    if result.examples:
        console.print(
            "interactions in a few frames ([green]right[/], [yellow]wrong label[/], [red]not a true pair[/]; "
            "label, smoothed p_interact):",
            highlight=False,
        )
    for ex in result.examples:
        console.print(example_line(ex), highlight=False)
    if result.report is not None:
        console.print(metrics_table(result))
    console.print(summary_table(result.summary, "runtime (ONNX Runtime CPU)"))
    for note in result.notes:
        style = "[yellow]note:[/]" if note.startswith("WARNING") else "[dim]note:[/]"
        console.print(f"{style} {escape(printable(str(note), 1000))}", highlight=False, soft_wrap=True)
    files = ", ".join(printable(f, 1000) for f in dict.fromkeys(result.files.values()))
    console.print(
        f"done in {result.seconds:.1f} s; files: " + escape(files),
        highlight=False,
        soft_wrap=True,
    )


def example_line(ex: FrameExample, shown: int = 6) -> str:
    """One frame's predicted pairs coloured against the truth, then the missed true pairs (rich markup; the
    label names, which come from the model, are escaped)."""
    truth = {(a, b): label for a, b, label in ex.truth}
    predicted = {(a, b) for a, b, _, _ in ex.interactions}
    right = sum(truth.get((a, b)) == label for a, b, label, _ in ex.interactions)
    cells = []
    for a, b, label, p in ex.interactions[:shown]:
        colour = "green" if truth.get((a, b)) == label else "yellow" if (a, b) in truth else "red"
        cells.append(f"[{colour}]{a}-{b} {escape(_short(label))} {p:.2f}[/]")
    more = len(ex.interactions) - shown
    missed = [
        f"{a}-{b} {escape(_short(label))}" for (a, b), label in truth.items() if (a, b) not in predicted
    ]
    line = (
        f"  frame {ex.frame}: {len(ex.interactions)} predicted, {len(truth)} true, {right} right: "
        + (", ".join(cells) or "none")
        + (f" (+{more} more)" if more > 0 else "")
    )
    if missed:
        line += f"; missed {', '.join(missed[:4])}" + (f" (+{len(missed) - 4})" if len(missed) > 4 else "")
    return line


def _short(label: str) -> str:
    return label.replace("_together", "")


def metrics_table(result: DemoResult) -> object:
    """Stage-1 detection, stage-2 classification and group metrics against the simulator's truth."""
    from rich.table import Table

    assert result.report is not None
    s = result.report.summary
    counts = result.report.details["counts"]
    scene = result.scene
    boxes = "ground-truth boxes" if scene.boxes == "truth" else "simulated detector"
    table = Table(
        title=f"pairwise metrics vs the simulator's ground truth ({scene.preset} seed {scene.seed}, {boxes})"
    )
    table.add_column("metric", no_wrap=True)
    table.add_column("value", justify="right", no_wrap=True)

    def row(name: str, value: float) -> None:
        table.add_row(name, "n/a" if not math.isfinite(value) else f"{value:.3f}")

    row("stage 1 pair precision", s["pair_precision"])
    row("stage 1 pair recall", s["pair_recall"])
    row("stage 1 pair F1", s["pair_f1"])
    row(f"stage 2 accuracy, {counts['scored_pairs']} true pairs (missed = wrong)", s["accuracy"])
    row("stage 2 MPCA", s["mpca"])
    row("stage 2 macro-F1", s["macro_f1"])
    row("stage 2 accuracy, true pairs stage 1 passed", result.passed_accuracy)
    row("group activity accuracy", s["group_activity_accuracy"])
    row("group detection F1 (IoU > 0.5)", s["group_f1"])
    return table
