"""``pairedge calibrate``: INT8 (QDQ) and FP16 models of an exported model folder, with a report."""

from __future__ import annotations

from pathlib import Path

import typer
from pairedge.apps.cli.app import app, console, err_console, handle_errors
from pairedge.apps.cli.score import print_table
from pairedge.calibration.api import (
    DEFAULT_HEADROOM,
    DEFAULT_METHOD,
    DEFAULT_PERCENTILE,
    DEFAULT_TARGET_AGREEMENT,
    CalibrateOptions,
    check_out,
    check_scenes,
    parse_pair,
    quant_config,
)
from pairedge.calibration.api import calibrate as run_calibration
from pairedge.core.bundled import describe_model, resolve_model_dir
from pairedge.measure.metrics.result import Table
from rich.markup import escape


@app.command()
@handle_errors
def calibrate(
    model: str = typer.Argument(
        ...,
        help="Model folder with stage1.onnx + stage2.onnx (pairedge export), or 'default' (the bundled "
        "model).",
    ),
    out: Path = typer.Option(
        ...,
        "--out",
        "-o",
        help="Output folder: a new one (the fp32 files are copied there), or the model folder itself (files "
        "are added; never the bundled model's).",
    ),
    scenes: str | None = typer.Option(
        None,
        "--scenes",
        help="Simulator scenes, e.g. 'static:0-3,moving:0-3' (rendered, through the runtime). With no source "
        "at all: training scenes of the model's own recipe (its metadata), 4 seeds per preset.",
    ),
    video: Path | None = typer.Option(None, "--video", help="Video or image folder (as for `pairedge run`)."),
    detections: Path | None = typer.Option(
        None, "--detections", "-d", help="Detections of --video: MOT .txt, JRDB .json or CVML .xml."
    ),
    features: list[Path] = typer.Option(
        [], "--features", help="Features .npz in the training format (repeatable; one stage per file)."
    ),
    cad: Path | None = typer.Option(
        None,
        "--cad",
        help="Collective Activity annoNN.mat folder (or file) through the model's pipeline "
        "(box-only models: every pair the runtime scores).",
    ),
    method: str | None = typer.Option(
        None, "--method", help="Activation ranges: percentile (default), minmax or entropy."
    ),
    percentile: float | None = typer.Option(
        None,
        "--percentile",
        min=50.0,
        max=100.0,
        help=f"The percentile kept by --method percentile ({DEFAULT_PERCENTILE:g}).",
    ),
    headroom: str | None = typer.Option(
        None,
        "--headroom",
        help="Int8 ranges as multiples of the calibrated ones, first layers and others, "
        "e.g. '2,1.5' (default '1,1': values beyond the calibration rows' extremes saturate).",
    ),
    no_equalize: bool = typer.Option(
        False, "--no-equalize", help="Do not absorb per-column scales before the quantized Gemms."
    ),
    target: float = typer.Option(
        DEFAULT_TARGET_AGREEMENT,
        "--target-agreement",
        min=0.0,
        max=1.0,
        help="Agreement with fp32 each INT8 stage must reach on the held-out search rows; below it the most "
        "sensitive Gemms stay in float. 0 disables the search.",
    ),
    frames: int = typer.Option(300, "--frames", min=2, help="Frames per simulator scene."),
    stride: int = typer.Option(3, "--stride", min=1, help="Keep the pairs of every N-th frame."),
    max_frames: int | None = typer.Option(None, "--max-frames", min=1, help="Read at most N video frames."),
    max_rows: int = typer.Option(4096, "--max-rows", min=16, help="Calibration rows per stage (stratified)."),
    min_per_stratum: int = typer.Option(
        20, "--min-per-stratum", min=1, help="Warn when a class x motion stratum has fewer rows."
    ),
    strict: bool = typer.Option(False, "--strict", help="A small stratum is an error (exit code 1)."),
) -> None:
    """Write stage{1,2}.int8.onnx (QDQ for TensorRT) and stage{1,2}.fp16.onnx beside the fp32 models."""

    options = CalibrateOptions(
        scenes=scenes,
        video=video,
        detections=detections,
        features=tuple(features),
        cad=cad,
        frames=frames,
        stride=stride,
        max_frames=max_frames,
        method=method or DEFAULT_METHOD,
        percentile=DEFAULT_PERCENTILE if percentile is None else percentile,
        equalize=not no_equalize,
        headroom=DEFAULT_HEADROOM if headroom is None else parse_pair(headroom, "--headroom", float),
        target_agreement=target if target > 0 else None,
        max_rows=max_rows,
        min_per_stratum=min_per_stratum,
        strict=strict,
    )
    quant_config(options)  # method and headroom checked first
    check_scenes(options)  # --scenes x --frames bounded before the model is even opened
    folder = resolve_model_dir(model)
    check_out(folder, out.expanduser())  # never into the installed package; nothing printed before a refusal
    console.print(f"model: {escape(describe_model(folder))}", highlight=False, soft_wrap=True)
    with err_console.status("calibrating") as status:
        result = run_calibration(folder, out, options, progress=lambda m: status.update(escape(m)))
    _print(result)


