"""Pair feature specifications: ``liang2026`` (the paper's released code) and ``pairedge`` (this project's).

Use :func:`get_spec` to look a spec up by the name stored in a model's metadata, then
``spec.make_extractor(config)`` for a per-stream extractor; see :mod:`pairedge.core.features.base` for the
contract. The spec modules themselves are imported lazily.
"""

from __future__ import annotations

from pairedge.core.features.base import (
    FeatureExtractor,
    FeatureSpec,
    PairFeatures,
    frame_pairs,
    get_spec,
    spec_layout,
    spec_names,
    usable_rows,
)

__all__ = [
    "FeatureExtractor",
    "FeatureSpec",
    "PairFeatures",
    "frame_pairs",
    "get_spec",
    "spec_layout",
    "spec_names",
    "usable_rows",
]
