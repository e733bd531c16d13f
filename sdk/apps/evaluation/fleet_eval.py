"""``pairedge eval`` over many sources at once: one task per source, serially or on Ray, pooled exactly.

Each source (a simulated scene, a CAD sequence, a video, a ROS 2 log) is evaluated by :func:`evaluate` in
its own task; reports travel back as plain dicts (:meth:`EvalReport.to_dict`), and :func:`pool` merges the
counts, so the pooled metrics equal a serial run's. A source that fails is reported with its error and the
others are still scored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pairedge.apps.evaluation.evaluate import EvalReport, evaluate, pool
from pairedge.apps.evaluation.sources import StreamSource
from pairedge.apps.fleet import Outcome, run_tasks
from pairedge.core.errors import InputError
from pairedge.runtime.config import PipelineConfig
from pairedge.runtime.deployment import Deployment


@dataclass(frozen=True)
class EvalTask:
    """Everything one worker needs to evaluate one source (plain, picklable values)."""

    deployment: Deployment
    source: StreamSource
    max_frames: int | None = None
    config: PipelineConfig | None = None
    match_boxes: str | None = None


def evaluate_task(task: EvalTask) -> dict[str, Any]:
    """Evaluate one source; the report as a dict (module level, so Ray ships it by reference)."""
    return evaluate(
        task.deployment,
        task.source,
        max_frames=task.max_frames,
        config=task.config,
        match_boxes=task.match_boxes,
    ).to_dict()


@dataclass(frozen=True)
class FleetResult:
    """The pooled report of every source that succeeded, each source's outcome, and the failures."""

    report: EvalReport | None
    outcomes: tuple[Outcome[dict[str, Any]], ...]

    @property
    def failures(self) -> list[tuple[str, str]]:
        """``(source, error)`` of every source that failed."""
        return [(o.key, o.error or "") for o in self.outcomes if not o.ok]


def evaluate_many(
    deployment: Deployment | str | Path,
    sources: Sequence[StreamSource],
    *,
    max_frames: int | None = None,
    executor: str = "local",
    address: str | None = None,
    workers: int | None = None,
    on_done: Callable[[Outcome[dict[str, Any]]], None] | None = None,
    config: PipelineConfig | None = None,
    match_boxes: str | Path | None = None,
) -> FleetResult:
    """Evaluate a deployment (:func:`evaluate`: a folder path alone runs at fp32 on the "auto" backends) on
    every source (one task each) and pool the reports.

    ``config``: the pipeline's configuration (its ``tracker`` gives the ids of detections without them);
        None: the defaults;
    ``match_boxes``: a MOT ground truth the run's people are matched to by box before scoring
        (:func:`evaluate`).

    Raises:
        InputError: no sources; MissingDependencyError: Ray requested but not installed.
    """
    if not sources:
        raise InputError("nothing to evaluate: no sources")
    if not isinstance(deployment, Deployment):
        deployment = Deployment(deployment)

    boxes = None if match_boxes is None else str(match_boxes)
    tasks = [EvalTask(deployment, s, max_frames, config, boxes) for s in sources]
    outcomes = run_tasks(
        evaluate_task,
        tasks,
        [s.name for s in sources],
        executor=executor,
        address=address,
        workers=workers,
        on_done=on_done,
    )
    reports = [EvalReport.from_dict(o.value) for o in outcomes if o.ok and o.value is not None]
    return FleetResult(pool(reports) if reports else None, tuple(outcomes))
