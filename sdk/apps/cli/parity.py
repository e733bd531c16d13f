"""``pairedge parity pack`` (workstation) and ``pairedge parity check`` (robot): the on-device evaluator."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from pairedge.apps.cli.app import app, console, fail, handle_errors
from pairedge.apps.cli.progress import stage_progress
from pairedge.apps.cli.settings import Chosen, with_settings
from pairedge.apps.evaluation.sources import parse_scene, parse_sources
from pairedge.apps.ros.bag import is_log
from pairedge.compare.parity import CheckOptions, Tolerances, check_pack, load_pack
from pairedge.compare.parity.build import build_pack
from pairedge.core import limits
from pairedge.core.bundled import describe_model
from pairedge.core.errors import InputError
from pairedge.core.io.textio import printable
from rich.markup import escape

if TYPE_CHECKING:
    from pairedge.compare.parity import ParityPack, ParityReport

parity_app = typer.Typer(
    name="parity",
    help="Prove on the robot that the deployed model still matches the fp32 one.",
    no_args_is_help=True,
)
app.add_typer(parity_app, name="parity")


class Boxes(str, Enum):
    """Which boxes a simulator clip feeds the pipeline."""

    truth = "truth"
    detections = "detections"


@parity_app.command("pack")
@handle_errors
@with_settings(
    "backend",
    "flow",
    "box_shape",
    "operating_point",
    defaults={"backend": "onnxruntime"},
    notes={"backend": "The pack's reference: the fp32 files on the CPU by default."},
)
def pack_command(
    model: Path = typer.Argument(
        ..., help="The fp32 model folder (stage1.onnx + stage2.onnx), or default (the bundled model)."
    ),
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
    log: Path | None = typer.Option(
        None,
        "--log",
        help="A ROS 2 log (rosbag2 folder, .mcap or .db3) with one image and one detections topic.",
    ),
    frames: int = typer.Option(30, "--frames", min=2, help="Clip length in frames."),
    start: int = typer.Option(
        0, "--start", min=0, help="First frame of the clip; the frames before it run but are not stored."
    ),
    boxes: Boxes = typer.Option(
        Boxes.truth, "--boxes", help="Scene boxes: truth or detections (simulated detector)."
    ),
    *,
    settings: Chosen,
) -> None:
    """Run the fp32 model over a short clip and write a portable parity pack.

    The pack records what the pipeline decided at every frame (box shape ignored or not, the operating
    point's thresholds) and, with --start, its state at the clip's first frame, so `parity check` replays
    the run exactly.
    """

    limits.check_sim_work(
        1, start + frames, "--start + --frames"
    )  # before any clip is opened or model loaded
    given = [x for x in (scene, video, cad, log) if x is not None]
    if len(given) > 1:
        raise fail("give one clip: --scene, --video (with --detections), --log or --cad")
    if video is None and detections is not None:
        raise fail("--detections goes with --video; a --scene, --log or --cad clip brings its own")
    if video is None and log is None and gold is not None:
        raise fail("--gold goes with --video or --log; a --scene or --cad clip brings its own truth")
    run = settings.run(model=str(model))  # the fp32 files: a pack's reference
    reference = run.deployment
    folder = reference.folder
    source = _clip_source(scene, video, detections, gold, cad, log, start + frames, boxes.value)
    with stage_progress(f"packing {printable(source.name)}", start + frames) as advance:
        pack = build_pack(
            reference,
            source,
            out,
            frames=frames,
            on_frame=advance,
            start=start,
            box_shape=run.config.box_shape,
            operating_point=run.config.operating_point,
        )
    size = out.stat().st_size / 1e6
    where = f"frames {start}-{start + pack.num_frames - 1}" if start else f"{pack.num_frames} frames"
    console.print(
        f"wrote {escape(printable(out))} ({size:.1f} MB) from {escape(describe_model(folder))}: "
        f"{escape(printable(source.name))}, {where}, {len(pack.rows)} pair-frames, truth "
        f"{'yes' if pack.has_truth else 'no'}; reference flow {escape(str(pack.reference['flow']['repr']))}; "
        f"{decisions(pack)}",
        highlight=False,
    )


def decisions(pack: ParityPack) -> str:
    """What the reference decided over the clip, as the pack records it for the check to replay."""
    st = pack.frame_states
    ignored = sum(s.box_shape_ignored for s in st)
    shape = "box shape used" if not ignored else f"box shape ignored on {ignored} of {len(st)} frames"
    changes = [k for k in range(1, len(st)) if st[k].tau_interact != st[k - 1].tau_interact]
    gate = f"gate {st[0].tau_interact:g}" + "".join(
        f", {st[k].tau_interact:g} from frame {k}" for k in changes[:3]
    )
    return f"{shape}, {gate}" if st else shape


def _clip_source(
    scene: str | None,
    video: Path | None,
    detections: Path | None,
    gold: Path | None,
    cad: Path | None,
    log: Path | None,
    frames: int,
    boxes: str,
) -> Any:
    """The one :class:`~pairedge.apps.evaluation.sources.StreamSource` the options name."""

    if log is not None:
        if not is_log(log):
            raise fail(
                f"--log {printable(log)}: not a ROS 2 log (a rosbag2 folder with metadata.yaml, a .mcap or "
                "a .db3 file); `pairedge simulate --bag mcap` writes one"
            )
        return parse_sources(str(log), gold=gold)[0]
    if video is not None:
        return parse_sources(str(video), detections=detections, gold=gold)[0]
    if cad is not None:
        return parse_sources(str(cad))[0]
    return parse_scene(scene or "static:0", frames, boxes)


@parity_app.command("check")
@handle_errors
@with_settings("precision", "backend", "flow", notes={"flow": "auto: the pack's reference flow."})
def check_command(
    pack: Path = typer.Argument(..., help="The parity pack (.npz) from `pairedge parity pack`."),
    model: Path = typer.Argument(..., help="The deployed model folder (or engine folder)."),
    model_only: bool = typer.Option(
        False, "--model-only", help="Features from the pack: no frames, no flow."
    ),
    json_out: Path | None = typer.Option(None, "--json", help="Write the report as JSON here."),
    md_out: Path | None = typer.Option(None, "--md", help="Write the report as Markdown here."),
    tolerances: Path | None = typer.Option(
        None, "--tolerances", help='JSON overriding level tolerances, e.g. {"logit_max": {"int8": 2.0}}.'
    ),
    *,
    settings: Chosen,
) -> None:
    """Replay the pack through this device's pipeline; PASS (exit 0) or FAIL (exit 1) over four levels."""

    tol = read_tolerances(tolerances)  # before the pack: a bad option costs nothing
    deployment = settings.run(model=str(model)).deployment
    pk = load_pack(pack)
    options = CheckOptions(model_only=model_only, tolerances=tol)
    with stage_progress(
        f"replaying {printable(pack.name)}", None if model_only else pk.num_frames
    ) as advance:
        report = check_pack(pk, deployment, options, on_frame=advance)
    if json_out is not None:
        report.write_json(json_out)
    if md_out is not None:
        report.write_markdown(md_out)
    print_levels(report)
    colour = "green" if report.passed else "red"
    console.print(
        f"[bold {colour}]{escape(printable(report.verdict(), 2000))}[/]", highlight=False, soft_wrap=True
    )
    if not report.passed:
        raise typer.Exit(code=1)


def read_tolerances(path: Path | None) -> Tolerances:
    """The ``--tolerances`` JSON (a regular file within :data:`pairedge.core.limits.MAX_SIDECAR_BYTES`) over
    the defaults; every value a finite number >= 0 (checked by :class:`Tolerances`, naming the level and
    key)."""
    if path is None:
        return Tolerances()
    text = limits.read_text(path, "a tolerances JSON file (--tolerances)", limits.MAX_SIDECAR_BYTES)
    try:
        values = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"--tolerances {path}: expected a JSON object ({exc})") from None
    return Tolerances.from_dict(values)


def print_levels(report: ParityReport) -> None:
    """The four levels as a narrow table (level, status, number of problems), the problems and notes below."""
    from rich.table import Table

    table = Table(title=f"parity: {escape(printable(report.pack.get('source')))}")
    table.add_column("level", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("problems", no_wrap=True, justify="right")
    for lv in report.levels:
        colour = {"PASS": "green", "FAIL": "red"}.get(lv.status, "yellow")
        table.add_row(lv.name, f"[{colour}]{lv.status}[/]", str(len(lv.problems)))
    console.print(table)
    if not report.identity_verified:
        console.print(
            f"  [red]model:[/] {escape(printable(report.candidate.get('identity_note'), 1000))}",
            highlight=False,
        )
    for lv in report.levels:
        for line in lv.problems:
            console.print(f"  [red]{lv.name}:[/] {escape(printable(line, 1000))}", highlight=False)
        for line in lv.notes:
            console.print(f"  {lv.name}: {escape(printable(line, 1000))}", highlight=False)
