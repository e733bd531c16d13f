"""Datasets for training: the features ``.npz`` format and builders that turn annotated sequences
(Collective Activity tracks, simulator scenes) into per-pair feature arrays. numpy only, never torch."""

from __future__ import annotations

from pairedge.core.io.featurefile import FeatureData, load_npz

__all__ = ["FeatureData", "load_npz"]
