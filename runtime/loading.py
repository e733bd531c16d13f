"""Finding, verifying and checking the two classifiers of a pipeline, and choosing its flow backend.

A model folder (SPEC section 5) holds ``stage{1,2}.onnx`` (fp32) and optionally
``stage{1,2}.{fp16,int8}.onnx``; :func:`find_models` picks the files of the requested precision and, when the
folder has a ``manifest.json``, checks their SHA-256 against it (a mismatch is a
:class:`~pairedge.core.errors.ModelIntegrityError`). A folder without a manifest (exports from before
manifests existed, or two loose files) still loads; the :class:`ModelPair` says ``verified=False`` and its
``integrity`` note says why.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pairedge.core import limits
from pairedge.core.artefacts import artefact, by_role, stage_files
from pairedge.core.errors import FormatError, InputError, ModelError, ModelIntegrityError
from pairedge.core.features import FeatureSpec
from pairedge.core.modelfolder import (
    MANIFEST_NAME,
    inside_folder,
    load_onnx,
    read_manifest,
    sha256_file,
    summary_mismatches,
    verify_files,
)
from pairedge.runtime.backends.model import ModelFile, load_model
from pairedge.runtime.config import PipelineConfig, check_confirm_s
from pairedge.runtime.flow import FlowBackend, flow_backend_class, get_flow_backend

#: The fp32 stage files, named in the messages of a folder that lacks them.
_FP32 = " and ".join(stage_files("fp32"))


@dataclass(frozen=True)
class ModelPair:
    """The stage-1 and stage-2 classifiers of one pipeline, checked to agree with each other.

    Attributes:
        stage1, stage2: the checked model files.
        precision: "fp32", "fp16" or "int8": which files of the model folder these are.
        verified: True when both files matched the SHA-256 recorded in the folder's ``manifest.json``.
        integrity: one line saying how the files were checked ("verified against ...", or why "unverified").
    """

    stage1: ModelFile
    stage2: ModelFile
    precision: str = "fp32"
    verified: bool = False
    integrity: str = "unverified: loaded without a manifest check"

    @property
    def spec(self) -> FeatureSpec:
        return self.stage1.spec

    @property
    def labels(self) -> tuple[str, ...]:
        """Stage-2 class names."""
        return self.stage2.labels

    def threshold(self, name: str, default: float = 0.5) -> float:
        """A decision threshold from the metadata (stage 1 first, then stage 2), else ``default``."""
        for model in (self.stage1, self.stage2):
            if name in model.metadata.thresholds:
                return float(model.metadata.thresholds[name])
        return default

    def confirm_seconds(self) -> float:
        """Link confirmation time from stage 1's metadata (``extra["confirm_s"]``), else 0 seconds.

        Raises:
            ModelError: when the value is not a number of seconds in [0, 60].
        """
        value = self.stage1.metadata.extra.get("confirm_s", 0.0)
        try:
            return check_confirm_s(value, "confirm_s")
        except InputError as exc:
            raise ModelError(f"{self.stage1.path}: metadata extra[{exc}]") from None

    def operating_point(self, name: str) -> dict[str, float]:
        """A named operating point of stage 1's metadata (``extra["operating_points"][name]``): its
        ``p_interact`` threshold and ``confirm_s`` (e.g. the bundled model's ``surveillance``).

        Raises:
            ModelError: unknown name (the message lists the model's points) or malformed values.
        """
        points = self.stage1.metadata.extra.get("operating_points") or {}
        if not isinstance(points, Mapping) or name not in points:
            known = ", ".join(sorted(map(str, points))) if isinstance(points, Mapping) else ""
            raise ModelError(
                f"{self.stage1.path}: no operating point {name!r}; this model has: {known or 'none'} "
                "(and 'default', its main thresholds)"
            )
        point = points[name]
        try:
            tau = point["p_interact"]
            if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not 0.0 <= float(tau) <= 1.0:
                raise InputError(f"p_interact: expected a probability in [0, 1], got {tau!r}")
            return {
                "p_interact": float(tau),
                "confirm_s": check_confirm_s(point.get("confirm_s", 0.0), "confirm_s"),
            }
        except (InputError, TypeError, KeyError, AttributeError) as exc:
            raise ModelError(f"{self.stage1.path}: metadata operating point {name!r}: {exc}") from None

    def auto_operating_points(self) -> dict[str, dict[str, float]]:
        """The named operating points ``operating_point="auto"`` may switch to: those whose metadata gives a
        ``min_camera_height`` (body heights, a positive number), with their threshold and confirmation."""
        points = self.stage1.metadata.extra.get("operating_points") or {}
        out = {}
        for name, point in points.items() if isinstance(points, Mapping) else ():
            bound = point.get("min_camera_height") if isinstance(point, Mapping) else None
            if bound is None:
                continue
            if (
                isinstance(bound, bool)
                or not isinstance(bound, (int, float))
                or not 0.0 < float(bound) < 100.0
            ):
                raise ModelError(
                    f"{self.stage1.path}: metadata operating point {name!r}: min_camera_height: expected "
                    f"body heights in (0, 100), got {bound!r}"
                )
            out[str(name)] = {**self.operating_point(str(name)), "min_camera_height": float(bound)}
        return out

    def feature_config(self) -> Mapping[str, Any] | None:
        """The feature-extractor options stored at training time (``extra["feature_config"]``), if any."""
        configs = [m.metadata.extra.get("feature_config") or None for m in (self.stage1, self.stage2)]
        if configs[0] and configs[1] and configs[0] != configs[1]:
            raise ModelError(
                f"{self.stage1.path} and {self.stage2.path} were trained with different feature options "
                f"({configs[0]} vs {configs[1]}); export both stages from the same feature set"
            )
        return configs[0] or configs[1]


def _folder_paths(folder: Path, precision: str) -> list[Path]:
    """The two stage files of ``precision`` in ``folder``; each must resolve inside the folder (a stage file
    that is a symlink out of it is refused, as external data leaving the folder is)."""
    names = stage_files(precision)
    paths = [folder / n for n in names]
    missing = [p.name for p in paths if not os.path.lexists(p)]
    if missing and precision != "fp32":
        raise ModelError(
            f"{folder}: no {precision} models here (missing {', '.join(missing)}); "
            f"`{artefact(1, precision).made_by}` makes them in the model folder; or load precision='fp32'"
        )
    if missing:
        raise ModelError(
            f"{folder}: {', '.join(missing)} not found; expected a model directory with {_FP32} "
            f"(`pairedge export --out {folder}/{names[0]} ...`), or pass both files"
        )
    return [inside_folder(folder, n) for n in names]


def check_integrity(paths: Sequence[Path]) -> tuple[bool, str]:
    """Verify the stage-1 and stage-2 files (in that order) against the manifest of their folder, if any.

    Returns ``(True, note)`` when every file matched its recorded SHA-256 and role, ``(False, note)`` when a
    folder has no manifest (older exports, loose files: loaded, reported unverified); files in folders that
    do have one are verified either way.

    Raises:
        ModelIntegrityError: a manifest exists and a file is not listed, its hash or size differs, or its
            role is not one of this stage's files in :mod:`pairedge.core.artefacts` (another stage's, or
            none).
    """
    checked: list[str] = []
    missing: list[str] = []
    for stage, path in enumerate(paths, start=1):
        # the folder the caller named, not a symlink's target: a link to a file elsewhere is checked against
        # the manifest of the folder it stands in (its target's folder may have none, which is not "verified")
        file = Path(os.path.abspath(path))
        if read_manifest(file.parent) is None:
            missing.append(str(file.parent))
            continue
        manifest = verify_files(file.parent, [file.name])
        role = manifest.files[file.name].role
        listed = by_role(role)  # the table's record of that role: a stage file of some precision, or None
        if listed is None or listed.stage != stage:
            raise ModelIntegrityError(
                f"{file}: loaded as stage {stage} but {file.parent / MANIFEST_NAME} records it as {role!r}; "
                "pass the stage-1 file first, or re-export the folder"
            )
        checked.append(f"{file.name} ({role})")
    if missing:
        return False, (
            f"unverified: {', '.join(sorted(set(missing)))} has no {MANIFEST_NAME} (exported before "
            "manifests, or loose files); re-export with `pairedge export` to record SHA-256 hashes"
        )
    return True, f"verified: SHA-256 of {', '.join(checked)} match the folder's {MANIFEST_NAME}"


def check_manifest_summary(folder: Path, stage1: ModelFile, stage2: ModelFile) -> None:
    """Refuse a folder whose ``manifest.json`` describes another model than the files it verified: its
    feature spec, version or stage-2 labels differ from the models' metadata (fields it leaves empty, as
    before stage 2 is exported, are not compared).

    Raises:
        ModelIntegrityError: naming the field, both values and how to fix it.
    """
    manifest = read_manifest(folder)
    if manifest is None:
        return
    m1, m2 = stage1.metadata, stage2.metadata
    actual = {
        "feature_spec": m1.feature_spec,
        "feature_spec_version": m1.feature_spec_version,
        "labels": m2.labels,
    }
    listed = {k: v for k, v in actual.items() if getattr(manifest, k)}
    problems = summary_mismatches(manifest, folder / MANIFEST_NAME, listed)
    if problems:
        raise ModelIntegrityError(problems[0])


#: Metadata key of a calibrated file naming (in JSON) the SHA-256 of the fp32 model it was made from.
QUANTIZATION_KEY = "pairedge.quantization"


def check_derived_from(paths: Sequence[Path]) -> None:
    """Refuse fp16 / int8 files made from another fp32 model than the ``stage{n}.onnx`` beside them.

    ``pairedge calibrate`` records the fp32 file's SHA-256 in each file it makes (``pairedge.quantization``
    metadata, ``fp32_sha256``). When the folder's fp32 file has changed since (re-exported), the calibrated
    file is stale. Files without the record, or folders without the fp32 file, are not checked.

    Raises:
        ModelIntegrityError: naming both hashes and the command that remakes the file.
    """
    import json

    for stage, path in enumerate(paths, start=1):
        fp32 = path.parent / artefact(stage, "fp32").onnx
        if not fp32.is_file() or fp32.resolve() == path.resolve():
            continue
        fp32 = inside_folder(path.parent, fp32.name)  # the fp32 file it names must travel with the folder
        try:
            props = {p.key: p.value for p in load_onnx(path).metadata_props}
            recorded = json.loads(props.get(QUANTIZATION_KEY, "{}")).get("fp32_sha256")
        except Exception:  # unreadable files are reported by load_model with the reason
            continue
        if not isinstance(recorded, str):
            continue
        try:
            actual = sha256_file(fp32, f"the fp32 {fp32.name}", limits.MAX_MODEL_BYTES)
        except FormatError as exc:
            raise ModelError(str(exc)) from None
        if recorded != actual:
            raise ModelIntegrityError(
                f"{path}: made from another {fp32.name} (fp32 SHA-256 {recorded}) than the one in this "
                f"folder ({actual}): it is stale. Rerun `pairedge calibrate` on {path.parent}, or load "
                "precision='fp32'"
            )


def find_models(model: str | Path | Sequence[str | Path], precision: str = "fp32") -> ModelPair:
    """Locate, verify and check the two classifiers.

    Args:
        model: a model folder (``stage1.onnx`` + ``stage2.onnx``, for other precisions
            ``stage{1,2}.{precision}.onnx``; verified against its ``manifest.json`` when it has one), or the
            two files (stage 1 first; verified when their folder has a manifest).
        precision: "fp32", "fp16" or "int8" (a model folder only).

    Raises:
        ModelError: missing files, wrong stages, or stages of different feature specs.
        ModelIntegrityError: a file does not match the folder's manifest.
    """
    stage_files(precision)  # an unknown precision: one line naming the accepted ones
    if isinstance(model, str | Path):
        folder = Path(model).expanduser()
        if not folder.is_dir():
            raise ModelError(f"{model}: expected a model directory with {_FP32} (or pass both files)")
        paths = _folder_paths(folder, precision)
    else:
        paths = [Path(p).expanduser() for p in model]
        if len(paths) != 2:
            raise ModelError(f"expected two model files (stage 1, stage 2), got {len(paths)}")
        if precision != "fp32":
            raise InputError(
                f"precision={precision!r} picks files in a model folder; pass the folder, or pass the two "
                f"{precision} files with the default precision"
            )
        for p in paths:
            if not p.is_file():
                raise ModelError(f"{p}: model file not found; fix the path")
    verified, note = check_integrity(paths)
    if precision != "fp32":
        check_derived_from(paths)
    stage1 = load_model(paths[0], stage=1)
    stage2 = load_model(paths[1], stage=2)
    m1, m2 = stage1.metadata, stage2.metadata
    if (m1.feature_spec, m1.feature_spec_version) != (m2.feature_spec, m2.feature_spec_version):
        raise ModelError(
            f"stage 1 uses feature spec {m1.feature_spec} v{m1.feature_spec_version} but stage 2 uses "
            f"{m2.feature_spec} v{m2.feature_spec_version}; export both stages with the same spec"
        )
    if verified:
        for folder in sorted({Path(os.path.abspath(p)).parent for p in paths}):
            check_manifest_summary(folder, stage1, stage2)
    return ModelPair(stage1, stage2, precision=precision, verified=verified, integrity=note)


def spec_uses_flow(spec: FeatureSpec, feature_config: Any) -> bool:
    """Whether the extractor configured with ``feature_config`` uses optical flow."""
    uses = getattr(spec, "uses_flow", None)
    return bool(uses(feature_config)) if callable(uses) else bool(spec.needs_flow)


def make_flow_backend(
    flow: str | FlowBackend | None, spec: FeatureSpec, uses_flow: bool, config: PipelineConfig
) -> FlowBackend | None:
    """The flow backend of a pipeline, or None when the features need no flow.

    ``flow``: a backend instance; "none" (no flow: box-only features); "auto" (the backend the spec was
    defined with) or a registered name; ``config.flow`` gives its preset and scale.
    """
    if isinstance(flow, FlowBackend):
        return flow
    if flow in (None, "none") or not uses_flow:
        return None
    name = spec.flow_backend if flow == "auto" else flow
    scale = config.flow.scale if config.flow.scale is not None else spec.default_flow_scale
    # the backend's own typed options for these settings (DIS takes the preset, the others ignore it)
    return get_flow_backend(name, flow_backend_class(name).options_for(scale, config.flow.preset))
