"""``pairedge simulate``: render a synthetic scene and write it in the real dataset formats."""

from __future__ import annotations

from pathlib import Path

import typer
from pairedge.apps.cli.app import app, console, handle_errors
from pairedge.apps.cli.progress import stage_progress
from pairedge.apps.ros.write import write_log
from pairedge.core import limits
from pairedge.core.errors import InputError
from pairedge.core.io.textio import printable
from pairedge.core.optional import require
from pairedge.measure.sim import simulate as simulate_frames
from pairedge.measure.sim.output import write_scene
from rich.markup import escape
from rich.table import Table


@app.command()
@handle_errors
def simulate(
    preset: str = typer.Option("static", "--preset", help="static | moving | panorama | crowd | noisy."),
    seed: int = typer.Option(
        0, "--seed", min=0, help="Scene seed; the same preset and seed give identical files."
    ),
    frames: int = typer.Option(150, "--frames", min=1, help="Number of frames."),
    out: Path = typer.Option(..., "--out", help="Output folder (created)."),
    png: bool = typer.Option(False, "--png", help="Also write every frame as a lossless PNG (frames/)."),
    preview: int = typer.Option(
        0, "--preview", min=0, help="Write K preview PNGs with boxes and pair links."
    ),
    bag: str | None = typer.Option(
        None,
        "--bag",
        help="Also record the scene as a ROS 2 log in log/ (mcap or sqlite3): camera images and "
        "the simulated detector's vision_msgs/Detection2DArray, as a robot would (needs pairedge[ros]).",
    ),
) -> None:
    """Simulate a scene: video, JRDB JSON, MOT gt/det, stickmen, JRDB-PAR labels, pairwise ground truth."""

    if bag not in (None, "mcap", "sqlite3"):
        raise InputError(f"--bag: expected mcap or sqlite3, got '{printable(bag)}'")
    limits.check_sim_work(1, frames, "--frames")
    if bag is not None:  # before any rendering: a missing rosbags or a taken log/ would fail only after it
        require("rosbags.rosbag2", extra="ros", purpose="simulate --bag (writing ROS 2 logs)")
        if (out / "log").exists():
            raise InputError(
                f"--bag: {printable(out / 'log')} exists (logs are never overwritten); choose "
                "another --out or remove it"
            )

    with stage_progress(f"simulating {printable(preset)}", total=frames) as advance:
        result = write_scene(
            preset, seed, frames, out, png=png, preview=preview, on_frame=lambda _: advance(1)
        )
    if bag is not None:
        items = (
            (f.image, f.detections, f.timestamp) for f in simulate_frames(preset, seed=seed, frames=frames)
        )
        count = write_log(items, Path(out) / "log", storage=bag)
        console.print(
            f"ROS 2 log ({escape(bag)}, {count} frames): {escape(str(Path(out) / 'log'))}", highlight=False
        )
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(str(note))}", highlight=False, soft_wrap=True)
    table = Table(title=f"pairedge simulate --preset {escape(preset)} --seed {seed}")
    table.add_column("pair label")
    table.add_column("pairs", justify="right")
    for name, count in result.label_counts.items():
        table.add_row(escape(str(name)), str(count))
    console.print(table)
    fps = result.frames / max(result.seconds, 1e-9)
    console.print(
        f"{result.frames} frames, {result.mean_people:.1f} visible people per frame, {fps:.0f} frames/s "
        f"(rendering and writing) -> {escape(str(result.out))}",
        highlight=False,
        soft_wrap=True,
    )
    console.print("files: " + escape(", ".join(map(str, result.files))), highlight=False, soft_wrap=True)
