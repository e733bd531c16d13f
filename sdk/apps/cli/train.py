"""``pairedge train``: training rows -> checkpoint, training report and ONNX in one folder."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer
from pairedge.apps.cli.app import app, console, handle_errors
from pairedge.core.errors import InputError
from pairedge.core.optional import require
from rich.markup import escape


class Spec(str, Enum):
    liang2026 = "liang2026"
    pairedge = "pairedge"


@app.command("train")
@handle_errors
def train_command(
    data: str = typer.Option(
        ...,
        "--data",
        help="Features .npz (docs/formats.md), a Collective Activity folder of annoNN.mat files, or "
        "simulator scenes 'sim:static+moving:seeds=0-11:frames=300'.",
    ),
    spec: Spec = typer.Option(..., "--spec", help="Feature spec."),
    spec_version: str | None = typer.Option(
        None,
        "--spec-version",
        help="Layout version of the spec (default: the current one; pairedge: 1, 2 = current, 3 = + the "
        "long-horizon and group context, docs/features.md). A features file keeps its own.",
    ),
    stage: int = typer.Option(
        ..., "--stage", min=1, max=2, help="1 = interacting or not, 2 = interaction type."
    ),
    out: Path = typer.Option(..., "--out", help="Output folder (checkpoint, report, ONNX)."),
    labels: str | None = typer.Option(None, "--labels", help="Simulator stage 2: paper3 (default) or sim7."),
    arch: str | None = typer.Option(
        None,
        "--arch",
        help="stage1_mlp | relation_net | residual_mlp | paper_adaptive_geometric (default by stage).",
    ),
    epochs: int = typer.Option(60, "--epochs", min=1),
    patience: int = typer.Option(12, "--patience", min=1, help="Early stopping on validation MPCA."),
    batch_size: int = typer.Option(256, "--batch-size", min=2),
    lr: float = typer.Option(2e-3, "--lr"),
    samples_per_epoch: int | None = typer.Option(None, "--samples-per-epoch", help="Default: training rows."),
    balance_sequences: bool = typer.Option(
        True,
        "--balance-sequences/--balance-classes",
        help="Sampling: also equalise sequences within a class.",
    ),
    val_fraction: float = typer.Option(0.2, "--val-fraction", help="Share of rows, whole sequences."),
    seed: int = typer.Option(0, "--seed"),
    ignore_features: str = typer.Option(
        "",
        "--ignore-features",
        help="Comma-separated feature names the model must not use; 'viewpoint' = the spec's absolute image "
        "size/position columns (for cameras mounted at another height than in training).",
    ),
    hidden: str = typer.Option(
        "", "--hidden", help="Hidden widths of the model, e.g. 128,256 (default: the architecture's own)."
    ),
    input_squash: float | None = typer.Option(
        None,
        "--input-squash",
        min=0.1,
        max=100.0,
        help="Squash each z-scored input beyond its knee (the training rows' largest |z|) as "
        "knee + c*log1p((|z| - knee)/c) inside the model (the bundled model: c = 1): heavy tails bounded "
        "for fp32, fp16 and int8 alike, every training row unchanged. Default: off.",
    ),
    activation_bound: float | None = typer.Option(
        None,
        "--activation-bound",
        min=0.01,
        max=100.0,
        help="stage1_mlp / relation_net: clip every hidden activation to [0, B] instead of a ReLU (Clip in "
        "the ONNX graph): every hidden int8 range bounded by construction. Default: off (ReLU).",
    ),
    augment: str = typer.Option(
        "",
        "--augment",
        help="Collective Activity folder only: also train on label-preserving copies of the training "
        "sequences: mirror, reverse (time reversal), reverse_turned (reversal with walkers turned; for "
        "data with orientation); comma-separated. Copies of validation sequences are never trained on.",
    ),
    orientation: bool = typer.Option(
        True,
        "--orientation/--no-orientation",
        help="Collective Activity folder: give the model each person's annotated body orientation (attr), or "
        "boxes and tracks only.",
    ),
    history: int | None = typer.Option(
        None,
        "--history",
        min=2,
        help="pairedge spec, Collective Activity folder or simulator scenes: samples of track history the "
        "features see (default: the spec's own, 8; stored in the model, so the runtime extracts the same).",
    ),
    refit: bool = typer.Option(
        False,
        "--refit/--no-refit",
        help="After early stopping, train a fresh model on every sequence (validation included) and the "
        "copies for the chosen number of epochs; the reported validation numbers are then the "
        "early-stopped model's.",
    ),
    aspect_swap: float = typer.Option(
        0.0,
        "--aspect-swap",
        min=0.0,
        max=1.0,
        help="Stage 2 with walking_together / standing_together labels: give this fraction of the walking "
        "rows the box aspects of a random standing row, so motion rather than box width says walking "
        "(simulator walkers have wide boxes, real annotated ones do not; the bundled recipe uses 0.5).",
    ),
    export: bool = typer.Option(True, "--export/--no-export", help="Also write stage{N}.onnx."),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
) -> None:
    """Train a stage-1 or stage-2 classifier (focal loss, balanced sampling, AdamW, early stopping)."""

    require("torch", purpose="pairedge train")
    from pairedge.export.datasets.training_data import load_with_copies
    from pairedge.export.jobs import train_to_dir
    from pairedge.export.train import TrainConfig

    try:
        widths = tuple(int(w) for w in hidden.split(",") if w.strip())
    except ValueError:
        raise InputError(f"--hidden: expected comma-separated positive integers, got {hidden!r}") from None
    if any(w < 1 for w in widths):
        raise InputError(f"--hidden: expected comma-separated positive integers, got {hidden!r}")
    config = TrainConfig(
        architecture=arch,
        hidden=widths,
        epochs=epochs,
        patience=patience,
        batch_size=batch_size,
        lr=lr,
        samples_per_epoch=samples_per_epoch,
        val_fraction=val_fraction,
        seed=seed,
        balance_sequences=balance_sequences,
        ignore_features=tuple(n.strip() for n in ignore_features.split(",") if n.strip()),
        input_squash=input_squash,
        activation_bound=activation_bound,
    )
    names = tuple(a.strip() for a in augment.split(",") if a.strip())
    rows, copies = load_with_copies(
        data,
        spec=spec.value,
        stage=stage,
        labels=labels,
        spec_version=spec_version,
        augment=names,
        orientation=orientation,
        feature_config=feature_options(spec, history),
    )
    extra = {}
    if aspect_swap > 0:
        from pairedge.export.aspect_swap import borrow_standing_aspect

        if stage != 2:
            raise InputError("--aspect-swap: stage 2 only (stage 1 has no box-aspect column)")
        rows, swapped = borrow_standing_aspect(rows, aspect_swap, seed)
        extra["aspect_swap"] = {"fraction": aspect_swap, "seed": seed, "rows": swapped}
        console.print(
            f"aspect swap: {swapped} walking rows took a standing row's box aspects", highlight=False
        )
    outputs = train_to_dir(
        rows,
        out,
        spec=spec.value,
        stage=stage,
        config=config,
        export=export,
        progress=progress,
        spec_version=spec_version,
        copies=copies,
        refit=refit,
        extra=extra,
    )
    result, val = outputs.result, outputs.result.val_metrics
    console.print(
        f"stage {result.stage} {result.model_config.architecture} ({result.num_parameters} parameters), "
        f"best epoch {result.best_epoch}/{len(result.history)}: validation accuracy {val['accuracy']:.4f}, "
        f"MPCA {val['mpca']:.4f}, macro-F1 {val['macro_f1']:.4f} on {val['n']} pairs "
        f"from {len(result.val_groups)} sequences",
        highlight=False,
    )
    if result.info.get("refit"):
        r = result.info["refit"]
        console.print(
            f"refit: a fresh model trained on all {r['rows']} rows for {r['epochs']} epochs (the model "
            "written; the validation numbers above are the early-stopped model's)",
            highlight=False,
        )
    console.print(
        f"wrote {escape(str(outputs.checkpoint_dir))}/model.pt, model.json, report.md, report.json",
        highlight=False,
        soft_wrap=True,
    )
    if outputs.export is not None:
        console.print(
            f"wrote {escape(str(outputs.export.path))} ({outputs.export.onnx_bytes} bytes), max abs "
            f"difference ONNX Runtime vs PyTorch {outputs.export.max_abs_diff:.3g}",
            highlight=False,
            soft_wrap=True,
        )


def feature_options(spec: Spec, history: int | None) -> dict[str, int]:
    """The extractor options ``pairedge train`` passes on: ``{"history": K}`` when ``--history`` is given.

    Raises:
        InputError: ``--history`` with a spec that keeps no track history (``liang2026``).
    """

    if history is None:
        return {}
    if spec is not Spec.pairedge:
        raise InputError(f"--history is an option of the pairedge spec; {spec.value} keeps no track history")
    return {"history": history}
