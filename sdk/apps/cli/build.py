"""``pairedge build``: a model folder's ONNX stages (or, with ``--detector``, a person detector's ONNX) ->
TensorRT engines with engine manifests."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

import typer
from pairedge.apps.cli.app import app, console, err_console, handle_errors
from pairedge.apps.cli.check import run_checks
from pairedge.apps.cli.settings import Chosen, with_settings
from pairedge.core.bundled import BUNDLED_NAME, in_installed_package, resolve_model_dir
from pairedge.core.errors import InputError
from pairedge.gpu.tensorrt import load_tensorrt
from pairedge.gpu.tensorrt.versions import TrtVersion
from pairedge.runtime.detectors.bundled import bundled_detector, is_bundled_name
from rich.markup import escape


class _RichSink:
    """Build phases of one stage as Rich progress tasks (nested phases indented)."""

    def __init__(self, progress: Any, stage: int) -> None:
        self.progress, self.stage = progress, stage
        self.tasks: dict[str, Any] = {}
        self.depth: dict[str, int] = {}

    def start(self, phase: str, parent: str | None, steps: int) -> None:
        depth = self.depth.get(parent, -1) + 1 if parent else 0
        self.depth[phase] = depth
        label = f"stage {self.stage}: {'  ' * depth}{phase}"
        self.tasks[phase] = self.progress.add_task(escape(label), total=max(steps, 1))

    def step(self, phase: str, step: int) -> None:
        if phase in self.tasks:
            self.progress.update(self.tasks[phase], completed=step + 1)

    def finish(self, phase: str) -> None:
        task = self.tasks.pop(phase, None)
        if task is not None:
            self.progress.remove_task(task)


@app.command("build")
@handle_errors
@with_settings(
    "precision",
    "dla_core",
    "detector",
    "detector_layout",
    defaults={"detector": None},
    notes={
        "dla_core": "pairedge build: builds the engines for that core (fp16 or int8, a fixed --profile "
        "N,N,N) into engines/<device>-sm<cc>-trt<version>-dla<N>/.",
        "detector": "pairedge build: builds that detector's engine instead of the classifiers' (the bundled "
        "one: fp16 from its fp16 ONNX, in ./engines/<device tag>/ unless --out; an .onnx of input "
        "[1, 3, H, W] of a fixed size: MODEL.<precision>.engine in DIR/engines/<device tag>/ beside it), "
        "run with pairedge run VIDEO --detector MODEL.<precision>.engine.",
        "detector_layout": "pairedge build: recorded in the engine manifest.",
    },
)
def build_command(
    model_dir: Path | None = typer.Argument(
        None,
        help="The model folder (stage{1,2}.onnx, .fp16.onnx, .int8.onnx); not the installed bundled model. "
        "Leave it out with --detector.",
    ),
    profile: str | None = typer.Option(
        None, "--profile", help="Pairs per call MIN,OPT,MAX of the optimization profile (default 1,64,512)."
    ),
    workspace: int = typer.Option(256, "--workspace", min=1, help="Builder workspace limit in MiB."),
    timing_cache: Path | None = typer.Option(
        None, "--timing-cache", help="Timing cache file (loaded and saved)."
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Engine folder (default MODEL_DIR/engines/<device>-sm<cc>-trt<version>)."
    ),
    target: str | None = typer.Option(
        None,
        "--target",
        help="pairedge check target (default: the installed TensorRT's, else tensorrt-10.3).",
    ),
    verbose: bool = typer.Option(False, "--verbose", help="Forward TensorRT's verbose log."),
    gpu_fallback: bool = typer.Option(
        False,
        "--gpu-fallback",
        help="With --dla-core: layers the DLA cannot run go to the GPU (without it they stop the build, "
        "named).",
    ),
    *,
    settings: Chosen,
) -> None:
    """Check, then build the stage-1 and stage-2 engines with their manifests (needs TensorRT and a GPU);
    with --detector, the engine of a person detector."""
    from pairedge.export.tensorrt.builder import BuildSettings, Profile
    from pairedge.export.tensorrt.folder import build_model_folder, stage_onnx_files
    from pairedge.export.tensorrt.layer_info import int8_requested, int8_summary
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    precision, dla_core = settings["precision"], settings["dla_core"]
    detector, detector_layout = settings["detector"], settings["detector_layout"]
    if detector is not None:
        if model_dir is not None or profile is not None:
            raise InputError(
                "--detector: builds one detector ONNX at its fixed input size; pass no MODEL_DIR and "
                "no --profile"
            )
        _build_detector(
            detector,
            precision,
            workspace,
            timing_cache,
            out,
            target,
            verbose,
            dla_core,
            gpu_fallback,
            detector_layout,
        )
        return
    if detector_layout is not None:
        raise InputError("--detector-layout: goes with --detector")
    if model_dir is None:
        raise InputError("pairedge build: expected MODEL_DIR (a model folder), or --detector MODEL.onnx")
    profile = profile or "1,64,512"
    model_dir = resolve_model_dir(model_dir) if str(model_dir) == BUNDLED_NAME else model_dir
    for folder, what in ((model_dir, "MODEL_DIR"), (out, "--out")):
        if folder is not None and in_installed_package(folder) is not None:
            raise InputError(
                f"{what} {folder}: inside the installed pairedge package; build writes engines and the "
                "manifest into the model folder, never into the package: copy the model first (pairedge "
                "calibrate default --out ~/model, or cp -r the folder) and build that copy"
            )
    build = BuildSettings(
        precision,
        Profile.parse(profile),
        workspace,
        timing_cache,
        verbose=verbose,
        dla_core=dla_core,
        gpu_fallback=gpu_fallback,
    )
    build.check_dla_profile()
    files = stage_onnx_files(model_dir, precision)
    trt = _installed_tensorrt()
    chosen = target or _default_target(trt)
    if not run_checks(files, chosen):
        raise typer.Exit(code=1)
    trt = trt or load_tensorrt()  # fails fast here, after the check, with how to install TensorRT
    with ExitStack() as stack:
        progress = stack.enter_context(
            Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
        )
        built = build_model_folder(
            model_dir, build, out=out, trt=trt, progress=lambda stage: _RichSink(progress, stage)
        )
    for b in built:
        m = b.manifest
        layers, missed = int8_summary(b.output.gemm_precisions, int8_requested(files[b.stage - 1]))
        console.print(
            f"stage {b.stage}: {escape(str(b.engine))} ({m.engine['size']} bytes, {m.precision}, TensorRT "
            f"{escape(m.tensorrt_version)}, {escape(m.device_name)} "
            f"sm{m.compute_capability.replace('.', '')}, profile "
            f"{m.profile['min']}/{m.profile['opt']}/{m.profile['max']}, "
            f"{_device(m.dla_core, m.gpu_fallback)}, {layers}, built in {b.output.seconds:.1f} s)",
            highlight=False,
        )
        if missed:
            err_console.print(
                f"[yellow]warning:[/] stage {b.stage}: {len(missed)} Gemm(s) the ONNX quantizes run in "
                f"higher precision in this engine: {escape(', '.join(missed[:8]))} (TensorRT did not fuse "
                "their Q/DQ; the engine is correct but slower than int8)",
                highlight=False,
                soft_wrap=True,
            )


def _build_detector(
    spec: str,
    precision: str,
    workspace: int,
    timing_cache: Path | None,
    out: Path | None,
    target: str | None,
    verbose: bool,
    dla_core: int | None,
    gpu_fallback: bool,
    layout: str | None = None,
) -> None:
    """``pairedge build --detector``: check, then build one detector engine and print what was written."""
    from pairedge.export.tensorrt.builder import BuildSettings
    from pairedge.export.tensorrt.detector import build_detector, read_build_graph

    onnx, root = detector_source(spec, precision)
    build = BuildSettings(
        precision,
        workspace_mib=workspace,
        timing_cache=timing_cache,
        verbose=verbose,
        dla_core=dla_core,
        gpu_fallback=gpu_fallback,
    )
    read_build_graph(onnx, layout)  # a file that is no detector is refused before the check and TensorRT
    trt = _installed_tensorrt()
    if not run_checks([onnx], target or _default_target(trt)):
        raise typer.Exit(code=1)
    built = build_detector(onnx, build, out=out, root=root, trt=trt or load_tensorrt(), layout=layout)
    m = built.manifest
    h, w = m.input_size
    console.print(
        f"detector: {escape(str(built.engine))} ({m.engine['size']} bytes, {m.precision}, {m.layout['kind']} "
        f"layout, input {w}x{h}, TensorRT {escape(m.tensorrt_version)}, {escape(m.device_name)} "
        f"sm{m.compute_capability.replace('.', '')}, {_device(m.dla_core, m.gpu_fallback)}, built in "
        f"{built.output.seconds:.1f} s); run it with: pairedge run VIDEO --detector "
        f"{escape(str(built.engine))}",
        highlight=False,
    )


def detector_source(spec: str, precision: str) -> tuple[Path, Path | None]:
    """The ONNX file of ``--detector SPEC`` and the folder its ``engines/<device tag>/`` goes under: a bundled
    detector's verified file (fp16: its fp16 copy) under the current folder (the package is not a place for
    engines), or the given path under its own folder (None)."""

    if not is_bundled_name(spec):
        return Path(spec).expanduser(), None
    onnx = bundled_detector(spec).path("fp16" if precision == "fp16" else "fp32")
    return onnx, Path.cwd()


def _device(dla_core: int | None, gpu_fallback: bool) -> str:
    """``"GPU"``, ``"DLA core 0"`` or ``"DLA core 0 + GPU fallback"``."""
    if dla_core is None:
        return "GPU"
    return f"DLA core {dla_core}" + (" + GPU fallback" if gpu_fallback else "")


def _installed_tensorrt() -> Any:
    try:
        from pairedge.gpu.tensorrt import load_tensorrt

        return load_tensorrt()
    except ImportError:
        return None


def _default_target(trt: Any) -> str:
    """The check target of the installed TensorRT (JetPack 6's tensorrt-10.3 when none is installed)."""
    from pairedge.export.tensorrt.onnx_ops import DEFAULT_TARGET, target_for

    if trt is None:
        return DEFAULT_TARGET
    version = TrtVersion.of(trt)
    return target_for(version.major, version.minor)
