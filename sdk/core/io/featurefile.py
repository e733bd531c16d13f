"""Feature arrays for training: the features ``.npz`` format (numpy only, never pickles).

A features file (``docs/formats.md``) holds one row per (frame, pair):

- ``X`` (N, F) float32 raw feature values, ``y`` (N,) int64 class ids, ``groups`` (N,) sequence ids
  (str or int; the split never separates rows of one sequence), ``labels`` (C,) str class names.
- optional: ``feature_spec`` (str), ``feature_spec_version`` (str), ``feature_names`` (F,) str,
  ``stage`` (int), ``person_features`` / ``pair_features`` (int; the ``[a, b, pair]`` layout of a
  relation network), ``label_set`` (str), ``feature_config`` (str: JSON of the feature extractor's options,
  e.g. ``{"motion": "boxes"}``; stored in the model metadata so the runtime extracts features the same way).

:func:`load_npz` is bounded before it loads (SPEC 9): a regular file of at most
``pairedge.core.limits.MAX_FEATURES_BYTES``, read through the bounded reader
:class:`pairedge.core.io.npz.NpzReader` (at most ``MAX_MEMBERS`` zip members, counted from the zip's end
record before its directory is parsed; the members' declared sizes within ``MAX_FEATURES_BYTES``; every
``.npy`` header checked against its member before any data), the arrays it reads as their headers declare them
(plus the float32 / str copies it makes) within ``MAX_FEATURES_BYTES``; a member is never read past its
declared size, so one that inflates further cannot grow the memory.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from pairedge.core import limits
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.npz import ArrayInfo, NpzReader

REQUIRED = ("X", "y", "groups", "labels")
#: Arrays load_npz reads (the others of an archive are ignored, never loaded).
READ = (
    *REQUIRED,
    "feature_names",
    "feature_spec",
    "feature_spec_version",
    "stage",
    "person_features",
    "pair_features",
    "label_set",
    "feature_config",
)
EXPECTED = "a features .npz (numpy arrays, no pickles)"
#: A numeric ``groups`` column becomes str: at most 21 characters of 4 bytes per row.
_STR_ROW_BYTES = 84


@dataclass(frozen=True)
class FeatureData:
    """Arrays for training. X: (N, F) float32, y: (N,) int64, groups: (N,) str sequence ids."""

    X: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    labels: tuple[str, ...]
    feature_spec: str = ""
    feature_spec_version: str = ""
    feature_names: tuple[str, ...] = ()
    stage: int = 0
    person_features: int = 0
    pair_features: int = 0
    label_set: str = ""
    feature_config: str = ""

    def __post_init__(self) -> None:
        validate_arrays(self.X, self.y, self.groups, self.labels, source="<arrays>")

    @classmethod
    def from_arrays(
        cls,
        X: np.ndarray,
        y: np.ndarray,
        groups: np.ndarray,
        labels: tuple[str, ...] | list[str],
        **kw: object,
    ) -> FeatureData:
        """Convert dtypes (float32 / int64 / str) and validate."""
        return cls(
            np.ascontiguousarray(X, dtype=np.float32),
            np.ascontiguousarray(y, dtype=np.int64),
            np.asarray(groups).astype(str),
            tuple(str(v) for v in labels),
            **kw,  # type: ignore[arg-type]
        )

    @property
    def num_features(self) -> int:
        return int(self.X.shape[1])

    def subset(self, mask: np.ndarray) -> FeatureData:
        """Rows selected by a boolean mask or index array."""
        return replace(self, X=self.X[mask], y=self.y[mask], groups=self.groups[mask])

    def fingerprint(self) -> str:
        """``sha256:<hex>`` over X, y, groups and labels: identifies the training data in model metadata."""
        h = hashlib.sha256()
        for arr in (self.X, self.y):
            h.update(str(arr.shape).encode())
            h.update(np.ascontiguousarray(arr).tobytes())
        h.update("\x1f".join(self.groups.tolist()).encode())
        h.update("\x1f".join(self.labels).encode())
        return "sha256:" + h.hexdigest()

    def save(self, path: str | Path) -> None:
        """Write the ``.npz`` features format (no pickles)."""
        np.savez_compressed(
            path,
            X=self.X,
            y=self.y,
            groups=self.groups.astype(str),
            labels=np.asarray(self.labels, dtype=str),
            feature_spec=np.asarray(self.feature_spec),
            feature_spec_version=np.asarray(self.feature_spec_version),
            feature_names=np.asarray(self.feature_names, dtype=str),
            stage=np.asarray(self.stage, dtype=np.int64),
            person_features=np.asarray(self.person_features, dtype=np.int64),
            pair_features=np.asarray(self.pair_features, dtype=np.int64),
            label_set=np.asarray(self.label_set),
            feature_config=np.asarray(self.feature_config),
        )


def concat_rows(parts: list[FeatureData]) -> FeatureData:
    """One :class:`FeatureData` of several with the same layout: rows appended in order, the first part's
    metadata."""
    if not parts:
        raise InputError("concat_rows: expected at least one FeatureData")
    widths = {p.num_features for p in parts}
    if len(widths) != 1 or len({p.labels for p in parts}) != 1:
        raise InputError(f"concat_rows: expected one layout and label set, got widths {sorted(widths)}")
    if len(parts) == 1:
        return parts[0]
    return replace(
        parts[0],
        X=np.concatenate([p.X for p in parts]),
        y=np.concatenate([p.y for p in parts]),
        groups=np.concatenate([p.groups for p in parts]),
    )


def validate_arrays(
    X: np.ndarray, y: np.ndarray, groups: np.ndarray, labels: tuple[str, ...], *, source: str
) -> None:
    """Raise FormatError (naming ``source``) unless shapes, dtypes and values are consistent and finite."""
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise FormatError(source, f"expected X of shape (N, F) with N, F >= 1, got {X.shape}", record="X")
    n = X.shape[0]
    if y.shape != (n,) or groups.shape != (n,):
        raise FormatError(
            source,
            f"expected y and groups of shape ({n},), got {y.shape} and {groups.shape}",
            record="y/groups",
        )
    if not np.isfinite(X).all():
        bad = int(np.argwhere(~np.isfinite(X))[0, 0])
        raise FormatError(
            source, "X holds NaN or inf; clean or drop those rows before training", record=f"X[{bad}]"
        )
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise FormatError(source, f"expected >= 2 unique class names, got {list(labels)}", record="labels")
    if y.min() < 0 or y.max() >= len(labels):
        raise FormatError(
            source, f"expected class ids in [0, {len(labels)}), got {y.min()}..{y.max()}", record="y"
        )


def _scalar(arrays: dict[str, np.ndarray], key: str, kind: type, default: object) -> object:
    if key not in arrays:
        return default
    return kind(arrays[key].item()) if arrays[key].shape == () else default


def _loaded_bytes(infos: dict[str, ArrayInfo]) -> int:
    """Bytes the arrays :func:`load_npz` reads take once loaded, from their headers (and their copies)."""
    total = 0
    for key in READ:
        info = infos.get(key)
        if info is None:
            continue
        total += info.nbytes
        if key == "X" and info.dtype != np.float32:
            total += math.prod(info.shape) * 4  # the float32 copy
        if key == "groups" and info.dtype.kind != "U":
            total += (info.shape[0] if info.shape else 1) * _STR_ROW_BYTES  # the str copy
    return total


def _read_arrays(path: Path) -> dict[str, np.ndarray]:
    """The :data:`READ` arrays of a features ``.npz``, through the bounded reader (module docstring).

    Raises:
        FormatError: not a regular file or above ``MAX_FEATURES_BYTES`` on disk, more than ``MAX_MEMBERS``
            members, not a zip, an array whose header disagrees with its member, an object array, arrays that
            would take more than ``MAX_FEATURES_BYTES`` once loaded, or a member that is corrupt.
    """
    limits.regular_file(path, EXPECTED, limits.MAX_FEATURES_BYTES)
    with NpzReader(path, limits.MAX_FEATURES_BYTES, "features .npz", ceiling="MAX_FEATURES_BYTES") as npz:
        total = _loaded_bytes(npz.infos)
        if total > limits.MAX_FEATURES_BYTES:
            raise FormatError(
                path,
                f"arrays of {limits.describe_size(total)} once loaded, more than the "
                f"{limits.describe_size(limits.MAX_FEATURES_BYTES)} ceiling for {EXPECTED} "
                "(pairedge.core.limits.MAX_FEATURES_BYTES); split the features into several files",
            )
        return {key: npz.read(key) for key in READ if key in npz.infos}


def load_npz(path: str | Path) -> FeatureData:
    """Read a features ``.npz`` (never unpickles), within the ceilings of the module docstring.

    Raises:
        InputError: the file does not exist.
        FormatError: naming the file and the problem (a ceiling, a bad zip or array, invalid values).
    """
    path = Path(path)
    if not path.exists():
        raise InputError(
            f"features file {path} not found; build one with a dataset builder (docs/formats.md)"
        )
    archive = _read_arrays(path)
    missing = [k for k in REQUIRED if k not in archive]
    if missing:
        raise FormatError(path, f"expected arrays {list(REQUIRED)}, missing {missing}")
    X = archive["X"].astype(np.float32)
    y = archive["y"]
    if not np.issubdtype(y.dtype, np.integer):
        raise FormatError(path, f"expected integer class ids in y, got dtype {y.dtype}", record="y")
    groups = archive["groups"].astype(str)
    labels = tuple(str(v) for v in archive["labels"].reshape(-1))
    names = tuple(str(v) for v in archive["feature_names"]) if "feature_names" in archive else ()
    meta = {
        "feature_spec": _scalar(archive, "feature_spec", str, ""),
        "feature_spec_version": _scalar(archive, "feature_spec_version", str, ""),
        "stage": _scalar(archive, "stage", int, 0),
        "person_features": _scalar(archive, "person_features", int, 0),
        "pair_features": _scalar(archive, "pair_features", int, 0),
        "label_set": _scalar(archive, "label_set", str, ""),
        "feature_config": _scalar(archive, "feature_config", str, ""),
    }
    validate_arrays(X, y.astype(np.int64), groups, labels, source=str(path))
    if names and len(names) != X.shape[1]:
        raise FormatError(
            path, f"expected {X.shape[1]} feature_names, got {len(names)}", record="feature_names"
        )
    return FeatureData(
        X,
        y.astype(np.int64),
        groups,
        labels,
        feature_names=names,
        **meta,  # type: ignore[arg-type]
    )
