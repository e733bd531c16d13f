"""``pairedge demo``: simulate a short scene in memory, run the bundled model through the streaming runtime
(ONNX Runtime, CPU), score it against the simulator's ground truth and write the annotated video.

The default scene is **held out**: seed :data:`DEMO_SEED` of the ``static`` preset, the first of the bundled
model's test seeds (:data:`pairedge.core.bundled.RECIPE`: it trained on seeds 0-11 of ``static`` /
``moving`` / ``noisy``, chose its link confirmation time on seeds 2000-2003 and is evaluated on 1000-1007).
Every output names the scene, its seed, the box source (ground truth or the simulated detector) and, for
the bundled model, the scene's role in its recipe (:func:`scene_role`: a training scene scores
optimistically).

Nothing is downloaded and no GPU or torch is needed. The simulator's pair labels (SIM7) are mapped onto the
model's labels: for the paper's three classes (the bundled model), the "together" pairs keep their label
(walking / standing / sitting together) and every other pair is a stage-1 negative — the same ground truth as
``pairs_gt_paper3.jsonl`` of ``pairedge simulate``. Scoring uses :mod:`pairedge.measure.metrics.pairwise`.

Outputs in the chosen folder (:data:`DEMO_OUTPUTS`): ``demo.mp4`` (annotated; ``.avi`` without the mp4 codec;
neither with ``video=False``), ``results.jsonl`` (the runtime's JSON Lines), ``pairs_gt.jsonl`` (SIM7 ground
truth), ``pairs_gt_paper3.jsonl`` (PAPER3 ground truth), ``metrics.json`` (the pairwise report; not for a
model whose labels are neither), ``summary.json`` (the run summary). Those of an earlier demo in the same
folder are removed first, and the notes name the ones this run did not write again; no other file is touched.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.bundled import RECIPE, describe_model, is_bundled
from pairedge.core.errors import InputError
from pairedge.core.labels import PAPER3, SIM7
from pairedge.core.seeds import parse_seeds
from pairedge.measure.metrics.pairwise import score_files
from pairedge.measure.metrics.result import ScoreReport
from pairedge.measure.sim import Scene
from pairedge.measure.sim.output import pairs_record
from pairedge.runtime import FlowConfig, PipelineConfig
from pairedge.runtime.deployment import Deployment
from pairedge.runtime.runner.output import JsonlWriter
from pairedge.runtime.runner.run import (
    open_video_writer,
    pipeline_notes,
    remove_stale_outputs,
    run_stream,
    stale_note,
)

TOGETHER = frozenset(PAPER3.classes)
#: The default demo scene: seed 1000 of ``static``, the first test seed of the bundled model's recipe (held
#: out).
DEMO_SEED = 1000
#: How the outputs name each box source.
BOX_SOURCES = {
    "truth": "ground-truth boxes (exact visible boxes and ids)",
    "detections": "simulated detector + tracker (jitter, missed occluded people, identity switches)",
}
#: The files :func:`run_demo` writes (the only ones it removes from a folder an earlier demo used).
DEMO_OUTPUTS = (
    "demo.mp4",
    "demo.avi",
    "results.jsonl",
    "pairs_gt.jsonl",
    "pairs_gt_paper3.jsonl",
    "metrics.json",
    "summary.json",
)


@dataclass(frozen=True)
class DemoOptions:
    """What the demo simulates and runs.

    Attributes:
        preset: simulator preset (``static``, ``moving``, ``noisy``, ``panorama``, ``crowd``).
        seed: scene seed (same seed, same scene); default :data:`DEMO_SEED`, held out from the bundled model.
        frames: number of frames.
        boxes: ``"truth"`` (exact visible boxes and ids, as the paper evaluates on ground-truth tracks) or
            ``"detections"`` (the simulated detector and tracker: jitter, misses of occluded people, identity
            switches; pairs of people the detector misses count as missed, so every metric drops).
        deployment: what runs: by default the bundled model at fp32 on ONNX Runtime CPU with the model's own
            flow backend (the demo promises a CPU run).
        video: write the annotated video.
        examples: how many frames' interactions to keep for printing.
        flow: the flow settings (DIS preset, scale).
    """

    preset: str = "static"
    seed: int = DEMO_SEED
    frames: int = 150
    boxes: str = "truth"
    deployment: Deployment = field(default_factory=lambda: cpu_deployment())
    video: bool = True
    examples: int = 3
    flow: FlowConfig = field(default_factory=FlowConfig)

    def __post_init__(self) -> None:
        if self.boxes not in ("detections", "truth"):
            raise InputError(f"demo boxes: expected 'detections' or 'truth', got {self.boxes!r}")
        if self.frames < 2:
            raise InputError(f"demo frames: expected at least 2, got {self.frames}")


def cpu_deployment(model: str | Path | None = None) -> Deployment:
    """``model`` (None: the bundled one) at fp32 on ONNX Runtime CPU with the model's own flow backend: what
    the demo runs."""
    return Deployment(model, backend="onnxruntime")


@dataclass(frozen=True)
class SceneInfo:
    """Which scene the demo scored, with which boxes, and what the scene was to the model.

    Attributes:
        preset, seed, frames: the simulated scene. boxes: ``"truth"`` or ``"detections"``.
        role: ``"training"``, ``"validation"``, ``"test"`` (a test seed of the recipe), ``"unused"`` (in no
            seed set of the recipe: held out too) or ``"unknown"`` (not the bundled model: the demo cannot
            tell). role_text: the same in words.
    """

    preset: str
    seed: int
    frames: int
    boxes: str
    role: str
    role_text: str

    @property
    def held_out(self) -> bool:
        """The model never trained on this scene nor chose a setting on it."""
        return self.role in ("test", "unused")

    def line(self) -> str:
        """One line for the terminal and the notes."""
        return (
            f"scene: simulator preset {self.preset}, seed {self.seed}, {self.frames} frames; "
            f"{BOX_SOURCES[self.boxes]}; {self.role_text}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "preset": self.preset,
            "seed": self.seed,
            "frames": self.frames,
            "boxes": self.boxes,
            "box_source": BOX_SOURCES[self.boxes],
            "role": self.role,
            "held_out": self.held_out,
            "role_text": self.role_text,
        }


def scene_role(preset: str, seed: int, recipe: Mapping[str, Any]) -> tuple[str, str]:
    """What scene ``preset`` / ``seed`` was to a model trained by ``recipe`` (the bundled model's
    :data:`pairedge.core.bundled.RECIPE` layout): ``(role, text)`` as :class:`SceneInfo` describes them."""

    families = {str(p): (str(recipe["train_seeds"]), str(recipe["test_seeds"])) for p in recipe["presets"]}
    for extra in recipe.get("extra_presets", ()):
        families[str(extra["preset"])] = (str(extra["train_seeds"]), str(extra["test_seeds"]))
    if preset not in families:
        return "unused", f"held out: the bundled model never trained on the {preset} preset"
    train, test = families[preset]
    validation = str(recipe.get("confirm", {}).get("seeds", ""))
    if seed in parse_seeds(train):
        return "training", (
            f"a TRAINING scene of the bundled model ({preset} seeds {train}): these metrics are "
            f"optimistic; its test seeds are {test}"
        )
    if validation and seed in parse_seeds(validation):
        return "validation", (
            f"a validation scene of the bundled model (its link confirmation time was chosen on "
            f"seeds {validation}; it trained on {train})"
        )
    if seed in parse_seeds(test):
        return (
            "test",
            f"held out: a test seed of the bundled model ({preset} test seeds {test}; trained on {train})",
        )
    return "unused", f"held out: not among the bundled model's {preset} training seeds {train}"


def scene_info(options: DemoOptions, model: Path) -> SceneInfo:
    """The :class:`SceneInfo` of the demo's scene for ``model`` (the scene's role is known for the bundled
    model only)."""

    if is_bundled(model):
        role, text = scene_role(options.preset, options.seed, RECIPE)
    else:
        role, text = (
            "unknown",
            "a model folder of your own: whether it trained on this scene is not known here",
        )
    return SceneInfo(options.preset, options.seed, options.frames, options.boxes, role, text)


@dataclass(frozen=True)
class FrameExample:
    """The interactions and groups of one frame, for printing.

    Attributes:
        frame: frame index. interactions: ``(id_a, id_b, label, p_interact)``.
        groups: ``(members, activity)`` (activity None: no activity). truth: the true together pairs ``(id_a,
            id_b, label)``.
    """

    frame: int
    interactions: tuple[tuple[int, int, str, float], ...]
    groups: tuple[tuple[tuple[int, ...], str | None], ...]
    truth: tuple[tuple[int, int, str], ...]


@dataclass(frozen=True)
class DemoResult:
    """What :func:`run_demo` produced.

    Attributes:
        scene: which scene and boxes were scored (:class:`SceneInfo`).
        summary: the run summary (:class:`pairedge.runtime.runner.run.RunSummary`).
        report: pairwise metrics against the simulator's ground truth, or None (labels the simulator cannot
            map, see ``notes``).
        passed_accuracy: stage-2 accuracy over the true pairs stage 1 passed (NaN when none).
        examples: a few frames' interactions.
        files: output name -> path (``gold``: the ground-truth file the metrics used).
        seconds: wall time of the whole demo.
        notes: remarks.
    """

    scene: SceneInfo
    summary: Any
    report: ScoreReport | None
    passed_accuracy: float
    examples: tuple[FrameExample, ...]
    files: dict[str, str]
    seconds: float
    notes: tuple[str, ...] = field(default_factory=tuple)


_GOLD_FILES = {"paper3": "pairs_gt_paper3.jsonl", "sim7": "pairs_gt.jsonl"}


def _gold_labels(labels: tuple[str, ...]) -> str | None:
    """Which ground-truth file matches the model's labels: "paper3", "sim7" or None."""
    if labels == PAPER3.classes:
        return "paper3"
    if labels == SIM7.classes:
        return "sim7"
    return None