def _print(result: object) -> None:

    report = result.report  # type: ignore[attr-defined]
    rows = []
    for key, st in report["stages"].items():
        i8, f16 = st["held_out"].get("int8_gated", st["held_out"]["int8"]), st["held_out"]["fp16"]
        floats = st.get("float_nodes", {})
        n_gemms = len(floats.get("gemms", []))
        gemms = f"{n_gemms - len(floats.get('gemms_in_float', []))}/{n_gemms}"
        rows.append(
            (
                key,
                st["rows"]["calibration"],
                st["rows"].get("report", st["rows"]["held_out"]),
                f"{100 * i8['agreement']:.2f} %",
                f"{i8['max_abs_logit_error']:.3g}",
                f"{100 * f16['agreement']:.2f} %",
                gemms,
            )
        )
    columns = ("stage", "cal rows", "held out", "int8", "dlogit", "fp16", "int8 Gemms")
    costs = [st.get("layers", {}).get("macs_per_pair") for st in report["stages"].values()]
    print_table(Table(f"pairedge calibrate: method {report['method']}", columns, tuple(rows)))
    console.print(
        "int8 / fp16: decisions equal to fp32 on held-out rows that no choice used (stage 2: the pairs the "
        "fp32 gate passes); dlogit: int8's max |logit - fp32 logit|; int8 Gemms: Gemms with Q/DQ (any other "
        "runs in fp16 on TensorRT)",
        highlight=False,
        soft_wrap=True,
    )
    if all(costs):
        console.print(
            "multiply-adds per pair (int8 Gemms read their input once: fp32's count): "
            + ", ".join(
                f"{key} {c['fp32']:,}, {100 * c['int8_share']:.1f} % in int8"
                for key, c in zip(report["stages"], costs, strict=True)
            ),
            highlight=False,
            soft_wrap=True,
        )
    cost_rows = []  # bytes and the 64-pair figure are in calibration.md: the table fits 80 columns
    for key, st in report["stages"].items():
        for name, c in st.get("cost", {}).items():
            lat = {int(n): v for n, v in c["latency_ms"].items()}
            ratio = {int(n): v for n, v in c.get("vs_fp32", {}).items()}.get(512)
            cost_rows.append(
                (
                    key,
                    name,
                    f"{c['macs_per_pair']:,}",
                    f"{100 * c['int8_share']:.0f} %",
                    *(f"{lat[n]:.3f}" for n in (1, 512, 4950) if n in lat),
                    "-" if ratio is None else f"{ratio:.2f}x",
                )
            )
    if cost_rows:
        print_table(
            Table(
                "cost (ONNX Runtime CPU, 1 thread, p50; vs fp32 @512)",
                ("stage", "prec.", "MACs/pair", "int8", "ms @1", "@512", "@4950", "vs fp32"),
                tuple(cost_rows),
            )
        )
    for key, st in report["stages"].items():
        mixed = st.get("mixed_precision")
        if mixed and mixed["float_gemms"]:
            console.print(
                escape(
                    f"{key}: kept in float (fp16 on TensorRT): {', '.join(mixed['float_gemms'])} "
                    f"({100 * mixed['float_macs_share']:.1f} % of the multiply-adds): {mixed['why']}"
                ),
                highlight=False,
                soft_wrap=True,
            )
    for warning in result.warnings:  # type: ignore[attr-defined]
        err_console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    console.print(
        f"wrote {escape(str(result.out))} (calibration.md has the per-tensor ranges)",
        highlight=False,  # type: ignore[attr-defined]
        soft_wrap=True,
    )
