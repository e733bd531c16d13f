"""Feature arrays for training: the features ``.npz`` format (numpy only, never pickles).

A features file (``docs/formats.md``) holds one row per (frame, pair):

- ``X`` (N, F) float32 raw feature values, ``y`` (N,) int64 class ids, ``groups`` (N,) sequence ids
  (str or int; the split never separates rows of one sequence), ``labels`` (C,) str class names.
- optional: ``feature_spec`` (str), ``feature_spec_version`` (str), ``feature_names`` (F,) str,
  ``stage`` (int), ``person_features`` / ``pair_features`` (int; the ``[a, b, pair]`` layout of a
  relation network), ``label_set`` (str), ``feature_config`` (str: JSON of the feature extractor's options,
  e.g. ``{"motion": "boxes"}``; stored in the model metadata so the runtime extracts features the same way).

:func:`load_npz` is bounded before it loads (SPEC 9): a regular file of at most
``pairedge.limits.MAX_FEATURES_BYTES``, at most :data:`MAX_MEMBERS` zip members (counted from the zip's end
record before its directory is parsed), and the arrays it reads as their ``.npy`` headers declare them
(shape x dtype, plus the float32 / str copies it makes) within ``MAX_FEATURES_BYTES`` and within the member's
declared size; a member is never read past its declared size (zipfile stops there), so one that inflates
further cannot grow the memory.
"""

from __future__ import annotations

import hashlib
import math
import struct
import zipfile
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from pairedge import limits
from pairedge.errors import FormatError, InputError

REQUIRED = ("X", "y", "groups", "labels")
#: Arrays load_npz reads (the others of an archive are ignored, never loaded).
READ = (*REQUIRED, "feature_names", "feature_spec", "feature_spec_version", "stage", "person_features",
        "pair_features", "label_set", "feature_config")  # fmt: skip
#: Zip members a features file may hold (it has 12): bounds the directory zipfile parses.
MAX_MEMBERS = 256
EXPECTED = "a features .npz (numpy arrays, no pickles)"
#: A numeric ``groups`` column becomes str: at most 21 characters of 4 bytes per row.
_STR_ROW_BYTES = 84
#: What numpy and zipfile raise on a broken archive (EOFError: an empty file; BadZipFile: a bad CRC).
_UNREADABLE = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error)


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


def _scalar(archive: np.lib.npyio.NpzFile, key: str, kind: type, default: object) -> object:
    if key not in archive.files:
        return default
    return kind(archive[key].item()) if archive[key].shape == () else default


def _members(path: Path, size: int) -> int:
    """The number of members a zip's end-of-central-directory record (or its zip64 record) declares, read
    from the file's tail before zipfile parses the directory; -1 when there is no such record (zipfile then
    says why)."""
    with open(path, "rb") as fh:
        fh.seek(max(0, size - (22 + 0xFFFF)))
        tail = fh.read()
        end = tail.rfind(b"PK\x05\x06")
        if end < 0 or end + 22 > len(tail):
            return -1
        entries = struct.unpack_from("<H", tail, end + 10)[0]
        locator = end - 20
        if entries != 0xFFFF or locator < 0 or tail[locator : locator + 4] != b"PK\x06\x07":
            return int(entries)
        fh.seek(struct.unpack_from("<Q", tail, locator + 8)[0])
        record = fh.read(56)
        if len(record) < 56 or record[:4] != b"PK\x06\x06":
            return -1
        return int(struct.unpack_from("<Q", record, 32)[0])