class _SceneStream:
    """Simulated frames as runtime input, writing the ground truth files while they stream."""

    def __init__(self, options: DemoOptions, out: Path) -> None:

        self.scene = Scene(options.preset, options.seed)
        self.options = options
        self.sim7 = (out / "pairs_gt.jsonl").open("w", encoding="utf-8")
        self.paper3 = (out / "pairs_gt_paper3.jsonl").open("w", encoding="utf-8")
        self.sim7.write(json.dumps({"labels": list(SIM7.classes)}) + "\n")
        self.paper3.write(json.dumps({"labels": list(PAPER3.classes)}) + "\n")
        self.truth: dict[int, tuple[tuple[int, int, str], ...]] = {}
        self.keep_truth: set[int] = set()

    def __iter__(self) -> Iterator[tuple[int, np.ndarray, Any, float]]:

        for f in self.scene.frames(self.options.frames):
            record = pairs_record(f)
            self.sim7.write(json.dumps(record, separators=(",", ":")) + "\n")
            record["interactions"] = [i for i in record["interactions"] if i["label"] in TOGETHER]
            self.paper3.write(json.dumps(record, separators=(",", ":")) + "\n")
            if f.index in self.keep_truth:
                self.truth[f.index] = tuple((*i["ids"], i["label"]) for i in record["interactions"])
            boxes = f.detections if self.options.boxes == "detections" else f.truth
            yield f.index, f.image, boxes, f.timestamp

    def close(self) -> None:
        self.sim7.close()
        self.paper3.close()


