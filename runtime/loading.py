"""Finding and checking the two classifiers of a pipeline, and choosing its flow backend."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pairedge.errors import ModelError
from pairedge.features import FeatureSpec
from pairedge.runtime.backends.model import ModelFile, load_model
from pairedge.runtime.config import PipelineConfig
from pairedge.runtime.flow import FlowBackend, flow_backend_class, get_flow_backend

STAGE1_FILE = "stage1.onnx"
STAGE2_FILE = "stage2.onnx"
DEFAULT_DIS_PRESET = "fast"


@dataclass(frozen=True)
class ModelPair:
    """The stage-1 and stage-2 classifiers of one pipeline, checked to agree with each other."""

    stage1: ModelFile
    stage2: ModelFile

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

    def feature_config(self) -> Mapping[str, Any] | None:
        """The feature-extractor options stored at training time (``extra["feature_config"]``), if any."""
        configs = [m.metadata.extra.get("feature_config") or None for m in (self.stage1, self.stage2)]
        if configs[0] and configs[1] and configs[0] != configs[1]:
            raise ModelError(
                f"{self.stage1.path} and {self.stage2.path} were trained with different feature options "
                f"({configs[0]} vs {configs[1]}); export both stages from the same feature set"
            )
        return configs[0] or configs[1]


def find_models(model: str | Path | Sequence[str | Path]) -> ModelPair:
    """Locate and check the two classifiers.

    Args:
        model: a directory holding ``stage1.onnx`` and ``stage2.onnx``, or the two files (stage 1 first).

    Raises:
        ModelError: missing files, wrong stages, or stages of different feature specs.
    """
    if isinstance(model, str | Path):
        folder = Path(model).expanduser()
        if not folder.is_dir():
            raise ModelError(
                f"{model}: expected a model directory with {STAGE1_FILE} and {STAGE2_FILE} (or pass both files)"
            )
        paths = [folder / STAGE1_FILE, folder / STAGE2_FILE]
    else:
        paths = [Path(p).expanduser() for p in model]
        if len(paths) != 2:
            raise ModelError(f"expected two model files (stage 1, stage 2), got {len(paths)}")
    stage1 = load_model(paths[0], stage=1)
    stage2 = load_model(paths[1], stage=2)
    m1, m2 = stage1.metadata, stage2.metadata
    if (m1.feature_spec, m1.feature_spec_version) != (m2.feature_spec, m2.feature_spec_version):
        raise ModelError(
            f"stage 1 uses feature spec {m1.feature_spec} v{m1.feature_spec_version} but stage 2 uses "
            f"{m2.feature_spec} v{m2.feature_spec_version}; export both stages with the same spec"
        )
    return ModelPair(stage1, stage2)


def spec_uses_flow(spec: FeatureSpec, feature_config: Any) -> bool:
    """Whether the extractor configured with ``feature_config`` uses optical flow."""
    uses = getattr(spec, "uses_flow", None)
    return bool(uses(feature_config)) if callable(uses) else bool(spec.needs_flow)


def make_flow_backend(
    flow: str | FlowBackend | None, spec: FeatureSpec, uses_flow: bool, config: PipelineConfig
) -> FlowBackend | None:
    """The flow backend of a pipeline, or None when the features need no flow.

    ``flow``: a backend instance; "none" (no flow: box-only features); "auto" (``config.flow.backend``,
    itself "auto" meaning the backend the spec was defined with) or a registered name.
    """
    if isinstance(flow, FlowBackend):
        return flow
    if flow in (None, "none") or not uses_flow:
        return None
    name = config.flow.backend if flow == "auto" else flow
    if name == "auto":
        name = spec.flow_backend
    scale = config.flow.scale if config.flow.scale is not None else spec.default_flow_scale
    options: dict[str, Any] = {"scale": scale}
    if "preset" in inspect.signature(flow_backend_class(name).__init__).parameters:
        options["preset"] = config.flow.preset or DEFAULT_DIS_PRESET
    return get_flow_backend(name, **options)