def _declared(path: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype an ``.npy`` member's header declares, checked against the member's declared size."""
    key = info.filename.removesuffix(".npy")
    with zf.open(info) as fh:
        version = np.lib.format.read_magic(fh)
        if version not in ((1, 0), (2, 0)):
            raise FormatError(path, f"an .npy header of version {version}; expected 1.0 or 2.0", record=key)
        read = (
            np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read(fh)
        held = info.file_size - fh.tell()
    if dtype.hasobject:
        raise FormatError(
            path, f"{key} is an object array (it would need pickle, which pairedge never loads)", key
        )
    claimed = math.prod(shape) * dtype.itemsize
    if claimed > held:
        raise FormatError(
            path, f"{key} declares shape {shape} of {dtype} ({limits.describe_size(claimed)}) but its member "
            f"holds {limits.describe_size(max(held, 0))}: truncated or corrupt", key,
        )  # fmt: skip
    return tuple(int(d) for d in shape), dtype


def _loaded_bytes(path: Path, zf: zipfile.ZipFile) -> int:
    """Bytes the arrays :func:`load_npz` reads take once loaded, from their headers (and their copies)."""
    infos = {info.filename.removesuffix(".npy"): info for info in zf.infolist()}
    total = 0
    for key in READ:
        if key in infos:
            shape, dtype = _declared(path, zf, infos[key])
            total += math.prod(shape) * dtype.itemsize
            if key == "X" and dtype != np.float32:
                total += math.prod(shape) * 4  # the float32 copy
            if key == "groups" and dtype.kind != "U":
                total += (shape[0] if shape else 1) * _STR_ROW_BYTES  # the str copy
    return total


def check_npz(path: str | Path) -> None:
    """Refuse a features ``.npz`` above its ceilings before any array is loaded (module docstring).

    Raises:
        FormatError: not a regular file or above ``MAX_FEATURES_BYTES`` on disk, more than :data:`MAX_MEMBERS`
            members, not a zip, an array whose header claims more than its member holds, an object array,
            or arrays that would take more than ``MAX_FEATURES_BYTES`` once loaded.
    """
    p = Path(path)
    size = limits.regular_file(p, EXPECTED, limits.MAX_FEATURES_BYTES)
    try:
        members = _members(p, size)
        if members > MAX_MEMBERS:
            raise FormatError(p, f"a zip of {members:,} members; expected {EXPECTED} (at most {MAX_MEMBERS})")
        with zipfile.ZipFile(p) as zf:
            total = _loaded_bytes(p, zf)
    except FormatError:
        raise
    except _UNREADABLE as exc:
        raise FormatError(p, f"not a readable .npz without pickles ({exc or type(exc).__name__})") from None
    if total > limits.MAX_FEATURES_BYTES:
        raise FormatError(
            p, f"arrays of {limits.describe_size(total)} once loaded, more than the "
            f"{limits.describe_size(limits.MAX_FEATURES_BYTES)} ceiling for {EXPECTED} "
            "(pairedge.limits.MAX_FEATURES_BYTES); split the features into several files",
        )  # fmt: skip


def load_npz(path: str | Path) -> FeatureData:
    """Read a features ``.npz`` (never unpickles), within the ceilings of :func:`check_npz`.

    Raises:
        InputError: the file does not exist.
        FormatError: naming the file and the problem (a ceiling, a bad zip or array, invalid values).
    """
    path = Path(path)
    if not path.exists():
        raise InputError(
            f"features file {path} not found; build one with a dataset builder (docs/formats.md)"
        )
    check_npz(path)
    try:
        archive = np.load(path, allow_pickle=False)
    except _UNREADABLE as exc:
        raise FormatError(
            path, f"not a readable .npz without pickles ({exc or type(exc).__name__})"
        ) from None
    with archive:
        missing = [k for k in REQUIRED if k not in archive.files]
        if missing:
            raise FormatError(path, f"expected arrays {list(REQUIRED)}, missing {missing}")
        try:
            X = archive["X"].astype(np.float32)
            y = archive["y"]
            if not np.issubdtype(y.dtype, np.integer):
                raise FormatError(path, f"expected integer class ids in y, got dtype {y.dtype}", record="y")
            groups = archive["groups"].astype(str)
            labels = tuple(str(v) for v in archive["labels"].reshape(-1))
            names = (
                tuple(str(v) for v in archive["feature_names"]) if "feature_names" in archive.files else ()
            )
            meta = {
                "feature_spec": _scalar(archive, "feature_spec", str, ""),
                "feature_spec_version": _scalar(archive, "feature_spec_version", str, ""),
                "stage": _scalar(archive, "stage", int, 0),
                "person_features": _scalar(archive, "person_features", int, 0),
                "pair_features": _scalar(archive, "pair_features", int, 0),
                "label_set": _scalar(archive, "label_set", str, ""),
                "feature_config": _scalar(archive, "feature_config", str, ""),
            }
        except FormatError:
            raise
        except _UNREADABLE as exc:  # a bad CRC, a cut stream, an object array
            raise FormatError(path, f"unreadable array ({exc or type(exc).__name__})") from None
    validate_arrays(X, y.astype(np.int64), groups, labels, source=str(path))
    if names and len(names) != X.shape[1]:
        raise FormatError(
            path, f"expected {X.shape[1]} feature_names, got {len(names)}", record="feature_names"
        )
    return FeatureData(X, y.astype(np.int64), groups, labels, feature_names=names, **meta)  # type: ignore[arg-type]
