"""``pairedge score``: score a prediction file against ground truth with one of the evaluation protocols."""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from pairedge.apps.cli.app import app, console, handle_errors
from pairedge.core.errors import InputError
from pairedge.measure.metrics import pairwise, par, pcp, tracking
from pairedge.measure.metrics.pairwise.report import ACCURACY_LABELS
from pairedge.measure.metrics.result import ScoreReport, Table
from rich.markup import escape


class Protocol(str, Enum):
    pairwise = "pairwise"
    pcp = "pcp"
    par = "par"
    mot = "mot"


class PcpMode(str, Enum):
    loose = "loose"
    strict = "strict"


#: ``--par-variant``: the choices of :data:`pairedge.measure.metrics.par.VARIANTS`.
ParVariant = Enum("ParVariant", {v: v for v in par.VARIANTS}, type=str)  # type: ignore[misc]


#: PAR option -> ``ParThresholds`` field it sets (the released defaults: 0.6 / 0.6 / 0.5).
PAR_THRESHOLD_OPTIONS = {
    "--par-actions-threshold": "actions",
    "--par-social-threshold": "social",
    "--par-global-threshold": "global_activity",
}


#: The protocol each protocol-specific option belongs to (given with another protocol, it is refused:
#: nothing is accepted and silently ignored).
OPTION_PROTOCOL = {
    "--tau": Protocol.pairwise,
    "--labels": Protocol.pairwise,
    "--match-boxes": Protocol.pairwise,
    "--mode": Protocol.pcp,
    "--threshold": Protocol.pcp,
    "--par-variant": Protocol.par,
    **dict.fromkeys(PAR_THRESHOLD_OPTIONS, Protocol.par),
}
DEFAULT_TAU = 0.5
DEFAULT_PCP_THRESHOLD = 0.5


def _refuse_other_protocols(protocol: Protocol, given: dict[str, Any]) -> None:
    """An InputError naming the options in ``given`` that belong to another protocol than ``protocol``."""
    wrong: dict[Protocol, list[str]] = {}
    for name in given:
        owner = OPTION_PROTOCOL[name]
        if owner is not protocol:
            wrong.setdefault(owner, []).append(name)
    if not wrong:
        return
    parts = [f"{', '.join(names)}: only for --protocol {owner.value}" for owner, names in wrong.items()]
    raise InputError(
        f"{'; '.join(parts)} (got --protocol {protocol.value}); drop the option or score with the protocol "
        "it belongs to"
    )


