"""Accuracy of a model through the streaming runtime on held-out simulator scenes.

Used by ``bench_runtime.py`` (does a more accurate flow change the bundled model's accuracy?) and
``bench_paper_pipeline.py`` (pairedge vs the paper's pipeline). Each scene is simulated in memory, run through
a :class:`~pairedge.runtime.Pipeline` with the given configuration (ground-truth boxes and ids by default),
and all scenes are pooled into one pairwise score (:mod:`pairedge.measure.metrics.pairwise`) against the
simulator's pairs mapped onto the model's labels (PAPER3: the "together" pairs; other pairs are stage-1
negatives).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pairedge.core.labels import PAPER3
from pairedge.measure.metrics.pairwise import score_files
from pairedge.measure.sim import Scene
from pairedge.measure.sim.output import pairs_record
from pairedge.runtime import Deployment, PipelineConfig
from pairedge.runtime.runner.output import JsonlWriter
from pairedge.runtime.runner.run import run_stream

METRICS = (
    "pair_precision",
    "pair_recall",
    "pair_f1",
    "accuracy",
    "mpca",
    "macro_f1",
    "group_activity_accuracy",
)
FRAME_OFFSET = 100_000  # scene i, frame k -> pooled frame i * FRAME_OFFSET + k


def parse_scenes(text: str) -> list[tuple[str, int]]:
    """``"static:1000,moving:1000"`` -> [("static", 1000), ("moving", 1000)]."""
    return [(p, int(s)) for p, s in (item.split(":") for item in text.split(","))]


def _stream(scene: Scene, frames: int, offset: int, boxes: str, gold: list[str]) -> Iterator[tuple]:
    for f in scene.frames(frames):
        record = pairs_record(f)
        record["frame"] = offset + f.index
        record["interactions"] = [i for i in record["interactions"] if i["label"] in PAPER3.classes]
        gold.append(json.dumps(record, separators=(",", ":")))
        yield offset + f.index, f.image, f.truth if boxes == "truth" else f.detections, f.timestamp


def scene_accuracy(
    model: Path,
    scenes: Sequence[tuple[str, int]],
    frames: int,
    config: PipelineConfig | None = None,
    boxes: str = "truth",
    flow: str = "auto",
) -> dict[str, Any]:
    """Pooled pairwise metrics of ``model`` (PAPER3 labels, with flow backend ``flow``) over ``scenes``
    ((preset, seed) pairs)."""
    gold = [json.dumps({"labels": list(PAPER3.classes)})]
    with (
        tempfile.TemporaryDirectory() as tmp,
        Deployment(model, backend="onnxruntime", flow=flow).load(config) as pipe,
    ):
        if pipe.labels != PAPER3.classes:
            raise ValueError(f"{model}: expected PAPER3 labels, got {pipe.labels}")
        describe = pipe.describe()
        pred = Path(tmp) / "pred.jsonl"
        with JsonlWriter(pred, pipe.labels) as jsonl:
            for i, (preset, seed) in enumerate(scenes):
                pipe.reset()
                run_stream(
                    pipe, _stream(Scene(preset, seed), frames, i * FRAME_OFFSET, boxes, gold), jsonl=jsonl
                )
        (Path(tmp) / "gold.jsonl").write_text("\n".join(gold) + "\n")
        report = score_files(pred, Path(tmp) / "gold.jsonl")
    return {
        "pipeline": describe,
        "scenes": [f"{p} {s}" for p, s in scenes],
        "frames_per_scene": frames,
        "boxes": boxes,
        "pooled": {m: report.summary[m] for m in METRICS},
        "scored_pairs": report.details["counts"]["scored_pairs"],
    }
