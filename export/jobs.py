"""End-to-end jobs behind ``pairedge train``: data -> trained checkpoint, report and ONNX in one folder."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.artefacts import artefact
from pairedge.core.errors import InputError
from pairedge.core.features import spec_layout
from pairedge.export.augmented import train_augmented
from pairedge.export.checkpoint import save_checkpoint
from pairedge.export.data import FeatureData
from pairedge.export.onnx_export import ExportResult, export_checkpoint
from pairedge.export.train import TrainConfig, TrainResult, checkpoint_of, train
from pairedge.export.train_report import write_report

SPECS = ("liang2026", "pairedge")


@dataclass(frozen=True)
class TrainOutputs:
    """Files written by :func:`train_to_dir` and the run's result."""

    result: TrainResult
    checkpoint_dir: Path
    report: dict[str, Path]
    export: ExportResult | None


def resolve_data(
    data: FeatureData, spec: str, stage: int | None, spec_version: str | None = None
) -> FeatureData:
    """Check ``data`` against the requested feature spec, version and stage; fill in what the file leaves out.

    ``spec_version`` None: the version the data names, else the one this pairedge makes by default; a version
    this pairedge does not implement, or data of another version than the one requested, is refused.
    """

    if spec not in SPECS:
        raise InputError(f"unknown feature spec {spec!r}; expected one of {list(SPECS)}")
    if data.feature_spec and data.feature_spec != spec:
        raise InputError(
            f"the features file was built with spec {data.feature_spec!r}, but --spec {spec} was given; "
            "rebuild the features or pass the matching --spec"
        )
    spec_obj = spec_layout(spec, spec_version or data.feature_spec_version or None)
    version = str(spec_obj.version)
    if data.feature_spec_version and data.feature_spec_version != version:
        raise InputError(
            f"the features file has spec {spec!r} version {data.feature_spec_version!r}, but version "
            f"{version!r} was asked for; rebuild the features with that version"
        )
    if stage is not None and data.stage and data.stage != stage:
        raise InputError(f"the features file holds stage-{data.stage} data, but --stage {stage} was given")
    chosen = stage or data.stage or (1 if len(data.labels) == 2 else 2)
    width = spec_obj.stage1_dim if chosen == 1 else spec_obj.stage2_dim
    if data.num_features != width:
        raise InputError(
            f"spec {spec!r} v{version} stage {chosen} has {width} features, the file has "
            f"{data.num_features}; rebuild the features for this spec, version and stage"
        )
    fp, fq = data.person_features, data.pair_features
    if chosen == 2 and not fp:
        fp, fq = person_pair_layout(spec_obj.stage2_names)
    return replace(
        data,
        feature_spec=spec,
        feature_spec_version=version,
        stage=chosen,
        person_features=fp,
        pair_features=fq,
    )


def person_pair_layout(names: tuple[str, ...]) -> tuple[int, int]:
    """(Fp, Fq) when ``names`` are laid out as ``a_* (Fp), b_* (Fp), pair_* (Fq)``, else (0, 0)."""
    fp = sum(n.startswith("a_") for n in names)
    fq = len(names) - 2 * fp
    ok = (
        fp > 0
        and all(n.startswith("b_") for n in names[fp : 2 * fp])
        and all(n.startswith("pair_") for n in names[2 * fp :])
    )
    return (fp, fq) if ok else (0, 0)


def train_to_dir(
    data: FeatureData,
    out: str | Path,
    *,
    spec: str,
    stage: int | None = None,
    config: TrainConfig | None = None,
    export: bool = True,
    progress: bool = True,
    val_mask: np.ndarray | None = None,
    title: str | None = None,
    spec_version: str | None = None,
    copies: list[FeatureData] | None = None,
    refit: bool = False,
    extra: dict[str, Any] | None = None,
) -> TrainOutputs:
    """Train on ``data`` and write ``model.pt`` + ``model.json``, ``report.{json,md}``, ``curves.png`` and
    (with ``export``) ``stage{N}.onnx`` into ``out``; ``spec_version`` as in :func:`resolve_data`; ``extra``
    is added to the checkpoint's (and the ONNX file's) ``extra`` metadata.

    ``copies`` (augmented rows of the same sequences) and ``refit`` train with
    :func:`pairedge.export.augmented.train_augmented`: copies of validation sequences are left out while the
    epoch is chosen; ``refit`` retrains on everything for that many epochs."""
    data = resolve_data(data, spec, stage, spec_version)
    if copies or refit:
        copies = [resolve_data(c, spec, data.stage, data.feature_spec_version) for c in copies or []]
        result = train_augmented(
            data,
            copies,
            config or TrainConfig(),
            val_mask=val_mask,
            refit=refit,
            stage=data.stage,
            progress=progress,
        )
    else:
        result = train(data, config, stage=data.stage, val_mask=val_mask, progress=progress)
    out = Path(out)
    ckpt = checkpoint_of(result, data)
    if extra:
        ckpt = replace(ckpt, extra={**ckpt.extra, **extra})
    save_checkpoint(ckpt, out)
    report = write_report(result, out, title or f"{spec} stage {result.stage} training report")
    exported = export_checkpoint(ckpt, out / artefact(result.stage, "fp32").onnx) if export else None
    return TrainOutputs(result=result, checkpoint_dir=out, report=report, export=exported)
