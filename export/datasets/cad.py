"""Collective Activity sequences -> per-pair feature arrays (box-only: CAD has tracks, no video frames).

Every frame of a sequence goes through a fresh feature extractor in time order (so the track history is
complete); the rows of every ``stride``-th frame are kept, for the pairs that carry an interaction label
(both people present). Stage 2 rows are labelled with the 8 CAD interaction classes
(:data:`pairedge.core.labels.CAD8`); stage 1 rows with interacting (the "together" classes in
:data:`pairedge.core.labels.CAD_TOGETHER`) or not.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pairedge.core.errors import InputError
from pairedge.core.features import spec_layout
from pairedge.core.io.cad import CadSequence
from pairedge.core.io.featurefile import FeatureData
from pairedge.core.labels import CAD8, CAD_TOGETHER, STAGE1

#: Box-only extraction (no frames exist in CAD).
BOX_ONLY: dict[str, Any] = {"motion": "boxes"}


def extractor_config(spec: str, feature_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The feature options for box-only data: ``pairedge`` defaults to ``motion="boxes"``."""
    if spec == "liang2026":
        return dict(feature_config or {})
    return {**BOX_ONLY, **(feature_config or {})}


@dataclass(frozen=True)
class PairRows:
    """The labelled pair rows of one sequence, with where they come from (for temporal evaluation).

    Attributes:
        X: (M, F) float32 features. y: (M,) int64 CAD8 labels.
        frame: (M,) int64 1-based frame of each row (non-decreasing).
        pairs: (M, 2) int64 track ids ``(id_a < id_b)`` of each row.
    """

    X: np.ndarray
    y: np.ndarray
    frame: np.ndarray
    pairs: np.ndarray


def sequence_pair_rows(
    seq: CadSequence,
    spec: str,
    stage: int,
    stride: int,
    feature_config: Mapping[str, Any],
    *,
    orientation: bool = True,
    spec_version: str | None = None,
) -> PairRows:
    """Features, labels, frames and pair ids of one sequence's labelled pairs (every ``stride``-th frame).

    ``orientation``: give the extractor the annotated body orientation (False: boxes and tracks only);
    ``spec_version``: build the layout of that version of ``spec`` (None: the current one)."""
    spec_obj = spec_layout(spec, spec_version)
    extractor = spec_obj.make_extractor(dict(feature_config))
    width = spec_obj.stage1_dim if stage == 1 else spec_obj.stage2_dim
    xs: list[np.ndarray] = [np.zeros((0, width), np.float32)]
    ys: list[np.ndarray] = [np.zeros(0, np.int64)]
    fs: list[np.ndarray] = [np.zeros(0, np.int64)]
    ps: list[np.ndarray] = [np.zeros((0, 2), np.int64)]
    for frame, timestamp, detections in seq.frames(orientation):
        feats = extractor.step(detections, timestamp, seq.frame_size)
        if (frame - 1) % stride or not len(feats):
            continue
        labels = seq.labels_for(frame, feats.pairs)
        keep = labels >= 0
        xs.append((feats.stage1 if stage == 1 else feats.stage2)[keep])
        ys.append(labels[keep])
        fs.append(np.full(int(keep.sum()), frame, np.int64))
        ps.append(np.asarray(feats.pairs, np.int64)[keep])
    return PairRows(
        np.concatenate(xs).astype(np.float32), np.concatenate(ys), np.concatenate(fs), np.concatenate(ps)
    )


def sequence_rows(
    seq: CadSequence, spec: str, stage: int, stride: int, feature_config: Mapping[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    """Features (M, F) float32 and CAD8 labels (M,) int64 of one sequence's labelled pairs."""
    rows = sequence_pair_rows(seq, spec, stage, stride, feature_config)
    return rows.X, rows.y


def cad_features(
    sequences: Iterable[CadSequence],
    *,
    spec: str = "pairedge",
    stage: int = 2,
    stride: int = 5,
    feature_config: Mapping[str, Any] | None = None,
    together: Sequence[str] = CAD_TOGETHER,
    orientation: bool = True,
    spec_version: str | None = None,
) -> FeatureData:
    """Build training arrays from CAD sequences.

    Args:
        sequences: from :func:`pairedge.core.io.cad.read_cad_dir` / ``read_cad_mat``.
        spec: feature spec; ``liang2026`` works for stage 1 only (its stage 2 needs optical flow).
        stage: 2 = the 8 CAD classes, 1 = interacting (``together``) or not.
        stride: keep the rows of every ``stride``-th frame (features are still computed on every frame).
        feature_config: extractor options (``pairedge`` defaults to box-only ``{"motion": "boxes"}``).
        together: the CAD classes that are stage-1 positives.
        orientation: give the extractor each person's annotated 8-way body orientation (``attr``; the
            ``pairedge`` spec v2 turns it into orientation features); False = boxes and tracks only.
        spec_version: the layout of this version of ``spec`` (None: the current one).

    Returns:
        :class:`FeatureData` with ``groups`` = ``"cadNN"`` (one sequence per group).
    """

    if stage not in (1, 2) or stride < 1:
        raise InputError(f"expected stage 1 or 2 and stride >= 1, got stage {stage}, stride {stride}")
    if spec == "liang2026" and stage == 2:
        raise InputError(
            "liang2026 stage-2 features need video frames (optical flow); Collective Activity has tracks "
            "only: use --spec pairedge (box-only mode) or stage 1"
        )
    config = extractor_config(spec, feature_config)
    if spec == "pairedge" and not orientation:  # recorded in the model: the runtime ignores orientation too
        config = {**config, "orientation_input": "ignore"}
    spec_obj = spec_layout(spec, spec_version)
    xs, ys, groups = [], [], []
    for seq in sequences:
        rows = sequence_pair_rows(
            seq, spec, stage, stride, config, orientation=orientation, spec_version=spec_obj.version
        )
        X, y = rows.X, rows.y
        xs.append(X)
        ys.append(y)
        groups.append(np.full(len(y), f"cad{seq.sequence or 0:02d}"))
    if not xs or not sum(len(y) for y in ys):
        raise InputError("no labelled pairs in the given CAD sequences")
    y = np.concatenate(ys)
    if stage == 1:
        positive = np.array([CAD8.index(name) for name in together])
        y, labels, label_set = np.isin(y, positive).astype(np.int64), STAGE1.classes, STAGE1.name
    else:
        labels, label_set = CAD8.classes, CAD8.name
    return FeatureData.from_arrays(
        np.concatenate(xs),
        y,
        np.concatenate(groups),
        labels,
        feature_spec=spec,
        feature_spec_version=str(spec_obj.version),
        feature_names=spec_obj.stage1_names if stage == 1 else spec_obj.stage2_names,
        stage=stage,
        label_set=label_set,
        feature_config=json.dumps(config, sort_keys=True),
        person_features=getattr(spec_obj, "person_dim", 0) if stage == 2 else 0,
        pair_features=getattr(spec_obj, "pair_dim", 0) if stage == 2 else 0,
    )
