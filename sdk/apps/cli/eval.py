"""``pairedge eval``: protocol metrics of a model (any precision / backend) on scenes, a video log or CAD."""

from __future__ import annotations

from pathlib import Path

import typer
from pairedge.apps.cli.app import app, console, fail, handle_errors
from pairedge.apps.cli.progress import stage_progress
from pairedge.apps.cli.score import print_table
from pairedge.apps.cli.settings import Chosen, with_settings
from pairedge.apps.evaluation.files import summary_table, write_eval
from pairedge.apps.evaluation.fleet_eval import evaluate_many
from pairedge.apps.evaluation.sources import parse_sources
from pairedge.measure.metrics.pairwise.boxes import read_truth_boxes
from pairedge.runtime.loading import find_models
from rich.markup import escape


@app.command("eval")
@handle_errors
@with_settings("precision", "backend", "flow", "tracker")
def eval_command(
    model: Path = typer.Argument(
        ...,
        help="Model folder (stage1.onnx + stage2.onnx, + calibrated variants), or 'default' (the bundled "
        "model).",
    ),
    data: str = typer.Option(
        ...,
        "--data",
        help="sim:PRESET[+PRESET][:seeds=A-B][:frames=N][:boxes=truth|detections], a CAD folder / annoNN.mat "
        "(box-only models), a ROS 2 log or a folder of logs (gold.jsonl beside each), or a video / image "
        "folder (with --detections, and --gold for metrics).",
    ),
    detections: Path | None = typer.Option(
        None, "--detections", help="Detections of a video (MOT, JRDB, CVML)."
    ),
    gold: Path | None = typer.Option(None, "--gold", help="Ground-truth pairs of a video (pairwise schema)."),
    match_boxes: Path | None = typer.Option(
        None,
        "--match-boxes",
        help="A MOT ground-truth file (gt.txt) with the true boxes of the video (or ROS 2 log): match the "
        "run's people to the true people per frame (Hungarian, IoU >= 0.5) before scoring pairs, as "
        "pairedge score --match-boxes does; for tracker ids on raw detections.",
    ),
    frames: int | None = typer.Option(
        None, "--frames", min=1, help="Frames per source (default: all / 300)."
    ),
    out: Path = typer.Option(
        Path("eval_out"), "--out", help="Output folder: eval.json, eval.md, confusion.png."
    ),
    executor: str = typer.Option(
        "local", "--executor", help="local (one source after another) or ray (one task per source)."
    ),
    address: str | None = typer.Option(
        None, "--address", help="Ray cluster address (ray://host:10001 or auto); default: start a local one."
    ),
    workers: int | None = typer.Option(
        None, "--workers", min=1, help="CPUs of the local Ray instance (default: all)."
    ),
    *,
    settings: Chosen,
) -> None:
    """Evaluate a model on each source, pool the counts, write JSON + Markdown + a confusion-matrix PNG."""
    from dataclasses import replace

    run = settings.run(model=str(model))
    deployment = run.deployment
    find_models(
        deployment.folder, deployment.precision
    )  # a wrong model folder: one line now, not once per source
    sources = parse_sources(data, detections=detections, gold=gold, frames=frames)
    if match_boxes is not None:
        check_match_boxes(match_boxes, sources)
    console.print(f"model: {escape(deployment.describe())}", highlight=False, soft_wrap=True)
    with stage_progress(
        f"evaluating {len(sources)} source(s) ({executor})", len(sources), unit="sources"
    ) as advance:
        result = evaluate_many(
            deployment,
            sources,
            max_frames=frames,
            executor=executor,
            address=address,
            workers=workers,
            on_done=lambda _: advance(),
            config=run.config,
            match_boxes=match_boxes,
        )
    failures = result.failures
    if result.report is None:
        raise fail(f"every source failed; first: {failures[0][0]}: {failures[0][1]}")
    report = replace(result.report, notes=(*result.report.notes, *(f"FAILED {k}: {e}" for k, e in failures)))
    files = write_eval(report, out)
    print_table(summary_table(report))
    for note in report.notes:
        console.print(f"[dim]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    if "png_skipped" in files:
        console.print(f"[yellow]note:[/] {escape(files.pop('png_skipped'))}", highlight=False, soft_wrap=True)
    console.print("files: " + escape(", ".join(files.values())), highlight=False, soft_wrap=True)
    if failures:
        raise fail(
            f"{len(failures)} of {len(sources)} source(s) failed (reported in {files.get('json', out)}); "
            f"first: {failures[0][0]}: {failures[0][1]}"
        )


def check_match_boxes(path: Path, sources: list) -> None:
    """``--match-boxes`` names a readable MOT file and the data is one video or ROS 2 log (one file of true
    boxes describes one recording; simulator scenes and CAD sequences bring their own ids).

    Raises:
        typer.Exit: code 1 with one line; FormatError: an unreadable MOT file.
    """

    kinds = {s.kind for s in sources}
    if len(sources) != 1 or not kinds <= {"video", "log"}:
        raise fail(
            f"--match-boxes: expected one video or ROS 2 log source, got {len(sources)} source(s) of kind "
            f"{', '.join(sorted(kinds))}; simulator scenes and CAD bring their own ids"
        )
    read_truth_boxes(path)  # a missing or malformed file: one line now, not after the run
