"""``pairedge train --data SOURCE``: a features file, a Collective Activity folder, or simulator scenes.

SOURCE is one of

- ``path/to/features.npz`` (the features format, docs/formats.md);
- a folder with Collective Activity ``annoNN.mat`` files (box-only features, CAD8 labels at stage 2);
- ``sim:PRESET[+PRESET...][:seeds=A-B][:frames=N][:stride=S][:boxes=truth|detections]`` (simulator scenes,
  e.g. ``sim:static+moving:seeds=0-11:frames=300``); stage 2 uses the paper's 3 classes unless
  ``labels="sim7"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from pairedge.core import limits
from pairedge.core.errors import InputError
from pairedge.core.io.cad import read_cad_dir
from pairedge.core.io.featurefile import FeatureData, load_npz
from pairedge.core.seeds import parse_seeds
from pairedge.export.datasets.cad import cad_features
from pairedge.export.datasets.cad_context import AUGMENTATIONS
from pairedge.export.datasets.sim import SimDataset, sim_features
from pairedge.measure.sim import get_preset

SIM_PREFIX = "sim:"


@dataclass(frozen=True)
class SimScenes:
    """What a ``sim:...`` source asks for, checked: presets, seeds, frames per scene, stride and boxes."""

    presets: tuple[str, ...]
    seeds: tuple[int, ...]
    frames: int
    stride: int
    boxes: str


def parse_sim_scenes(source: str, frames: int | None = None, min_frames: int = 1) -> SimScenes:
    """The scenes of a ``sim:...`` source, bounded before anything is rendered.

    Args:
        source: ``sim:PRESET[+PRESET...][:seeds=A-B][:frames=N][:stride=S][:boxes=...]``.
        frames: frames per scene overriding the text's ``frames=`` (e.g. ``pairedge eval --frames``).
        min_frames: the fewest frames per scene the caller can use (training needs 2).

    Raises:
        InputError: unknown option, bad number, too few frames, or more work (presets x seeds scenes of
            ``frames`` each) than :func:`pairedge.core.limits.check_sim_work` allows.
    """

    parts = source[len(SIM_PREFIX) :].split(":")
    presets = tuple(p for p in parts[0].split("+") if p)
    options: dict[str, str] = {}
    for part in parts[1:]:
        key, sep, value = part.partition("=")
        if not sep or key not in ("seeds", "frames", "stride", "boxes"):
            raise InputError(
                f"{source!r}: expected options seeds=A-B, frames=N, stride=S, boxes=truth|detections, got "
                f"{part!r}"
            )
        options[key] = value
    seeds = parse_seeds(options.get("seeds", "0-7"))
    try:
        count = int(options.get("frames", 300)) if frames is None else int(frames)
        stride = int(options.get("stride", 3))
    except ValueError as exc:
        raise InputError(f"{source!r}: {exc}") from None
    if count < min_frames:
        raise InputError(f"{source!r}: {count} frames per scene; expected at least {min_frames}")
    boxes = options.get("boxes", "detections")
    if boxes not in ("detections", "truth") or stride < 1 or not presets:
        raise InputError(f"{source!r}: expected a preset, boxes=truth|detections and stride >= 1")
    limits.check_sim_work(len(presets) * len(seeds), count, f"--data {source}")
    return SimScenes(presets, seeds, count, stride, boxes)


def parse_sim_source(
    source: str, stage: int, labels: str | None = None, frames: int | None = None
) -> SimDataset:
    """The :class:`~pairedge.export.datasets.sim.SimDataset` described by a ``sim:...`` source (see
    :func:`parse_sim_scenes`; at least 2 frames per scene)."""
    if labels not in (None, "paper3", "sim7", "stage1"):
        raise InputError(f"simulator data: labels must be paper3 or sim7 at stage 2, got {labels!r}")
    task = "stage1" if stage == 1 else (labels or "paper3")
    sc = parse_sim_scenes(source, frames, min_frames=2)
    try:
        return SimDataset(
            presets=sc.presets, seeds=sc.seeds, frames=sc.frames, stride=sc.stride, boxes=sc.boxes, task=task
        )
    except InputError as exc:
        raise InputError(f"{source!r}: {exc}") from None


def load_source(
    source: str, *, spec: str, stage: int, labels: str | None = None, spec_version: str | None = None
) -> FeatureData:
    """Training rows from a SOURCE (see the module docstring); ``spec_version``: build the layout of that
    version of ``spec`` (None: the current one; a features file keeps the version it was built with)."""
    return load_with_copies(source, spec=spec, stage=stage, labels=labels, spec_version=spec_version)[0]


def load_with_copies(
    source: str,
    *,
    spec: str,
    stage: int,
    labels: str | None = None,
    spec_version: str | None = None,
    augment: tuple[str, ...] = (),
    orientation: bool = True,
    feature_config: Mapping[str, Any] | None = None,
) -> tuple[FeatureData, list[FeatureData]]:
    """The rows of SOURCE (as :func:`load_source`) and, for each name in ``augment``
    (:data:`pairedge.export.datasets.cad_context.AUGMENTATIONS`), the rows of a label-preserving copy of every
    sequence (same group ids). Only a Collective Activity folder has sequences to copy. ``orientation``
    False: leave the Collective Activity annotated body orientation out (boxes and tracks only).
    ``feature_config``: extractor options (e.g. ``{"history": 30}``) for the sources whose features are
    computed here (a Collective Activity folder, simulator scenes; stored in the rows' metadata); a features
    file has its features already and is refused with them."""
    path = Path(source)
    is_cad = not source.startswith(SIM_PREFIX) and path.is_dir()

    if feature_config and not (is_cad or source.startswith(SIM_PREFIX)):
        raise InputError(
            f"feature options {dict(feature_config)} apply to a Collective Activity folder or simulator "
            f"scenes; {source!r} is a features file, whose features are computed already"
        )

    if not orientation and not is_cad:
        raise InputError(
            f"leaving the annotated orientation out applies to a Collective Activity folder; {source!r} is "
            "not one (simulator rows and features files have their layout already)"
        )
    if augment:
        unknown = [a for a in augment if a not in AUGMENTATIONS]
        if unknown:
            raise InputError(f"unknown augmentation {unknown[0]!r}; expected some of {sorted(AUGMENTATIONS)}")
        if not is_cad:
            raise InputError(
                "augmentation needs a Collective Activity folder (its sequences are mirrored / reversed "
                f"before the features are computed); {source!r} is not one"
            )
    if source.startswith(SIM_PREFIX):
        from dataclasses import replace

        ds = replace(
            parse_sim_source(source, stage, labels),
            spec_version=spec_version,
            feature_config=dict(feature_config or {}),
        )
        for preset in ds.presets:
            get_preset(preset)  # unknown preset -> InputError before any rendering
        return sim_features(spec, ds), []
    if is_cad:
        if labels not in (None, "cad8"):
            raise InputError(f"Collective Activity data has the cad8 labels, got --labels {labels}")
        sequences = read_cad_dir(path)
        build = partial(
            cad_features,
            spec=spec,
            stage=stage,
            spec_version=spec_version,
            orientation=orientation,
            feature_config=feature_config,
        )
        rows = build(sequences)
        if not augment:
            return rows, []
        copies = [build([AUGMENTATIONS[a](q) for q in sequences]) for a in augment]
        return rows, copies
    return load_npz(path), []
