"""``pairedge parity pack`` (workstation) and ``pairedge parity check`` (robot): the on-device evaluator."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from pairedge.cli.app import app, console, fail, handle_errors
from rich.markup import escape

parity_app = typer.Typer(
    name="parity", help="Prove on the robot that the deployed model still matches the fp32 one.",
    no_args_is_help=True,
)  # fmt: skip
app.add_typer(parity_app, name="parity")


def _progress(description: str, total: int | None):  # type: ignore[no-untyped-def]
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    progress = Progress(*columns, console=console, transient=True)
    task = progress.add_task(escape(description), total=total)
    return progress, lambda: progress.advance(task)


@parity_app.command("pack")
@handle_errors
def pack_command(
    model: Path = typer.Argument(..., help="The fp32 model folder (stage1.onnx + stage2.onnx)."),
    out: Path = typer.Option(..., "--out", help="The pack to write (.npz)."),
    scene: str | None = typer.Option(
        None, "--scene", help="Simulator clip PRESET:SEED (default static:0 when no --video is given)."
    ),
    video: Path | None = typer.Option(None, "--video", help="A video (or image folder) instead of a scene."),
    detections: Path | None = typer.Option(
        None, "--detections", help="Detections of --video (MOT, JRDB, CVML)."
    ),
    gold: Path | None = typer.Option(None, "--gold", help="Ground-truth pairs of --video (pairwise schema)."),
    cad: Path | None = typer.Option(
        None, "--cad", help="A Collective Activity annoNN.mat (box-only models)."
    ),
    frames: int = typer.Option(30, "--frames", min=2, help="Clip length in frames."),
    boxes: str = typer.Option(
        "truth", "--boxes", help="Scene boxes: truth or detections (simulated detector)."
    ),
    backend: str = typer.Option("onnxruntime", "--backend", help="Reference classifier backend."),
    flow: str = typer.Option("auto", "--flow", help="Reference flow backend (auto: the model's)."),
) -> None:
    """Run the fp32 model over a short clip and write a portable parity pack."""
    from pairedge.evaluation.sources import parse_scene, parse_sources
    from pairedge.runtime.parity.build import build_pack

    given = [x for x in (scene, video, cad) if x is not None]
    if len(given) > 1:
        raise fail("give one clip: --scene, --video (with --detections) or --cad")
    if video is None and (detections is not None or gold is not None):
        raise fail("--detections and --gold go with --video; a --scene or --cad clip brings its own")
    if video is not None:
        source = parse_sources(str(video), detections=detections, gold=gold)[0]
    elif cad is not None:
        source = parse_sources(str(cad))[0]
    else:
        source = parse_scene(scene or "static:0", frames, boxes)
    progress, advance = _progress(f"packing {source.name}", frames)
    with progress:
        pack = build_pack(model, source, out, frames=frames, backend=backend, flow=flow, on_frame=advance)
    size = out.stat().st_size / 1e6
    console.print(
        f"wrote {escape(str(out))} ({size:.1f} MB): {escape(source.name)}, {pack.num_frames} frames, "
        f"{len(pack.rows)} pair-frames, truth {'yes' if pack.has_truth else 'no'}; reference flow "
        f"{escape(str(pack.reference['flow']['repr']))}", highlight=False,
    )  # fmt: skip


@parity_app.command("check")
@handle_errors
def check_command(
    pack: Path = typer.Argument(..., help="The parity pack (.npz) from `pairedge parity pack`."),
    model: Path = typer.Argument(..., help="The deployed model folder (or engine folder)."),
    backend: str = typer.Option("auto", "--backend", help="Classifier backend: auto, onnxruntime, ..."),
    flow: str = typer.Option("auto", "--flow", help="Flow backend (auto: the pack's reference flow)."),
    precision: str = typer.Option("fp32", "--precision", help="fp32, fp16 or int8 files of the folder."),
    model_only: bool = typer.Option(
        False, "--model-only", help="Features from the pack: no frames, no flow."
    ),
    json_out: Path | None = typer.Option(None, "--json", help="Write the report as JSON here."),
    md_out: Path | None = typer.Option(None, "--md", help="Write the report as Markdown here."),
    tolerances: Path | None = typer.Option(
        None, "--tolerances", help='JSON overriding level tolerances, e.g. {"logit_max": {"int8": 2.0}}.'
    ),
) -> None:
    """Replay the pack through this device's pipeline; PASS (exit 0) or FAIL (exit 1) over four levels."""
    from pairedge.errors import InputError, PairedgeError
    from pairedge.runtime.parity import CheckOptions, Tolerances, check_pack, load_pack

    pk = load_pack(pack)
    tol = Tolerances()
    if tolerances is not None:
        try:
            tol = Tolerances.from_dict(json.loads(tolerances.read_text()))
        except (OSError, ValueError, TypeError) as exc:
            if isinstance(exc, PairedgeError):
                raise
            raise InputError(f"--tolerances {tolerances}: expected a JSON object ({exc})") from None
    options = CheckOptions(
        backend=backend, flow=flow, precision=precision, model_only=model_only, tolerances=tol
    )
    progress, advance = _progress(f"replaying {pack.name}", None if model_only else pk.num_frames)
    with progress:
        report = check_pack(pk, model, options, on_frame=advance)
    if json_out is not None:
        report.write_json(json_out)
    if md_out is not None:
        report.write_markdown(md_out)
    print_levels(report)
    colour = "green" if report.passed else "red"
    console.print(f"[bold {colour}]{escape(report.verdict())}[/]", highlight=False, soft_wrap=True)
    if not report.passed:
        raise typer.Exit(code=1)


def print_levels(report) -> None:  # type: ignore[no-untyped-def]
    """The four levels as a table (status, problems or notes)."""
    from rich.table import Table

    table = Table(title=f"parity: {escape(str(report.pack.get('source')))}")
    table.add_column("level")
    table.add_column("status")
    table.add_column("details")
    for lv in report.levels:
        colour = {"PASS": "green", "FAIL": "red"}.get(lv.status, "yellow")
        table.add_row(lv.name, f"[{colour}]{lv.status}[/]", escape("; ".join(lv.problems or lv.notes) or "-"))
    console.print(table)
