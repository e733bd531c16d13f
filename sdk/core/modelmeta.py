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
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pairedge.core.errors import ModelError

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
        architecture: model family, e.g. "stage1_mlp", "relation_net", "residual_mlp",
            "paper_adaptive_geometric".
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
        """Parse and validate ``metadata_props``; raises a one-line ModelError naming ``source`` and the
        key."""
        kwargs: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            key = PREFIX + name
            if key not in props:
                if name in OPTIONAL_KEYS:
                    continue
                raise ModelError(
                    f"{source}: metadata key {key!r} missing; this is not a pairedge model "
                    "(export it with `pairedge export`, which writes the metadata)"
                )
            raw = props[key]
            if name in STRING_KEYS:
                kwargs[name] = raw
                continue
            try:
                kwargs[name] = json.loads(raw)
            except (ValueError, RecursionError) as exc:  # ValueError: also integers too long to convert
                raise ModelError(
                    f"{source}: metadata key {key!r} is not valid JSON ({str(exc)[:100]})"
                ) from None
        return validate_fields(kwargs, source)

    def validated(self, source: str = "<model>") -> ModelMetadata:
        """This metadata checked (types, ranges, lengths) as :meth:`from_props` checks a file's."""
        return validate_fields(asdict(self), source)


#: Keys a model may leave out (older exports).
OPTIONAL_KEYS = frozenset({"thresholds", "architecture", "data_fingerprint", "pairedge_version", "extra"})
#: Keys stored as plain strings (every other value is JSON).
STRING_KEYS = frozenset(
    {"feature_spec", "feature_spec_version", "architecture", "data_fingerprint", "pairedge_version"}
)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def finite_floats(values: Any, key: str, source: str, positive: bool = False) -> tuple[float, ...]:
    what = "positive finite numbers" if positive else "finite numbers"
    if not isinstance(values, list | tuple) or not all(_is_number(v) for v in values):
        raise ModelError(f"{source}: metadata {PREFIX}{key}: expected a list of {what}, got {values!r:.120}")
    out = tuple(float(v) for v in values)
    for i, v in enumerate(out):
        if not math.isfinite(v) or (positive and v <= 0.0):
            raise ModelError(f"{source}: metadata {PREFIX}{key}[{i}]: expected {what[:-1]}, got {v!r}")
    return out


def validate_fields(fields: Mapping[str, Any], source: str) -> ModelMetadata:
    """Build a :class:`ModelMetadata` from parsed values, checking every field's type and range.

    Raises:
        ModelError: one line naming ``source`` and the offending ``pairedge.<field>``.
    """

    def bad(key: str, expected: str) -> ModelError:
        return ModelError(
            f"{source}: metadata {PREFIX}{key}: expected {expected}, got {fields.get(key)!r:.120}"
        )

    for key in STRING_KEYS:
        if key in fields and not isinstance(fields[key], str):
            raise bad(key, "a string")
    for key in ("feature_spec", "feature_spec_version"):
        if not fields.get(key):
            raise bad(key, "a non-empty string")
    stage = fields.get("stage")
    if not _is_number(stage) or stage not in (1, 2) or isinstance(stage, float):
        raise ModelError(f"{source}: metadata {PREFIX}stage: stage must be 1 or 2, got {stage!r:.60}")
    num = fields.get("num_features")
    if not isinstance(num, int) or isinstance(num, bool) or num < 1:
        raise bad("num_features", "a positive integer")
    labels = fields.get("labels")
    if not isinstance(labels, list | tuple) or not labels:
        raise bad("labels", "a non-empty list of class names")
    if not all(isinstance(v, str) and v.strip() for v in labels):
        raise bad("labels", "class names that are non-empty strings")
    if len(set(labels)) != len(labels):
        dupes = sorted(v for v, k in Counter(labels).items() if k > 1)  # O(n): labels come from the file
        raise ModelError(
            f"{source}: metadata {PREFIX}labels: class names must be unique, {dupes!r:.120} repeat"
        )
    mean = finite_floats(fields.get("norm_mean"), "norm_mean", source)
    std = finite_floats(fields.get("norm_std"), "norm_std", source, positive=True)
    if len(mean) != num or len(std) != num:
        raise ModelError(
            f"{source}: normalisation statistics have {len(mean)}/{len(std)} values, "
            f"expected num_features={num}"
        )
    thresholds = fields.get("thresholds", {})
    if not isinstance(thresholds, Mapping):
        raise bad("thresholds", "an object of name -> probability in [0, 1]")
    for name, value in thresholds.items():
        if not _is_number(value) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise ModelError(
                f"{source}: metadata {PREFIX}thresholds[{name!r}]: expected a probability in [0, 1], "
                f"got {value!r:.60}"
            )
    extra = fields.get("extra", {})
    if not isinstance(extra, Mapping):
        raise bad("extra", "a JSON object")
    known = {k: v for k, v in fields.items() if k in ModelMetadata.__dataclass_fields__}
    return ModelMetadata(
        **{
            **known,
            "labels": tuple(labels),
            "norm_mean": mean,
            "norm_std": std,
            "thresholds": {str(k): float(v) for k, v in thresholds.items()},
            "extra": dict(extra),
        }
    )
