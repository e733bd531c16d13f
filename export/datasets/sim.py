"""Simulator scenes -> per-pair feature arrays, with the same flow backend and scale the runtime uses.

Each ``(preset, seed)`` scene is rendered, its optical flow computed with the spec's flow backend
(``liang2026``: Farneback at full resolution; ``pairedge``: DIS at half resolution) and every frame is fed to
a fresh feature extractor in order. Rows of every ``stride``-th frame are kept for the pairs whose two track
ids match a ground-truth pair (with ``boxes="detections"``, detector noise and identity switches are part of
the data, as on a robot). Tasks:

- ``stage1``: stage-1 features, label 1 for the "together" SIM7 classes (= :data:`PAPER3`), else 0.
- ``paper3``: stage-2 features of the together pairs only, labels :data:`PAPER3`.
- ``sim7``: stage-2 features of every pair, labels :data:`SIM7`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pairedge.core import limits
from pairedge.core.errors import InputError
from pairedge.core.features import spec_layout
from pairedge.core.io.featurefile import FeatureData
from pairedge.core.labels import PAPER3, SIM7, STAGE1
from pairedge.core.seeds import parse_seeds
from pairedge.measure.sim import simulate
from pairedge.runtime.flow import FlowStream, get_flow_backend

TASKS = ("stage1", "paper3", "sim7")
_KEY = np.int64(1) << np.int64(31)


@dataclass(frozen=True)
class SimDataset:
    """Which scenes and how to turn them into rows.

    Attributes:
        presets: simulator presets (``static``, ``moving``, ...).
        seeds: scene seeds per preset (held-out evaluation seeds must not appear in training).
        frames: frames per scene.
        stride: keep every ``stride``-th frame's rows (features use every frame).
        boxes: ``"detections"`` (simulated detector + tracker) or ``"truth"`` (exact boxes).
        task: one of :data:`TASKS`.
        feature_config: extractor options (stored in the model metadata).
        spec_version: build the layout of this version of the feature spec (None: the current one), e.g.
            to score an older model folder on the same scenes.
    """

    presets: tuple[str, ...] = ("static", "moving")
    seeds: tuple[int, ...] = tuple(range(8))
    frames: int = 300
    stride: int = 3
    boxes: str = "detections"
    task: str = "paper3"
    feature_config: Mapping[str, Any] = field(default_factory=dict)
    spec_version: str | None = None

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise InputError(f"simulator dataset: task must be one of {TASKS}, got {self.task!r}")
        if self.boxes not in ("detections", "truth"):
            raise InputError(f"simulator dataset: boxes must be 'detections' or 'truth', got {self.boxes!r}")
        if self.frames < 2 or self.stride < 1 or not self.presets or not self.seeds:
            raise InputError(
                "simulator dataset: expected frames >= 2, stride >= 1 and some presets and seeds"
            )

        # every scene is rendered: the work is bounded before any of it (SPEC 9)
        limits.check_sim_work(len(self.presets) * len(self.seeds), self.frames, "simulator dataset")


def _pair_keys(pairs: np.ndarray) -> np.ndarray:
    """(M,) int64 keys of (M, 2) track-id pairs ``a < b``."""
    return pairs[:, 0].astype(np.int64) * _KEY + pairs[:, 1].astype(np.int64)


def match_labels(pairs: np.ndarray, truth_pairs: np.ndarray, truth_labels: np.ndarray) -> np.ndarray:
    """SIM7 label of each pair (M, 2) by track ids in the truth pairs; -1 where the pair is not a true
    pair."""
    if not len(pairs) or not len(truth_pairs):
        return np.full(len(pairs), -1, np.int64)
    keys = _pair_keys(truth_pairs)
    order = np.argsort(keys)
    sorted_keys = keys[order]
    query = _pair_keys(pairs)
    pos = np.clip(np.searchsorted(sorted_keys, query), 0, len(sorted_keys) - 1)
    hit = sorted_keys[pos] == query
    return np.where(hit, truth_labels[order][pos], -1).astype(np.int64)


def scene_rows(
    spec: str, preset: str, seed: int, ds: SimDataset
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``(stage-1 (M, F1), stage-2 (M, F2) float32, SIM7 labels (M,) int64)`` of one scene's kept frames."""

    spec_obj = spec_layout(spec, ds.spec_version)
    extractor = spec_obj.make_extractor(dict(ds.feature_config))
    stream = FlowStream(get_flow_backend(spec_obj.flow_backend, scale=spec_obj.default_flow_scale))
    for frame in simulate(preset, seed=seed, frames=ds.frames):
        flow = stream.push(frame.image)
        detections = frame.detections if ds.boxes == "detections" else frame.truth
        size = (int(frame.image.shape[1]), int(frame.image.shape[0]))
        feats = extractor.step(detections, frame.timestamp, size, flow, stream.scale)
        if frame.index % ds.stride or not len(feats):
            continue
        labels = match_labels(feats.pairs, frame.pairs, frame.pair_labels)
        keep = labels >= 0
        yield feats.stage1[keep], feats.stage2[keep], labels[keep]


