"""Evaluate a model on ONE source through the streaming runtime, and pool reports of many sources exactly.

:func:`evaluate` runs the deployed pipeline (any precision, classifier backend and flow backend, chosen by
registry name) over one stream, writes its predictions and the truth in the pairwise schema and scores them
with :func:`pairedge.measure.metrics.pairwise.score_files` — the same code as ``pairedge score``. The
:class:`EvalReport` keeps the *counts* behind every metric (confusion matrix, missing predictions, stage-1 and
group TP/FP/FN, group-activity votes), so :func:`pool` merges reports of many sources (run one per process or
one Ray task per log) into exactly the numbers a single pass over all of them would give.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.apps.evaluation.sources import StreamSource, parse_sources
from pairedge.core.errors import InputError
from pairedge.measure.metrics.pairwise import metrics_from_confusion, score_files
from pairedge.measure.metrics.pairwise.groups import DetectionScore
from pairedge.measure.metrics.pairwise.report import scored_accuracy
from pairedge.runtime.config import PipelineConfig
from pairedge.runtime.deployment import Deployment
from pairedge.runtime.runner.output import JsonlWriter
from pairedge.runtime.runner.run import RunStats, run_stream

_STAGES = ("flow", "features", "stage1", "stage2", "total")


@dataclass(frozen=True)
class EvalReport:
    """Counts and settings of one evaluation (one source, or several pooled).

    Attributes:
        model, precision, backend, flow: what ran (the model folder and precision of the
            :class:`~pairedge.runtime.deployment.Deployment`, the backends the pipeline resolved).
            labels: (C,) stage-2 class names.
        sources: the source names. frames: frames processed. pairs: pair-frames scored by stage 1.
        confusion: (C, C) int64 rows = truth; missing: (C,) true interacting pairs without a prediction.
        stage1: TP / FP / FN of interacting pairs. group_activity: {"scored", "correct"} or None.
        group_detection: TP / FP / FN of groups (member-set IoU > 0.5) or None.
        latency_ms: stage -> frame-weighted mean milliseconds. has_truth: any truth was scored.
        notes: remarks (box-only source, no truth, ...). per_source: summaries of pooled sources.
    """

    model: str
    precision: str
    backend: str
    flow: str
    labels: tuple[str, ...]
    sources: tuple[str, ...]
    frames: int
    pairs: int
    confusion: np.ndarray
    missing: np.ndarray
    stage1: dict[str, int]
    group_activity: dict[str, int] | None
    group_detection: dict[str, int] | None
    latency_ms: dict[str, float]
    has_truth: bool
    notes: tuple[str, ...] = ()
    per_source: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    def summary(self) -> dict[str, float]:
        """Headline metrics from the counts (NaN where undefined), as ``pairedge score`` computes them:
        ``accuracy`` counts missed true pairs as wrong, ``accuracy_scored`` leaves them out
        (:data:`pairedge.measure.metrics.pairwise.report.ACCURACY_LABELS`)."""
        nan = float("nan")
        out = dict.fromkeys(
            (
                "accuracy",
                "accuracy_scored",
                "mpca",
                "macro_f1",
                "pair_precision",
                "pair_recall",
                "pair_f1",
                "group_activity_accuracy",
                "group_f1",
            ),
            nan,
        )
        if not self.has_truth:
            return out
        if int(self.confusion.sum() + self.missing.sum()):
            m = metrics_from_confusion(self.confusion, self.missing, self.labels)
            out.update(
                accuracy=m.accuracy,
                accuracy_scored=scored_accuracy(m.confusion),
                mpca=m.mpca,
                macro_f1=m.macro_f1,
            )
        s1 = DetectionScore(**self.stage1)
        out.update(pair_precision=s1.precision, pair_recall=s1.recall, pair_f1=s1.f1)
        if self.group_activity and self.group_activity["scored"]:
            out["group_activity_accuracy"] = self.group_activity["correct"] / self.group_activity["scored"]
        if self.group_detection:
            out["group_f1"] = DetectionScore(**self.group_detection).f1
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(
            confusion=self.confusion.tolist(),
            missing=self.missing.tolist(),
            labels=list(self.labels),
            sources=list(self.sources),
            notes=list(self.notes),
            per_source=list(self.per_source),
            summary=_json_floats(self.summary()),
        )
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvalReport:
        """Inverse of :meth:`to_dict` (for reports sent between processes as JSON)."""
        fields = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        fields.update(
            confusion=np.asarray(d["confusion"], np.int64),
            missing=np.asarray(d["missing"], np.int64),
            labels=tuple(d["labels"]),
            sources=tuple(d["sources"]),
            notes=tuple(d.get("notes", ())),
            per_source=tuple(d.get("per_source", ())),
        )
        return cls(**fields)


def _json_floats(values: dict[str, float]) -> dict[str, float | None]:
    return {k: (float(v) if np.isfinite(v) else None) for k, v in values.items()}


def evaluate(
    deployment: Deployment | str | Path,
    source: StreamSource | str,
    *,
    max_frames: int | None = None,
    on_frame: Callable[[], None] | None = None,
    config: PipelineConfig | None = None,
    match_boxes: str | Path | None = None,
) -> EvalReport:
    """Evaluate a deployment on ONE source (a :class:`StreamSource`, or text that names exactly one).

    Args:
        deployment: the model folder, precision and backends
            (:class:`~pairedge.runtime.deployment.Deployment`); a folder path alone runs it at fp32 on the
            "auto" backends.
        config: a :class:`~pairedge.runtime.config.PipelineConfig` for the pipeline (None: the defaults).
        match_boxes: a MOT ground-truth file with the true boxes (``gt.txt``, 1-based frames: MOT frame
            ``k + 1`` is the source's frame ``k``): the run's people are matched to the true people per frame
            by box IoU (Hungarian, IoU >= 0.5) before its pairs are scored, as ``pairedge score
            --match-boxes``
            does (:mod:`pairedge.measure.metrics.pairwise.boxes`): for a tracker's ids on raw detections.

    Raises:
        InputError: the text names several sources (evaluate each, then :func:`pool`).
        ModelError, BackendError, FormatError: from the model, the backends and the source.
    """

    if not isinstance(deployment, Deployment):
        deployment = Deployment(deployment)
    if isinstance(source, str):
        found = parse_sources(source)
        if len(found) != 1:
            raise InputError(
                f"evaluate() takes one source; {source!r} names {len(found)}: evaluate each and pool()"
            )
        source = found[0]
    notes: list[str] = []
    with deployment.load(config) as pipe, tempfile.TemporaryDirectory() as tmp:
        labels = pipe.labels
        gold_lines: list[dict[str, Any]] = []
        if source.box_only and pipe.flow is not None:
            notes.append(f"{source.name} has no frames: this model's flow features fall back to box history")

        def items() -> Any:
            for f in source.open(labels, max_frames, notes=notes):
                if f.truth is not None:
                    gold_lines.append(f.truth.record(f.index, labels))
                if on_frame is not None:
                    on_frame()
                yield f.index, f.image, f.detections, f.timestamp

        pred = Path(tmp) / "pred.jsonl"
        pipe.reset()
        with JsonlWriter(pred, labels) as jsonl:
            if source.image_size is not None:  # box-only: the pipeline needs the image size with every frame
                stats = _run_sized(pipe, items(), jsonl, source.image_size)
            else:
                stats = run_stream(pipe, items(), jsonl=jsonl)
        run = stats.summary()
        if (why := run.unscored()) is not None:  # the rule of `pairedge run`: nothing scored is an error
            raise InputError(f"{source.name}: {why}")
        describe = pipe.describe()
        counts = _score(pred, gold_lines, labels, Path(tmp), score_files, pipe.tau_interact, match_boxes)
    if counts is not None and counts["note"]:
        notes.append(f"{source.name}: {counts['note']}")
    if counts is None:
        notes.append(f"{source.name}: no ground truth; only run statistics")
    c = len(labels)
    report = EvalReport(
        model=str(deployment.folder),
        precision=deployment.precision,
        backend=str(describe["stage1"]),
        flow=str(describe["flow"]),
        labels=tuple(labels),
        sources=(source.name,),
        frames=run.frames,
        pairs=run.pairs,
        confusion=counts["confusion"] if counts else np.zeros((c, c), np.int64),
        missing=counts["missing"] if counts else np.zeros(c, np.int64),
        stage1=counts["stage1"] if counts else {"tp": 0, "fp": 0, "fn": 0},
        group_activity=counts["group_activity"] if counts else None,
        group_detection=counts["group_detection"] if counts else None,
        latency_ms={s: run.latency_ms[s]["mean"] for s in _STAGES if s in run.latency_ms},
        has_truth=counts is not None,
        notes=tuple(notes),
    )
    return report


def _run_sized(pipe: Any, items: Any, jsonl: Any, size: tuple[int, int]) -> Any:

    stats = RunStats(pipe.labels)
    for index, image, dets, t in items:
        result = pipe.step(image, dets, t, frame_index=index, image_size=size)
        stats.add(result)
        jsonl.write(result)
    return stats


def _score(
    pred: Path,
    gold_lines: list[dict[str, Any]],
    labels: Sequence[str],
    tmp: Path,
    score_files: Any,
    tau: float,
    match_boxes: str | Path | None = None,
) -> dict[str, Any] | None:
    """The counts behind the pairwise metrics (and the box-matching note, or None), or None when the source
    has no truth.

    A truth without any interacting pair is still scored: the predicted interactions there are false
    positives.
    """
    import json

    if not gold_lines:
        return None
    gold = tmp / "gold.jsonl"
    with gold.open("w") as fh:
        fh.write(json.dumps({"labels": list(labels)}) + "\n")
        for rec in gold_lines:
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
    rep = score_files(pred, gold, tau=tau, allow_empty=True, match_boxes=match_boxes)
    d = rep.details
    s1 = d["stage1"]
    ga, gd = d.get("group_activity"), d.get("group_detection")
    return {
        "confusion": np.asarray(d["confusion"], np.int64),
        "missing": np.asarray(d["missing"], np.int64),
        "stage1": {k: int(s1[k]) for k in ("tp", "fp", "fn")},
        "group_activity": {"scored": int(ga["scored"]), "correct": int(ga["correct"])} if ga else None,
        "group_detection": {k: int(gd["overall"][k]) for k in ("tp", "fp", "fn")} if gd else None,
        "note": rep.notes[-1] if match_boxes is not None and rep.notes else None,
    }


def pool(reports: Sequence[EvalReport]) -> EvalReport:
    """One report over several sources: counts summed, latency weighted by frames.

    Raises:
        InputError: no reports, or reports of different label sets / models / precisions.
    """
    if not reports:
        raise InputError("pool(): expected at least one report")
    first = reports[0]
    for r in reports[1:]:
        if (r.labels, r.model, r.precision) != (first.labels, first.model, first.precision):
            raise InputError(
                f"pool(): reports of different models, precisions or label sets ({first.model} "
                f"{first.precision} {first.labels} vs {r.model} {r.precision} {r.labels}); pool each model "
                "separately"
            )
    frames = sum(r.frames for r in reports)

    def add(attr: str) -> dict[str, int] | None:
        parts = [getattr(r, attr) for r in reports if getattr(r, attr)]
        return {k: sum(p[k] for p in parts) for k in parts[0]} if parts else None

    latency = {
        s: sum(r.latency_ms.get(s, 0.0) * r.frames for r in reports) / max(frames, 1)
        for s in first.latency_ms
    }
    return EvalReport(
        model=first.model,
        precision=first.precision,
        backend=first.backend,
        flow=first.flow,
        labels=first.labels,
        sources=tuple(s for r in reports for s in r.sources),
        frames=frames,
        pairs=sum(r.pairs for r in reports),
        confusion=sum((r.confusion for r in reports), np.zeros_like(first.confusion)),
        missing=sum((r.missing for r in reports), np.zeros_like(first.missing)),
        stage1=add("stage1") or {"tp": 0, "fp": 0, "fn": 0},
        group_activity=add("group_activity"),
        group_detection=add("group_detection"),
        latency_ms=latency,
        has_truth=any(r.has_truth for r in reports),
        notes=tuple(n for r in reports for n in r.notes),
        per_source=tuple(
            {"source": ", ".join(r.sources), "frames": r.frames, **_json_floats(r.summary())} for r in reports
        ),
    )
