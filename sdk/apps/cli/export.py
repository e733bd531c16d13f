"""``pairedge export``: a checkpoint (pairedge-trained or from the paper's released code) -> ONNX."""

from __future__ import annotations

from pathlib import Path

import typer
from pairedge.apps.cli.app import app, console, handle_errors
from pairedge.core.errors import InputError
from pairedge.core.labels import get_label_set
from pairedge.core.modelfolder import MANIFEST_NAME
from pairedge.core.optional import require
from rich.markup import escape


@app.command("export")
@handle_errors
def export_command(
    checkpoint: Path = typer.Argument(
        ..., help="A `pairedge train` output folder (model.pt + model.json), or a paper checkpoint file."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="The .onnx file to write."),
    paper_stage1: bool = typer.Option(
        False, "--paper-stage1", help="CHECKPOINT is the paper's stage-1 adaptive geometric classifier."
    ),
    paper_stage2: bool = typer.Option(
        False,
        "--paper-stage2",
        help="CHECKPOINT is the paper's stage-2 geometric MLP (with normalization_stats).",
    ),
    labels: str | None = typer.Option(
        None,
        "--labels",
        help="--paper-stage2 with other than 3 classes: a label set name (paper3, cad8, ...).",
    ),
    panoramic: bool | None = typer.Option(
        None,
        "--panoramic/--no-panoramic",
        help="--paper-stage1: the wrap setting the checkpoint was trained with (default --panoramic, as the "
        "released training always used); stored in the model and applied by the runtime.",
    ),
    opset: int = typer.Option(17, "--opset", help="ai.onnx opset to declare (7 to 20 with torch 2.x)."),
) -> None:
    """Export CHECKPOINT to ONNX (dynamic pair axis, metadata) and print the ONNX Runtime vs PyTorch error."""

    require("torch", purpose="pairedge export")
    from pairedge.export.checkpoint import load_checkpoint
    from pairedge.export.onnx_export import check_opset, export_checkpoint, register_export
    from pairedge.export.paper_import import folded_warnings, import_paper_stage1, import_paper_stage2

    check_opset(opset)  # before reading the checkpoint: one line, no torch warning or graph dump
    if paper_stage1 and paper_stage2:
        raise InputError("give at most one of --paper-stage1 and --paper-stage2")
    if labels is not None and not paper_stage2:
        raise InputError("--labels applies to --paper-stage2 only (pairedge checkpoints store their labels)")
    if panoramic is not None and not paper_stage1:
        raise InputError(
            "--panoramic/--no-panoramic applies to --paper-stage1 only (other checkpoints store their "
            "feature options)"
        )
    with folded_warnings():  # a hostile file: one error line, torch's warnings folded into it
        if paper_stage1:
            ckpt = import_paper_stage1(checkpoint, panoramic=True if panoramic is None else panoramic)
        elif paper_stage2:
            ckpt = import_paper_stage2(checkpoint, get_label_set(labels).classes if labels else None)
        else:
            ckpt = load_checkpoint(checkpoint)
        result = export_checkpoint(ckpt, out, opset=opset)
    manifest = register_export(result)
    meta = result.metadata
    console.print(
        escape(
            f"wrote {result.path} ({result.onnx_bytes} bytes, opset {result.opset}): stage {meta.stage}, "
            f"{meta.architecture}, {result.num_parameters} parameters, spec {meta.feature_spec} "
            f"v{meta.feature_spec_version}, labels {list(meta.labels)}"
        ),
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"max abs difference ONNX Runtime vs PyTorch: {result.max_abs_diff:.3g} "
        f"(pairs {list(result.batch_sizes)}, max |logit| {result.max_abs_logit:.3g})",
        highlight=False,
    )
    if meta.extra.get("feature_config"):
        console.print(
            f"feature options stored for the runtime: {escape(str(meta.extra['feature_config']))}",
            highlight=False,
            soft_wrap=True,
        )
    if manifest is not None:
        console.print(
            f"recorded its SHA-256 in {escape(str(result.path.parent / MANIFEST_NAME))}",
            highlight=False,
            soft_wrap=True,
        )
    else:
        console.print(
            f"not recorded in a model manifest: name the file stage{meta.stage}.onnx to make it part of a "
            "model folder (Pipeline.load picks stage1.onnx / stage2.onnx)",
            highlight=False,
        )