def example_frames(frames: int, count: int) -> list[int]:
    """``count`` frame indices spread over the second half of the scene (smoothing has settled)."""
    if count <= 0:
        return []
    return sorted(set(np.linspace(frames // 2, frames - 1, count).round().astype(int).tolist()))


def run_demo(out: str | Path, options: DemoOptions | None = None, on_frame: Any = None) -> DemoResult:
    """Simulate, run, score and write (see the module docstring).

    Args:
        out: output folder (created).
        options: :class:`DemoOptions`; None for the defaults.
        on_frame: called with each :class:`~pairedge.runtime.types.FrameResult` (progress bars).

    Raises:
        ModelError: the bundled model is missing (or ``options.deployment`` names no valid model folder).
        InputError: bad options (unknown preset, ...).
    """

    start = time.perf_counter()
    options = options or DemoOptions()
    folder = Path(out).expanduser()
    if folder.exists() and not folder.is_dir():
        raise InputError(f"--out: expected a folder, got the existing file {folder}; choose another")
    folder.mkdir(parents=True, exist_ok=True)
    deployment = options.deployment
    scene = scene_info(options, deployment.folder)
    earlier = remove_stale_outputs(folder, DEMO_OUTPUTS, ())
    stream = _SceneStream(options, folder)
    wanted = set(example_frames(options.frames, options.examples))
    stream.keep_truth = wanted
    examples: list[FrameExample] = []

    def collect(result: Any) -> None:
        if result.frame_index in wanted:
            examples.append(_example(result))
        if on_frame is not None:
            on_frame(result)

    stats, labels, describe, files, pipe_notes = _run(deployment, scene, folder, stream, collect)
    notes = [f"boxes: {options.boxes}", *pipe_notes]
    report, passed = _score(folder, labels, notes, scene)
    if report is not None:
        files["metrics"] = str(folder / "metrics.json")
        files["gold"] = str(folder / _GOLD_FILES[_gold_labels(labels) or "paper3"])
    files["summary"] = str(folder / "summary.json")
    written = {Path(p).name for p in files.values()}
    notes += stale_note(folder, [name for name in earlier if name not in written])
    summary = stats.summary(notes=notes, files=files, pipeline=describe)
    (folder / "summary.json").write_text(
        json.dumps({"scene": scene.to_dict(), **summary.to_dict()}, indent=2) + "\n"
    )
    shown = tuple(
        FrameExample(e.frame, e.interactions, e.groups, stream.truth.get(e.frame, ())) for e in examples
    )
    return DemoResult(scene, summary, report, passed, shown, files, time.perf_counter() - start, tuple(notes))


def _run(
    deployment: Deployment, scene: SceneInfo, folder: Path, stream: _SceneStream, collect: Any
) -> tuple[Any, tuple[str, ...], dict[str, Any], dict[str, str], list[str]]:
    """Run the deployment (:attr:`DemoOptions.deployment`) over the scene; (stats, labels, describe, files,
    notes).

    ``notes``: what the pipeline decided a user should know
        (:func:`pairedge.runtime.runner.run.pipeline_notes`:
    an unverified model folder, box shape ignored), as ``pairedge run`` prints them."""

    files = {"results": str(folder / "results.jsonl")}
    options = stream.options
    config = PipelineConfig(flow=options.flow)
    with deployment.load(config) as pipe:
        header = {
            "source": f"simulator preset {scene.preset} seed {scene.seed}",
            "boxes": scene.boxes,
            "scene": scene.to_dict(),
            "model": describe_model(deployment.folder),
            "pipeline": pipe.describe_start(),
        }
        writer = open_video_writer(folder, "demo", stream.scene.fps) if options.video else None
        try:
            with JsonlWriter(folder / "results.jsonl", pipe.labels, header) as jsonl:
                stats = run_stream(pipe, stream, jsonl=jsonl, video=writer, on_result=collect)
        finally:
            stream.close()
            if writer is not None:
                writer.close()
        if writer is not None:
            files["video"] = str(writer.path)
        files["gt_sim7"] = str(folder / "pairs_gt.jsonl")
        files["gt_paper3"] = str(folder / "pairs_gt_paper3.jsonl")
        return stats, pipe.labels, pipe.describe(), files, pipeline_notes(pipe, deployment)


def _score(
    folder: Path, labels: tuple[str, ...], notes: list[str], scene: SceneInfo
) -> tuple[ScoreReport | None, float]:
    """Pairwise report of ``results.jsonl`` against the matching ground truth (written to ``metrics.json``
    with the scene in ``details["scene"]``) and the stage-2 accuracy over the true pairs stage 1 passed."""
    from dataclasses import replace

    gold = _gold_labels(labels)
    if gold is None:
        notes.append(f"model labels {list(labels)} are neither PAPER3 nor SIM7: no metrics")
        return None, float("nan")
    gold_file = folder / _GOLD_FILES[gold]
    report = score_files(folder / "results.jsonl", gold_file)
    report = replace(report, details={"scene": scene.to_dict(), **report.details})
    report.write_json(folder / "metrics.json")
    confusion = np.asarray(report.details["confusion"])
    passed = float(np.trace(confusion) / confusion.sum()) if confusion.sum() else float("nan")
    return report, passed


def _example(result: Any) -> FrameExample:
    inter = tuple((i.ids[0], i.ids[1], i.label, i.p_interact) for i in result.interactions)
    groups = tuple((g.members, g.activity) for g in result.groups)
    return FrameExample(result.frame_index, inter, groups, ())
