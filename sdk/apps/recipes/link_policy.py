"""Choose the runtime's link confirmation time (``PipelineConfig.confirm_s``) on simulator validation clips.

A link that must stay above the stage-1 threshold for ``confirm_s`` seconds before it is reported keeps two
strangers who cross or pass each other for a moment from being linked, and delays every real link by as
much. The trade-off is measured where the truth is exact: the streaming pipeline (the same code as
``pairedge run``) runs over simulator validation scenes with ground-truth boxes, and a pair-frame counts as
a true link when the two people belong to the same social unit. The chosen value maximises the mean over
presets of that pipeline-level F1; the validation seeds must be disjoint from the training and held-out
seeds (the recipe's ``confirm`` entry names them). :func:`choose_operating_point` chooses a threshold and a
confirmation time together for one preset (a named operating point such as ``surveillance``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.apps.evaluation.evaluate import evaluate, pool
from pairedge.apps.evaluation.sources import parse_sources
from pairedge.runtime.config import PipelineConfig


def link_counts(
    model: Path, preset: str, seeds: str, confirm_s: float, frames: int, tau: float | None = None
) -> dict[str, int]:
    """Stage-1 TP / FP / FN of the pipeline of ``model`` over ``preset`` x ``seeds`` (pooled), at the model's
    ``p_interact`` threshold or ``tau``."""

    config = PipelineConfig(confirm_s=confirm_s, tau_interact=tau, operating_point="default")
    sources = parse_sources(f"sim:{preset}:seeds={seeds}:frames={frames}:boxes=truth")
    report = pool([evaluate(model, s, config=config) for s in sources])
    return {k: int(report.stage1[k]) for k in ("tp", "fp", "fn")}


def f1_of(counts: dict[str, int]) -> float:
    """F1 of TP / FP / FN counts (0 when there is nothing to score)."""
    tp, fp, fn = counts["tp"], counts["fp"], counts["fn"]
    return 2.0 * tp / max(2 * tp + fp + fn, 1)


def scored(counts: dict[str, int]) -> dict[str, Any]:
    """The counts with their precision, recall and F1."""
    tp, fp, fn = counts["tp"], counts["fp"], counts["fn"]
    return {**counts, "precision": tp / max(tp + fp, 1), "recall": tp / max(tp + fn, 1), "f1": f1_of(counts)}


def choose_confirm_s(
    model: Path,
    presets: Sequence[str],
    seeds: str,
    grid: Sequence[float],
    frames: int = 300,
    tau: float | None = None,
) -> tuple[float, list[dict[str, Any]]]:
    """The ``confirm_s`` of ``grid`` with the best mean pipeline-level F1 over ``presets`` (ties: the
    shorter), at the model's ``p_interact`` threshold or ``tau``.

    Returns:
        The chosen seconds and one row per grid value: ``{"confirm_s", "mean_f1", preset: {tp, fp, fn,
        precision, recall, f1}}``.
    """
    table = []
    for confirm_s in grid:
        row: dict[str, Any] = {"confirm_s": float(confirm_s)}
        for preset in presets:
            row[preset] = scored(link_counts(model, preset, seeds, float(confirm_s), frames, tau))
        row["mean_f1"] = float(np.mean([row[p]["f1"] for p in presets]))
        table.append(row)
    best = max(table, key=lambda r: (round(r["mean_f1"], 6), -r["confirm_s"]))
    return best["confirm_s"], table


def choose_operating_point(
    model: Path, preset: str, seeds: str, taus: Sequence[float], grid: Sequence[float], frames: int = 300
) -> tuple[float, float, list[dict[str, Any]]]:
    """The ``p_interact`` threshold of ``taus`` and ``confirm_s`` of ``grid`` with the best pipeline-level F1
    on ``preset`` x ``seeds`` (ties: the lower threshold, then the shorter confirmation).

    Returns:
        The chosen threshold and seconds, and one row per pair: ``{"p_interact", "confirm_s", tp, fp, fn,
        precision, recall, f1}``.
    """
    table = []
    for tau in taus:
        for confirm_s in grid:
            c = link_counts(model, preset, seeds, float(confirm_s), frames, float(tau))
            table.append({"p_interact": float(tau), "confirm_s": float(confirm_s), **scored(c)})
    best = max(table, key=lambda r: (round(r["f1"], 6), -r["p_interact"], -r["confirm_s"]))
    return best["p_interact"], best["confirm_s"], table