def sim_feature_sets(
    spec: str, ds: SimDataset, tasks: tuple[str, ...] | None = None
) -> dict[str, FeatureData]:
    """Rows of several tasks from one pass over the scenes; ``groups`` = ``"<preset>-<seed>"``."""
    tasks = tasks or (ds.task,)
    blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    groups = []
    for preset in ds.presets:
        for seed in ds.seeds:
            for rows in scene_rows(spec, preset, seed, ds):
                blocks.append(rows)
                groups.append(np.full(len(rows[2]), f"{preset}-{seed}"))
    if not blocks:
        raise InputError(f"no labelled pairs in simulator scenes {ds.presets} x seeds {ds.seeds}")
    x1, x2, y = (np.concatenate([b[i] for b in blocks]) for i in range(3))
    g = np.concatenate(groups)
    return {task: _task_rows(spec, ds, task, x1, x2, y, g) for task in tasks}


def _task_rows(
    spec: str, ds: SimDataset, task: str, x1: np.ndarray, x2: np.ndarray, y: np.ndarray, g: np.ndarray
) -> FeatureData:

    spec_obj = spec_layout(spec, ds.spec_version)
    together = y < len(PAPER3)
    X = x1 if task == "stage1" else x2
    if task == "stage1":
        y, labels, label_set = together.astype(np.int64), STAGE1.classes, STAGE1.name
    elif task == "paper3":
        X, y, g, labels, label_set = X[together], y[together], g[together], PAPER3.classes, PAPER3.name
    elif task == "sim7":
        labels, label_set = SIM7.classes, SIM7.name
    else:
        raise InputError(f"simulator dataset: task must be one of {TASKS}, got {task!r}")
    if not len(y):
        raise InputError(
            f"no {task} rows in simulator scenes {ds.presets} x seeds {ds.seeds}; add seeds/frames"
        )
    return FeatureData.from_arrays(
        X,
        y,
        g,
        labels,
        feature_spec=spec,
        feature_spec_version=str(spec_obj.version),
        feature_names=spec_obj.stage1_names if task == "stage1" else spec_obj.stage2_names,
        stage=1 if task == "stage1" else 2,
        label_set=label_set,
        feature_config=json.dumps(dict(ds.feature_config), sort_keys=True),
    )


def sim_features(spec: str, ds: SimDataset | None = None) -> FeatureData:
    """Build training arrays of ``ds.task`` from simulator scenes; ``groups`` = ``"<preset>-<seed>"``."""
    ds = ds or SimDataset()
    return sim_feature_sets(spec, ds)[ds.task]


def recipe_feature_sets(
    recipe: Mapping[str, Any], seeds: str, presets: list[str], tasks: tuple[str, ...]
) -> dict[str, FeatureData]:
    """The rows of ``tasks`` for ``presets`` x ``seeds`` (a seed range text) in one pass over the scenes,
    with a recipe's scene settings (``spec``, ``frames``, ``stride``, ``boxes``, ``feature_config``): what
    the bundled model's recipe and its QAT step both train on."""
    ds = SimDataset(
        presets=tuple(presets),
        seeds=parse_seeds(seeds),
        frames=int(recipe["frames"]),
        stride=int(recipe["stride"]),
        boxes=str(recipe["boxes"]),
        task="stage1",
        feature_config=dict(recipe["feature_config"]),
    )
    return sim_feature_sets(str(recipe["spec"]), ds, tasks)
