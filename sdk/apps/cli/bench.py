"""``pairedge bench``: latency, accuracy and agreement per backend x precision, and which one to deploy."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import typer
from pairedge.apps.bench.run import DEFAULT_DATA, BenchOptions, check_options, run_bench
from pairedge.apps.bench.table import terminal_legend, terminal_lines, write_bench
from pairedge.apps.cli.app import app, console, handle_errors
from pairedge.apps.cli.progress import stage_progress
from pairedge.core.bundled import describe_model, resolve_model_dir
from pairedge.core.errors import InputError
from rich.markup import escape


def _split(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def _people(text: str) -> tuple[int, ...]:
    """``--people`` as sorted unique ints in 1..100 (the runtime's default ``max_people``)."""

    try:
        values = sorted({int(v) for v in _split(text)})
    except ValueError:
        values = []
    if not values or not all(1 <= v <= 100 for v in values):
        raise InputError(f"--people: expected comma-separated crowd sizes in 1..100, got {text!r}")
    return tuple(values)


@contextmanager
def _stage_per_message() -> Iterator[Callable[[str], None]]:
    """A progress callback for which each message starts a stage of work (and ends the one before): a bar on
    a terminal, a start and an end line when piped (:func:`pairedge.apps.cli.progress.stage_progress`)."""

    current = ExitStack()

    def say(text: str) -> None:
        current.close()
        advance = current.enter_context(stage_progress(text, None, unit="step"))
        current.callback(advance)  # the stage is one step, done when the next one starts

    try:
        yield say
    finally:
        current.close()


@app.command("bench")
@handle_errors
def bench_command(
    model: str = typer.Argument(
        ...,
        help="Model folder (stage1.onnx + stage2.onnx, + calibrated variants), or 'default' (the bundled "
        "model).",
    ),
    precisions: str = typer.Option(
        "fp32,fp16,int8", "--precisions", help="Comma-separated; must include fp32."
    ),
    backends: str = typer.Option(
        "onnxruntime",
        "--backends",
        help="Comma-separated classifier backends: onnxruntime, onnxruntime-cuda, onnxruntime-tensorrt, "
        "tensorrt (aliases ort-cpu, ort-cuda, ort-trt, trt accepted; tables name the registry names).",
    ),
    data: str | None = typer.Option(
        None, "--data", help="Held-out sources for accuracy (pairedge eval syntax)."
    ),
    frames: int | None = typer.Option(
        None, "--frames", min=2, help="Frames per source (default: the source's)."
    ),
    repeats: int = typer.Option(100, "--repeats", min=5, help="Timed classifier calls per pair count."),
    people: str = typer.Option(
        "2,10,30,100",
        "--people",
        help="Crowd sizes of the whole-pipeline measurement (FPS and per-stage latency), 1-100 each.",
    ),
    out: Path | None = typer.Option(None, "--out", help="Write bench.json and bench.md here."),
) -> None:
    """Benchmark every precision on every backend and recommend the fastest one that passes the accuracy
    gate."""

    opts = BenchOptions(
        precisions=_split(precisions),
        backends=_split(backends),
        data=data or DEFAULT_DATA,
        frames=frames,
        repeats=repeats,
        people=_people(people),
    )
    opts, _ = check_options(opts)  # unknown backends / precisions and too much --data refused before any work
    folder = resolve_model_dir(model)
    console.print(f"model: {escape(describe_model(folder))}", highlight=False, soft_wrap=True)
    with _stage_per_message() as say:
        result = run_bench(folder, opts, progress=say)
    console.print("[bold]pairedge bench[/]", highlight=False)
    for line in terminal_lines(result, width=max(console.width, 60)):
        console.print(escape(line), highlight=False, soft_wrap=True)
    # prose wraps at word boundaries to the terminal's width (the table above never wraps)
    for line in terminal_legend(result):
        console.print(escape(line), highlight=False, overflow="fold")
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False, overflow="fold")
    console.print(f"[bold]{escape(result.recommendation)}[/]", highlight=False, overflow="fold")
    env = result.environment
    console.print(
        escape(
            f"environment: {env['cpu']}; GPU: {env['gpu']}; onnxruntime {env['libraries'].get('onnxruntime')}"
        ),
        highlight=False,
        soft_wrap=True,
    )
    if env.get("jetson"):
        console.print(escape(f"jetson: {env['jetson']}"), highlight=False, soft_wrap=True)
    mem = result.memory
    gpu = mem.get("gpu_memory_mib")
    console.print(
        escape(
            f"memory: peak RSS {mem.get('peak_rss_mib') or 0:.0f} MiB; GPU "
            f"{'n/a' if gpu is None else f'{gpu:.0f} MiB'}"
        ),
        highlight=False,
    )
    if out is not None:
        files = write_bench(result, out)
        console.print("files: " + escape(", ".join(files.values())), highlight=False, soft_wrap=True)
