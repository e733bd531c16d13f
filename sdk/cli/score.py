"""``pairedge score``: score a prediction file against ground truth with one of the evaluation protocols."""

from __future__ import annotations

import math
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from pairedge.cli.app import app, console, fail, handle_errors
from pairedge.errors import InputError
from rich.markup import escape

if TYPE_CHECKING:
    from pairedge.metrics.report import ScoreReport


class Protocol(str, Enum):
    pairwise = "pairwise"
    pcp = "pcp"
    par = "par"


class PcpMode(str, Enum):
    loose = "loose"
    strict = "strict"


class ParVariant(str, Enum):
    """``pairedge.metrics.par.VARIANTS`` (not imported here: it pulls numpy into ``pairedge --help``)."""

    official = "official"
    corrected = "corrected"


#: PAR option -> ``ParThresholds`` field it sets (the released defaults: 0.6 / 0.6 / 0.5).
PAR_THRESHOLD_OPTIONS = {
    "--par-actions-threshold": "actions",
    "--par-social-threshold": "social",
    "--par-global-threshold": "global_activity",
}


def _finite_threshold(ctx: typer.Context, param: typer.CallbackParam, value: float | None) -> float | None:
    """A PAR threshold is any finite raw logit; NaN or inf is a usage error (one line, exit 2)."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"expected a finite raw-logit threshold, got {value}")
    return value


@app.command()
@handle_errors
def score(
    protocol: Protocol = typer.Option(..., "--protocol", "-p", help="Evaluation protocol."),
    pred: Path = typer.Option(..., "--pred", help="Prediction file."),
    gold: Path = typer.Option(..., "--gold", help="Ground-truth file."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the full report as JSON here."),
    tau: float = typer.Option(0.5, "--tau", help="pairwise: stage-1 threshold on predicted p_interact."),
    labels: str | None = typer.Option(
        None,
        "--labels",
        help="pairwise: label set when the files have no header: a name (paper3, cad8, ...) or a "
        "comma-separated list of class names.",
    ),
    mode: PcpMode = typer.Option(PcpMode.loose, "--mode", help="pcp: loose (Buffy official) or strict."),
    threshold: float = typer.Option(0.5, "--threshold", help="pcp: the threshold t."),
    par_variant: ParVariant | None = typer.Option(
        None,
        "--par-variant",
        help="par: official (default; comparable with published numbers) or corrected (social recall over "
        "true groups, empty pairs score 0, F_p = 2PR/(P+R); see docs/protocols.md).",
    ),
    par_actions_threshold: float | None = typer.Option(
        None,
        "--par-actions-threshold",
        callback=_finite_threshold,
        help="par: individual-action label when the raw logit > this (default 0.6, the released value).",
    ),
    par_social_threshold: float | None = typer.Option(
        None,
        "--par-social-threshold",
        callback=_finite_threshold,
        help="par: social-activity label when the raw logit > this (default 0.6, the released value).",
    ),
    par_global_threshold: float | None = typer.Option(
        None,
        "--par-global-threshold",
        callback=_finite_threshold,
        help="par: global-activity label when the raw logit > this (default 0.5, the released value).",
    ),
) -> None:
    """Score PRED against GOLD (pairwise | pcp | par) and print the summary and tables.

    File formats: docs/formats.md. A malformed file stops with one line naming the file, record and problem;
    a ground truth with nothing to score is an error too.
    """
    par_options: dict[str, Any] = {
        "--par-variant": par_variant.value if par_variant is not None else None,
        "--par-actions-threshold": par_actions_threshold,
        "--par-social-threshold": par_social_threshold,
        "--par-global-threshold": par_global_threshold,
    }
    par_given = {name: value for name, value in par_options.items() if value is not None}
    if par_given and protocol is not Protocol.par:
        raise fail(
            f"{', '.join(par_given)}: only for --protocol par (got --protocol {protocol.value}); "
            "drop the option or score with --protocol par"
        )
    report = _dispatch(
        protocol,
        pred,
        gold,
        tau=tau,
        labels=labels,
        mode=mode.value,
        threshold=threshold,
        par_options=par_given,
    )
    if json_out is not None:  # written first: a report is never lost to a terminal problem
        write_report(report, json_out)
    print_report(report)
    if json_out is not None:
        console.print(f"wrote {escape(str(json_out))}", highlight=False)


def write_report(report: ScoreReport, path: Path) -> None:
    """Write ``report`` as JSON to ``path``; an unwritable path is an :class:`InputError` naming it."""
    try:
        report.write_json(path)
    except OSError as exc:
        raise InputError(
            f"--json {path}: cannot write the report ({exc.strerror or exc}); fix by giving a writable file "
            "path in an existing folder"
        ) from None


def _dispatch(
    protocol: Protocol,
    pred: Path,
    gold: Path,
    *,
    tau: float,
    labels: str | None,
    mode: str,
    threshold: float,
    par_options: dict[str, Any] | None = None,
) -> ScoreReport:
    if protocol is Protocol.pairwise:
        from pairedge.metrics import pairwise

        label_arg: str | list[str] | None = labels
        if labels is not None and "," in labels:
            label_arg = [name.strip() for name in labels.split(",") if name.strip()]
        return pairwise.score_files(pred, gold, tau=tau, labels=label_arg)
    if protocol is Protocol.pcp:
        from pairedge.metrics import pcp

        return pcp.score_files(pred, gold, mode=mode, threshold=threshold)
    from pairedge.metrics import par

    # Only what was given is passed: everything else keeps the API's defaults (official, 0.6 / 0.6 / 0.5).
    given = dict(par_options or {})
    kwargs: dict[str, Any] = {}
    if "--par-variant" in given:
        kwargs["variant"] = given.pop("--par-variant")
    if given:
        kwargs["thresholds"] = par.ParThresholds(
            **{PAR_THRESHOLD_OPTIONS[k]: float(v) for k, v in given.items()}
        )
    return par.score_files(pred, gold, **kwargs)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "—" if not math.isfinite(value) else f"{value:.4f}"
    return escape(str(value))


def _par_settings(report: ScoreReport) -> str | None:
    """One line naming the PAR variant and thresholds that produced ``report`` (None for other reports)."""
    variant, th = report.details.get("variant"), report.details.get("thresholds")
    if report.protocol != "par" or variant is None or not isinstance(th, dict):
        return None
    return (
        f"par variant: {variant}; thresholds (label when raw logit > t): actions {th.get('actions')}, "
        f"social {th.get('social')}, global {th.get('global')}"
    )


def print_report(report: ScoreReport) -> None:
    """Print a report's summary, tables and notes with rich."""
    from rich.table import Table as RichTable

    summary = RichTable(title=f"{escape(report.protocol)}: summary")
    summary.add_column("metric")
    summary.add_column("value", justify="right")
    for name, value in report.summary.items():
        summary.add_row(escape(name), _cell(value))
    console.print(summary)
    settings = _par_settings(report)
    if settings:
        console.print(escape(settings), highlight=False, soft_wrap=True)
    for table in report.tables:  # titles, columns and cells carry data (label names, image names): escaped
        out = RichTable(title=escape(table.title))
        for i, column in enumerate(table.columns):
            out.add_column(escape(str(column)), justify="left" if i == 0 else "right", overflow="fold")
        for row in table.rows:
            out.add_row(*(_cell(v) for v in row))
        console.print(out)
    for note in report.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
