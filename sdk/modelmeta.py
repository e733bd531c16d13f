"""Model metadata: what an exported ONNX classifier declares about itself (ONNX ``metadata_props``).

Contract between ``pairedge export`` (writer) and the runtime (reader). Every key is prefixed ``pairedge.``;
list / dict values are JSON strings. The runtime refuses a model without this metadata or whose feature
spec it does not know.

Graph contract: one float32 input named ``features`` of shape (pairs, F) with a dynamic first axis, fed
with RAW feature values (the z-scoring with the training statistics is the first op inside the graph; the
statistics are repeated here for documentation and parity tools); one float32 output ``logits`` of shape
(pairs, C), C = len(labels). Stage 1 has labels ``["not_interacting", "interacting"]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pairedge.errors import ModelError

PREFIX = "pairedge."
INPUT_NAME = "features"
OUTPUT_NAME = "logits"


@dataclass(frozen=True)
class ModelMetadata:
    """Metadata of one exported classifier.

    Attributes:
        stage: 1 (interacting or not) or 2 (interaction type).
        feature_spec: "liang2026" or "pairedge".
        feature_spec_version: version string of that spec's definition.
        labels: class names, index = class id.
        num_features: F, the input width.
        norm_mean, norm_std: (F,) z-score statistics baked into the graph.
        thresholds: decision thresholds, e.g. {"p_interact": 0.5, "tau_group": 0.5}.
        architecture: model family, e.g. "stage1_mlp", "relation_net", "residual_mlp", "paper_adaptive_geometric".
        data_fingerprint: hash of the training data (or "paper-checkpoint:<sha256>" for imported weights).
        pairedge_version: version of pairedge that exported it.
        extra: anything else (training config, metrics), JSON-serialisable.
    """

    stage: int
    feature_spec: str
    feature_spec_version: str
    labels: tuple[str, ...]
    num_features: int
    norm_mean: tuple[float, ...]
    norm_std: tuple[float, ...]
    thresholds: Mapping[str, float] = field(default_factory=dict)
    architecture: str = ""
    data_fingerprint: str = ""
    pairedge_version: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_props(self) -> dict[str, str]:
        """Flatten to ``metadata_props`` key/value strings."""
        out: dict[str, str] = {}
        for key, value in asdict(self).items():
            out[PREFIX + key] = value if isinstance(value, str) else json.dumps(value)
        return out

    @classmethod
    def from_props(cls, props: Mapping[str, str], *, source: str = "<model>") -> ModelMetadata:
        """Parse ``metadata_props``; raises ModelError naming the missing or malformed key."""
        kwargs: dict[str, Any] = {}
        string_keys = {
            "feature_spec",
            "feature_spec_version",
            "architecture",
            "data_fingerprint",
            "pairedge_version",
        }
        for name in cls.__dataclass_fields__:
            key = PREFIX + name
            if key not in props:
                if name in ("thresholds", "architecture", "data_fingerprint", "pairedge_version", "extra"):
                    continue
                raise ModelError(
                    f"{source}: metadata key {key!r} missing; this is not a pairedge model "
                    "(export it with `pairedge export`, which writes the metadata)"
                )
            raw = props[key]
            try:
                kwargs[name] = raw if name in string_keys else json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ModelError(f"{source}: metadata key {key!r} is not valid JSON ({exc})") from None
        kwargs["labels"] = tuple(kwargs["labels"])
        kwargs["norm_mean"] = tuple(float(v) for v in kwargs["norm_mean"])
        kwargs["norm_std"] = tuple(float(v) for v in kwargs["norm_std"])
        meta = cls(**kwargs)
        if meta.stage not in (1, 2):
            raise ModelError(f"{source}: stage must be 1 or 2, got {meta.stage}")
        if len(meta.norm_mean) != meta.num_features or len(meta.norm_std) != meta.num_features:
            raise ModelError(
                f"{source}: normalisation statistics have {len(meta.norm_mean)}/{len(meta.norm_std)} values, "
                f"expected num_features={meta.num_features}"
            )
        return meta
