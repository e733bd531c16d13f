"""Collect calibration samples through the model's own runtime pipeline (feature spec, flow backend, gate).

Three sources, one result (:class:`Collected`: stage-1 and stage-2 :class:`StageSamples`):

- simulator scenes (``static:0-3,moving:0-3``): rendered frames through :class:`pairedge.runtime.Pipeline`,
  with the simulator's pair truth;
- a video (or image folder) with a detection file, read by the same readers as ``pairedge run``;
- features ``.npz`` files in the training format (one stage each, ``pairedge.core.io.featurefile``).

Frames go through the fp32 pipeline exactly as at run time; the features each frame produced are recorded
by the pipeline's feature observer (:meth:`~pairedge.runtime.Pipeline.observe_features`; no second feature
implementation). Stage-1 rows are every scored
pair; stage-2 rows are the pairs the stage-1 gate passed plus the truth-labelled pairs. The class of a row
is its truth where known, else the fp32 model's prediction (filled in by :func:`fill_predictions`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.calibration.samples import StageSamples, motion_of
from pairedge.core import limits
from pairedge.core.errors import InputError
from pairedge.core.io.cad import read_cad_dir, read_cad_mat
from pairedge.core.io.featurefile import load_npz
from pairedge.core.labels import CAD8, CAD_TOGETHER, PAPER3, SIM7
from pairedge.core.seeds import parse_seeds
from pairedge.measure.sim import get_preset, simulate
from pairedge.runtime import Deployment
from pairedge.runtime.observers import LastFeatures
from pairedge.runtime.runner.inputs import FrameSource, read_detections
from pairedge.runtime.runner.run import file_items

#: One frame for :func:`collect_frames`: image (or None), detections, timestamp, and the truth of the
#: frame's pairs as ``(pairs (M, 2) int64, label names (M,))`` or None.
FrameItem = tuple[np.ndarray | None, Any, float, tuple[np.ndarray, Sequence[str]] | None]


@dataclass(frozen=True)
class Collected:
    """Samples of both stages and where they came from."""

    stage1: StageSamples
    stage2: StageSamples
    sources: tuple[str, ...]


def parse_scenes(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """``"static:0-3,moving:0-3"`` -> [("static", (0, 1, 2, 3)), ("moving", (0, 1, 2, 3))].

    Seeds after a preset are ranges or single seeds separated by ``+`` or ``,``: ``static:0-3+7``.
    """

    out: list[tuple[str, tuple[int, ...]]] = []
    preset: str | None = None
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if ":" in part:
            preset, _, seeds = part.partition(":")
            get_preset(preset)  # unknown preset -> InputError naming the known ones
            out.append((preset, parse_seeds(seeds.replace("+", ","))))
        elif preset is not None:  # "static:0-1,5" continues the previous preset
            out[-1] = (preset, out[-1][1] + parse_seeds(part))
        else:
            raise InputError(
                f"--scenes: expected PRESET:SEEDS[,PRESET:SEEDS...] e.g. 'static:0-3', got {text!r}"
            )
    if not out:
        raise InputError(f"--scenes: expected PRESET:SEEDS e.g. 'static:0-3,moving:0-3', got {text!r}")
    return out


def _empty(stage: int, width: int, labels: tuple[str, ...]) -> StageSamples:
    return StageSamples(
        stage,
        np.zeros((0, width), np.float32),
        np.zeros(0, np.int64),
        np.zeros(0, np.int64),
        np.zeros(0, np.float32),
        np.zeros(0, str),
        labels,
    )


def collect_frames(
    pipe: Any,
    items: Iterable[FrameItem],
    group: str,
    stride: int = 3,
    *,
    image_size: tuple[int, int] | None = None,
    positive: frozenset[str] | None = None,
) -> Collected:
    """Step ``pipe`` (a fresh :class:`~pairedge.runtime.Pipeline`) over ``items``; keep every ``stride``-th
    frame.

    Returns stage-1 rows (every scored pair) and stage-2 rows (gated pairs plus pairs with a truth label
    in the model's stage-2 labels). ``cls`` is -1 where the truth is unknown (see :func:`fill_predictions`).

    Args:
        image_size: ``(W, H)`` of box-only items (images None), e.g. Collective Activity sequences.
        positive: truth label names that are stage-1 positives (default: the paper's 3 "together" labels).
    """
    spec = pipe.models.spec
    labels2 = tuple(pipe.models.stage2.labels)
    labels1 = tuple(pipe.models.stage1.labels)
    positive = positive if positive is not None else _stage1_positive_names()
    seen = LastFeatures()
    rows1: list[tuple[np.ndarray, ...]] = []
    rows2: list[tuple[np.ndarray, ...]] = []
    with pipe.observe_features(seen):
        for k, (image, dets, timestamp, truth) in enumerate(items):
            seen.clear()
            result = pipe.step(image, dets, timestamp, image_size=image_size)
            feats = seen.features  # finite rows only: the pipeline drops the others before classifying
            if k % stride or feats is None or not len(result.pairs):
                continue
            if len(feats) != len(result.pairs) or not np.array_equal(feats.pairs, result.pairs):
                continue  # the classifiers dropped pairs whose logits were not finite
            x1, x2 = feats.stage1, feats.stage2
            motion = motion_of(x2, spec.stage2_names, 2)
            if np.isnan(motion).all():
                motion = motion_of(x1, spec.stage1_names, 1)
            names = _truth_names(result.pairs, truth)
            t1 = np.array([(1 if n in positive else 0) if n else -1 for n in names], np.int64)
            t2 = np.array([labels2.index(n) if n in labels2 else -1 for n in names], np.int64)
            rows1.append((x1, t1, motion))
            keep = result.interacting | (t2 >= 0)
            rows2.append((x2[keep], t2[keep], motion[keep], np.asarray(result.interacting, bool)[keep]))
    return Collected(
        _stack(1, rows1, spec.stage1_dim, labels1, group),
        _stack(2, rows2, spec.stage2_dim, labels2, group),
        (group,),
    )


def _stage1_positive_names() -> frozenset[str]:

    return frozenset(PAPER3.classes)


def _truth_names(pairs: np.ndarray, truth: tuple[np.ndarray, Sequence[str]] | None) -> list[str]:
    """Truth label name of each pair (M, 2) by track ids; "" where unknown."""
    if truth is None or not len(truth[0]):
        return [""] * len(pairs)
    lookup = {(int(a), int(b)): str(n) for (a, b), n in zip(truth[0].tolist(), truth[1], strict=True)}
    return [lookup.get((int(a), int(b)), "") for a, b in pairs.tolist()]


def _stack(
    stage: int,
    rows: list[tuple[np.ndarray, ...]],
    width: int,
    labels: tuple[str, ...],
    group: str,
) -> StageSamples:
    """Rows ``(X, truth, motion[, gated])`` of several frames as one :class:`StageSamples`."""
    if not rows or not sum(len(r[0]) for r in rows):
        empty = _empty(stage, width, labels)
        return replace(empty, gated=np.zeros(0, bool)) if stage == 2 else empty
    X = np.concatenate([r[0] for r in rows]).astype(np.float32)
    truth = np.concatenate([r[1] for r in rows])
    return StageSamples(
        stage,
        X,
        truth.copy(),
        truth,
        np.concatenate([r[2] for r in rows]).astype(np.float32),
        np.full(len(X), group),
        labels,
        np.concatenate([r[3] for r in rows]).astype(bool) if len(rows[0]) > 3 else None,
    )


def collect_scenes(
    model: str | Path,
    scenes: Sequence[tuple[str, Sequence[int]]],
    *,
    frames: int = 300,
    stride: int = 3,
    boxes: str = "detections",
    on_scene: Callable[[str], None] | None = None,
) -> Collected:
    """Samples of simulator scenes ``[(preset, seeds), ...]`` through the fp32 pipeline of ``model``.

    ``boxes``: "detections" (the simulated detector and tracker, as on a robot) or "truth".
    """

    if boxes not in ("detections", "truth"):
        raise InputError(f"boxes: expected 'detections' or 'truth', got {boxes!r}")
    if frames < 1 or stride < 1:
        raise InputError(f"frames and stride: expected at least 1, got {frames} and {stride}")
    limits.check_sim_work(sum(len(seeds) for _, seeds in scenes), frames, "scenes x frames")
    parts = []
    for preset, seeds in scenes:
        for seed in seeds:
            group = f"{preset}-{seed}"
            with Deployment(model, backend="onnxruntime").load() as pipe:
                items = (
                    (
                        f.image,
                        f.detections if boxes == "detections" else f.truth,
                        f.timestamp,
                        (f.pairs, [SIM7.classes[i] for i in f.pair_labels.tolist()]),
                    )
                    for f in simulate(preset, seed=int(seed), frames=frames)
                )
                parts.append(collect_frames(pipe, items, group, stride))
            if on_scene is not None:
                on_scene(group)
    return merge(parts)


def collect_video(
    model: str | Path,
    video: str | Path,
    detections: str | Path,
    *,
    stride: int = 3,
    max_frames: int | None = None,
    fps: float | None = None,
) -> Collected:
    """Samples of a video (or image folder) with a MOT / JRDB / CVML detection file (no truth)."""

    dets = read_detections(detections)
    with FrameSource(video, fps) as source, Deployment(model, backend="onnxruntime").load() as pipe:
        items = ((image, d, t, None) for _, image, d, t, *_ in file_items(source, dets, max_frames))
        return collect_frames(pipe, items, Path(video).name, stride)


def collect_cad(model: str | Path, path: str | Path, *, stride: int = 5) -> Collected:
    """Samples of Collective Activity sequences (a folder of ``annoNN.mat`` files, or one) through the fp32
    pipeline of a box-only ``model``: every pair the runtime scores, as it scores them, with the CAD labels
    as truth (:data:`pairedge.core.labels.CAD_TOGETHER` are the stage-1 positives).

    The rows are the features as the runtime computes them (the pipeline's validated stream and its own
    extractor, every scored pair of every ``stride``-th frame), which is what a parity pack of a sequence and
    a robot see; training rows come from the training feature builder instead.
    """

    p = Path(path)
    sequences = read_cad_dir(p) if p.is_dir() else [read_cad_mat(p)]
    parts = []
    for seq in sequences:
        with Deployment(model, backend="onnxruntime", flow="none").load() as pipe:
            items = ((None, dets, t, _cad_truth(seq, frame, CAD8.classes)) for frame, t, dets in seq.frames())
            group = f"cad{seq.sequence or 0:02d}"
            parts.append(
                collect_frames(
                    pipe, items, group, stride, image_size=seq.frame_size, positive=frozenset(CAD_TOGETHER)
                )
            )
    return merge(parts)


def _cad_truth(seq: Any, frame: int, classes: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    pairs, labels = seq.pair_labels(frame)
    return pairs, [classes[int(k)] for k in labels]


def merge(parts: Sequence[Collected]) -> Collected:
    """One :class:`Collected` of several (rows in order)."""
    if not parts:
        raise InputError(
            "no calibration source given: pass --scenes, --video with --detections, or --features"
        )
    return Collected(
        StageSamples.concat([p.stage1 for p in parts]),
        StageSamples.concat([p.stage2 for p in parts]),
        tuple(s for p in parts for s in p.sources),
    )


def collect_npz(paths: Sequence[str | Path], spec: Any, labels: dict[int, tuple[str, ...]]) -> Collected:
    """Samples from features ``.npz`` files (training format); each file holds one stage's rows.

    The stage comes from the file's ``stage`` field, else from its width (``spec.stage1_dim`` /
    ``stage2_dim``). Class names are mapped onto the model's ``labels[stage]`` by name.

    Raises:
        InputError / FormatError: unreadable file, another feature spec, a width or label set that does
            not fit the model.
    """

    widths = {1: spec.stage1_dim, 2: spec.stage2_dim}
    names = {1: spec.stage1_names, 2: spec.stage2_names}
    found: dict[int, list[StageSamples]] = {1: [], 2: []}
    for path in paths:
        data = load_npz(path)
        if data.feature_spec and data.feature_spec != spec.name:
            raise InputError(
                f"{path}: features of spec {data.feature_spec!r}, but the model uses spec {spec.name!r}; "
                "build the features with the model's spec"
            )
        stage = data.stage or next((s for s, w in widths.items() if w == data.num_features), 0)
        if stage not in (1, 2) or data.num_features != widths[stage]:
            raise InputError(
                f"{path}: {data.num_features} feature columns (stage {data.stage or '?'}), but the model's "
                f"stages take {widths[1]} (stage 1) and {widths[2]} (stage 2) columns of spec {spec.name!r}"
            )
        model_labels = labels[stage]
        unknown = [n for n in data.labels if n not in model_labels]
        if unknown:
            raise InputError(
                f"{path}: class names {unknown} are not in the stage-{stage} model's labels "
                f"{list(model_labels)}; this file belongs to a model with another label set"
            )
        mapping = np.array([model_labels.index(n) for n in data.labels], np.int64)
        truth = mapping[data.y]
        found[stage].append(
            StageSamples(
                stage,
                data.X,
                truth.copy(),
                truth,
                motion_of(data.X, names[stage], stage),
                data.groups.astype(str),
                model_labels,
            )
        )
    parts = {
        s: StageSamples.concat(found[s]) if found[s] else _empty(s, widths[s], labels[s]) for s in (1, 2)
    }
    return Collected(parts[1], parts[2], tuple(str(p) for p in paths))