def _finite_threshold(ctx: typer.Context, param: typer.CallbackParam, value: float | None) -> float | None:
    """A PAR threshold is any finite raw logit; NaN or inf is a usage error (one line, exit 2)."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"expected a finite raw-logit threshold, got {value}")
    return value


@app.command()
@handle_errors
def score(
    protocol: Protocol = typer.Option(
        ..., "--protocol", "-p", help="Evaluation protocol (mot: tracking metrics of MOT files)."
    ),
    pred: Path = typer.Option(..., "--pred", help="Prediction file."),
    gold: Path = typer.Option(..., "--gold", help="Ground-truth file."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the full report as JSON here."),
    tau: float | None = typer.Option(
        None, "--tau", help="pairwise: stage-1 threshold on predicted p_interact (default 0.5)."
    ),
    labels: str | None = typer.Option(
        None,
        "--labels",
        help="pairwise: label set when the files have no header: a name (paper3, cad8, ...) or a "
        "comma-separated list of class names.",
    ),
    match_boxes: Path | None = typer.Option(
        None,
        "--match-boxes",
        help="pairwise: a MOT ground-truth file (gt.txt) with the true boxes: match PRED's people (the "
        "tracks of a pairedge run results.jsonl) to the true people per frame (Hungarian, IoU >= 0.5) "
        "before scoring pairs; unmatched predicted people make false-positive pairs, unmatched true people "
        "misses.",
    ),
    mode: PcpMode | None = typer.Option(
        None, "--mode", help="pcp: loose (Buffy official; the default) or strict."
    ),
    threshold: float | None = typer.Option(None, "--threshold", help="pcp: the threshold t (default 0.5)."),
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
    """Score PRED against GOLD (pairwise | pcp | par | mot) and print the summary and tables.

    mot: tracking metrics (MOTA, ID switches, IDF1) of a tracker's MOT file against a MOT ground truth.

    File formats: docs/formats.md. A malformed file stops with one line naming the file, record and problem;
    a ground truth with nothing to score is an error too.
    """
    given = {
        "--tau": tau,
        "--labels": labels,
        "--match-boxes": match_boxes,
        "--mode": mode.value if mode is not None else None,
        "--threshold": threshold,
        "--par-variant": par_variant.value if par_variant is not None else None,
        "--par-actions-threshold": par_actions_threshold,
        "--par-social-threshold": par_social_threshold,
        "--par-global-threshold": par_global_threshold,
    }
    given = {name: value for name, value in given.items() if value is not None}
    _refuse_other_protocols(protocol, given)
    report = _dispatch(
        protocol,
        pred,
        gold,
        tau=DEFAULT_TAU if tau is None else tau,
        labels=labels,
        match_boxes=match_boxes,
        mode=(mode or PcpMode.loose).value,
        threshold=DEFAULT_PCP_THRESHOLD if threshold is None else threshold,
        par_options={k: v for k, v in given.items() if OPTION_PROTOCOL[k] is Protocol.par},
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
    match_boxes: Path | None = None,
    threshold: float,
    par_options: dict[str, Any] | None = None,
) -> ScoreReport:
    if protocol is Protocol.pairwise:
        label_arg: str | list[str] | None = labels
        if labels is not None and "," in labels:
            label_arg = [name.strip() for name in labels.split(",") if name.strip()]
        return pairwise.score_files(pred, gold, tau=tau, labels=label_arg, match_boxes=match_boxes)
    if protocol is Protocol.pcp:
        return pcp.score_files(pred, gold, mode=mode, threshold=threshold)
    if protocol is Protocol.mot:
        return tracking.score_files(pred, gold)

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
    """A cell as plain text (never markup: it is printed as a :class:`rich.text.Text`)."""
    if isinstance(value, float):
        return "—" if not math.isfinite(value) else f"{value:.4f}"
    return str(value)


def _table_width(widths: Sequence[int]) -> int:
    """Characters of a Rich table (default box, padding 1) whose columns hold ``widths`` characters."""
    return sum(widths) + 3 * len(widths) + 1


def column_groups(table: Table, width: int) -> list[list[int]]:
    """Column indices of each part of ``table`` so that every part fits ``width`` characters.

    The first column (the row names) starts every part; the others follow in order, as many per part as
    fit. A column too wide for any part gets a part of its own (the terminal folds it; JSON has it whole).
    """
    from rich.cells import cell_len

    cells = [[str(c) for c in table.columns], *([_cell(v) for v in row] for row in table.rows)]
    widths = [max(cell_len(r[i]) for r in cells if i < len(r)) for i in range(len(table.columns))]
    if len(widths) <= 1 or _table_width(widths) <= width:
        return [list(range(len(widths)))]
    groups: list[list[int]] = [[0]]
    for i in range(1, len(widths)):
        if len(groups[-1]) > 1 and _table_width([widths[k] for k in (*groups[-1], i)]) > width:
            groups.append([0])
        groups[-1].append(i)
    return groups


def rich_tables(table: Table, width: int) -> list[Any]:
    """``table`` as Rich tables that print whole at ``width`` columns: one value per cell, no cell cut or
    wrapped inside a word; columns that do not fit go to a continuation table (first column repeated)."""
    from rich.cells import cell_len
    from rich.table import Table as RichTable
    from rich.text import Text

    groups = column_groups(table, width)
    out = []
    for k, cols in enumerate(groups):
        more = f" ({k + 1}/{len(groups)})" if len(groups) > 1 else ""
        title = table.title + more
        part = RichTable(title=Text(title), min_width=min(cell_len(title) + 4, width))  # a title on one line
        for i in cols:
            # sized to fit, nothing wraps; a column wider than the terminal on its own folds (never cut)
            part.add_column(
                Text(str(table.columns[i])), justify="left" if i == 0 else "right", overflow="fold"
            )
        for row in table.rows:
            part.add_row(*(Text(_cell(row[i]) if i < len(row) else "") for i in cols))
        out.append(part)
    return out


def print_table(table: Table, out: Any = None) -> None:
    """Print ``table`` (:class:`pairedge.measure.metrics.result.Table`) to fit ``out`` (default: the CLI
    console)."""
    out = out or console
    for part in rich_tables(table, out.width):
        out.print(part)


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
    """Print a report's summary, tables and notes; every table fits the terminal (see :func:`rich_tables`)."""

    rows = tuple((summary_label(name), value) for name, value in report.summary.items())
    print_table(Table(f"{report.protocol}: summary", ("metric", "value"), rows))
    settings = _par_settings(report)
    if settings:
        console.print(escape(settings), highlight=False, soft_wrap=True)
    for table in report.tables:  # titles, columns and cells carry data (label names): printed as plain Text
        print_table(table)
    for note in report.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)


def summary_label(name: str) -> str:
    """How a summary key is shown: the two accuracies say what they count (``pairedge.measure.metrics``)."""

    return ACCURACY_LABELS.get(name, name)
