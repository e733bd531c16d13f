"""The model folder a robot team ships as a unit, and its ``manifest.json`` (SPEC section 5).

Every deployment step adds files to one folder and records them in its manifest::

    manifest.json                      pairedge version, feature spec + version, labels, thresholds,
                                       and for every file: name, role, SHA-256, size
    stage1.onnx, stage2.onnx           fp32 classifiers (roles "stage1", "stage2"; from `pairedge export`)
    stage1.fp16.onnx, stage2.int8.onnx ... (roles "stage1.fp16", "stage2.int8", ...;
                                       from `pairedge calibrate`)
    calibration.json                   (role "calibration")
    engines/<device>-<cc>-trt<ver>/stage1.int8.engine  (role "engine"; from `pairedge build`)

The names and roles of these files are :mod:`pairedge.core.artefacts`' table; this module owns the manifest.

File names in the manifest are POSIX paths relative to the folder; names that leave the folder (absolute,
``..``, or a symlink whose target is outside the folder, as external-data files are judged) are refused.
Every file is checked with :func:`pairedge.core.limits.regular_file` before it is opened (a FIFO, a device
such as ``/dev/zero`` or a folder is refused by name, never read) and against its ceiling in
:mod:`pairedge.core.limits`. :func:`verify_files` re-hashes files and raises :class:`ModelIntegrityError`
naming the file, the expected and actual SHA-256 and how to fix it. The summary fields (spec, labels,
thresholds) are read from the metadata of ``stage1.onnx`` / ``stage2.onnx`` whenever the manifest is written,
so they always describe the fp32 models in the folder.

A folder without a manifest (exports from before manifests existed, or two loose files) still loads:
:mod:`pairedge.runtime.loading` reports it as *unverified* instead of refusing it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pairedge.core import limits
from pairedge.core.artefacts import stage_artefacts
from pairedge.core.errors import FormatError, InputError, ModelError, ModelIntegrityError
from pairedge.core.modelmeta import ModelMetadata
from pairedge.core.version import __version__

MANIFEST_NAME = "manifest.json"
#: Version of the manifest's own layout (not of pairedge).
MANIFEST_FORMAT = 1
#: Role -> file name of each fp32 stage (``{"stage1": "stage1.onnx", ...}``), from
#: :mod:`pairedge.core.artefacts`.
STAGE_FILES = {a.role: a.onnx for a in stage_artefacts("fp32")}
_CHUNK = 1 << 20

__all__ = [
    "MANIFEST_NAME",
    "FileEntry",
    "Manifest",
    "ModelIntegrityError",
    "inside_folder",
    "load_onnx",
    "read_manifest",
    "register_files",
    "sha256_file",
    "summary_mismatches",
    "summary_problems",
    "verify_files",
    "write_manifest",
]

_FIX = (
    "copy the model folder again from its source; if you changed the file on purpose, re-export it "
    "(`pairedge export` / `pairedge calibrate` update the manifest) or re-register it with "
    "pairedge.core.modelfolder.register_files(folder, {name: role})"
)


def sha256_file(path: str | Path, expected: str = "a model folder file", limit: int | None = None) -> str:
    """Hex SHA-256 of a regular file's bytes, read in 1 MiB chunks.

    Args:
        path: the file (symlinks followed).
        expected: what it should be, for the message.
        limit: its ceiling in bytes (default :data:`pairedge.core.limits.MAX_ENGINE_BYTES`, read when called).

    Raises:
        FormatError: not a regular file (a FIFO or a device is never opened), larger than ``limit``, or it
            grew past ``limit`` while it was hashed.
    """
    limit = limits.MAX_ENGINE_BYTES if limit is None else limit
    limits.regular_file(path, expected, limit)
    digest = hashlib.sha256()
    total = 0
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            total += len(chunk)
            if total > limit:
                raise FormatError(
                    path,
                    f"grew past the {limits.describe_size(limit)} ceiling for {expected} while it was hashed",
                )
            digest.update(chunk)
    return digest.hexdigest()


def load_onnx(path: str | Path, expected: str = "an ONNX model") -> Any:
    """The ``onnx.ModelProto`` of ``path`` without its external data, read bounded.

    The file is checked first (:func:`pairedge.core.limits.regular_file`,
    :data:`pairedge.core.limits.MAX_MODEL_BYTES`) and read in chunks, so a FIFO, ``/dev/zero`` or a 10 GB file
    costs a one-line error, not memory.

    Raises:
        FormatError: not a regular file, or above the ceiling. ModelError: not a readable ONNX model.
    """
    import onnx

    data = limits.read_bytes(path, expected, limits.MAX_MODEL_BYTES)
    try:
        return onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf raises its own DecodeError types
        raise ModelError(f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None


def inside_folder(folder: str | Path, name: str) -> Path:
    """``folder / name`` after checking that it resolves inside ``folder`` (symlinks followed).

    A listed file that is a symlink out of the model folder is refused as an external-data file leaving the
    folder is (:mod:`pairedge.runtime.backends.model`): what is verified must be what travels with the folder.

    Raises:
        ModelIntegrityError: the name or its symlink target leaves the folder.
    """
    base = Path(folder).expanduser()
    file = base / _safe_name(name)
    try:
        target = file.resolve()
        inside = target.is_relative_to(base.resolve())
    except (OSError, RuntimeError):  # a symlink loop
        raise ModelIntegrityError(f"{file}: cannot resolve the path (a symlink loop?); {_FIX}") from None
    if not inside:
        raise ModelIntegrityError(
            f"{file}: a symlink to {target}, outside the model folder {base}; refusing it (the folder must "
            "hold its own files, as for external data): copy the file into the folder instead of linking it"
        )
    return file


@dataclass(frozen=True)
class FileEntry:
    """One file of a model folder.

    Attributes:
        name: POSIX path relative to the folder (``stage1.onnx``,
            ``engines/orin-8.7-trt10.3/stage1.int8.engine``).
        role: what it is: "stage1", "stage2", "stage1.fp16", "stage2.int8", "calibration", "engine", ...
        sha256: hex SHA-256 of its bytes.
        size: its size in bytes.
    """

    name: str
    role: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Manifest:
    """The content of ``manifest.json``.

    Attributes:
        pairedge_version: version of pairedge that last wrote the manifest.
        feature_spec, feature_spec_version: the spec of the fp32 models ("" when none is in the folder yet).
        labels: stage-2 class names (empty before stage 2 is exported).
        thresholds: decision thresholds of the models (stage 1 wins over stage 2 for a shared name).
        files: file name -> :class:`FileEntry`.
        format: layout version of the manifest.
    """

    pairedge_version: str
    feature_spec: str
    feature_spec_version: str
    labels: tuple[str, ...]
    thresholds: Mapping[str, float] = field(default_factory=dict)
    files: Mapping[str, FileEntry] = field(default_factory=dict)
    format: int = MANIFEST_FORMAT

    def by_role(self, role: str) -> FileEntry | None:
        """The first entry with ``role`` (in name order), or None."""
        for name in sorted(self.files):
            if self.files[name].role == role:
                return self.files[name]
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "pairedge_version": self.pairedge_version,
            "feature_spec": self.feature_spec,
            "feature_spec_version": self.feature_spec_version,
            "labels": list(self.labels),
            "thresholds": dict(self.thresholds),
            "files": [
                {"name": e.name, "role": e.role, "sha256": e.sha256, "size": e.size}
                for e in sorted(self.files.values(), key=lambda e: e.name)
            ],
        }

    @classmethod
    def from_dict(cls, data: Any, *, source: str = MANIFEST_NAME) -> Manifest:
        """Parse and validate; raises ModelError naming ``source`` and the malformed field."""
        return _parse(data, source)

    @classmethod
    def load(cls, path: str | Path) -> Manifest:
        """Read ``path`` (the manifest file, or the folder holding it)."""
        file = Path(path)
        if file.is_dir():
            file = file / MANIFEST_NAME
        if not os.path.lexists(file):
            raise ModelError(f"{file}: no model manifest here")
        try:
            text = limits.read_text(file, "a model manifest (manifest.json)", limits.MAX_SIDECAR_BYTES)
        except FormatError as exc:
            raise ModelError(f"cannot read the model manifest: {exc}") from None
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # ValueError: also integers too long to convert
            raise ModelError(f"{file}: the model manifest is not valid JSON ({exc}); {_FIX}") from None
        return _parse(data, str(file))

    def save(self, folder: str | Path) -> Path:
        """Write ``folder/manifest.json`` atomically (temporary file + rename); returns its path."""
        target = Path(folder) / MANIFEST_NAME
        fd, tmp = tempfile.mkstemp(prefix=".manifest-", suffix=".json", dir=str(target.parent))
        try:
            os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the folder is copied to robots as a unit
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(self.to_dict(), fh, indent=2)
                fh.write("\n")
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target


def _parse(data: Any, source: str) -> Manifest:
    def bad(what: str) -> ModelError:
        return ModelError(f"{source}: {what}; {_FIX}")

    if not isinstance(data, dict):
        raise bad(f"expected a JSON object, got {type(data).__name__}")
    fmt = data.get("format", MANIFEST_FORMAT)
    if not isinstance(fmt, int) or isinstance(fmt, bool) or fmt > MANIFEST_FORMAT or fmt < 1:
        raise bad(
            f"'format': expected an integer 1..{MANIFEST_FORMAT} (newer manifests need a newer pairedge), "
            f"got {fmt!r}"
        )
    strings = {}
    for key in ("pairedge_version", "feature_spec", "feature_spec_version"):
        value = data.get(key, "")
        if not isinstance(value, str):
            raise bad(f"{key!r}: expected a string, got {value!r}")
        strings[key] = value
    labels = data.get("labels", [])
    if not isinstance(labels, list) or not all(isinstance(v, str) and v for v in labels):
        raise bad(f"'labels': expected a list of non-empty strings, got {labels!r}")
    thresholds = data.get("thresholds", {})
    if not isinstance(thresholds, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        for v in thresholds.values()
    ):
        raise bad(f"'thresholds': expected an object of finite numbers, got {thresholds!r}")
    raw_files = data.get("files", [])
    if not isinstance(raw_files, list):
        raise bad(f"'files': expected a list, got {type(raw_files).__name__}")
    files: dict[str, FileEntry] = {}
    for i, item in enumerate(raw_files):
        entry = _parse_entry(item, f"files[{i}]", bad)
        if entry.name in files:
            raise bad(f"'files': {entry.name!r} is listed twice")
        files[entry.name] = entry
    return Manifest(
        labels=tuple(labels),
        thresholds={str(k): float(v) for k, v in thresholds.items()},
        files=files,
        format=fmt,
        **strings,
    )


def _parse_entry(item: Any, where: str, bad: Any) -> FileEntry:
    if not isinstance(item, dict):
        raise bad(f"{where}: expected an object, got {item!r}")
    name, role, digest, size = (item.get(k) for k in ("name", "role", "sha256", "size"))
    if not isinstance(name, str) or not isinstance(role, str) or not role:
        raise bad(f"{where}: expected string 'name' and non-empty 'role', got {name!r} / {role!r}")
    try:
        name = _safe_name(name)
    except InputError as exc:
        raise bad(f"{where}: {exc}") from None
    if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise bad(f"{where} ({name}): 'sha256' must be 64 lowercase hex digits, got {digest!r}")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise bad(f"{where} ({name}): 'size' must be a non-negative integer, got {size!r}")
    return FileEntry(name=name, role=role, sha256=digest, size=size)


def _safe_name(name: str) -> str:
    """Normalise a folder-relative POSIX name; refuse names that leave the folder."""
    text = str(name).replace("\\", "/")
    path = PurePosixPath(text)
    if not text or path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        raise InputError(f"file name {name!r} must be a relative path inside the model folder")
    normal = path.as_posix()
    if normal in (".", ""):
        raise InputError(f"file name {name!r} names the folder itself, not a file")
    return normal


def _entry(folder: Path, name: str, role: str) -> FileEntry:
    if not isinstance(role, str) or not role:
        raise InputError(f"{folder / name}: role must be a non-empty string, got {role!r}")
    safe = _safe_name(name)
    file = folder / safe
    if not os.path.lexists(file):
        raise ModelError(f"{file}: cannot register a file that does not exist (role {role!r})")
    inside_folder(folder, safe)
    try:
        size = limits.regular_file(file, f"a model folder file (role {role!r})", limits.MAX_ENGINE_BYTES)
        return FileEntry(name=safe, role=role, sha256=sha256_file(file), size=size)
    except FormatError as exc:
        raise ModelError(f"cannot register it: {exc}") from None


def _summary(folder: Path) -> dict[str, Any]:
    """Spec, labels and thresholds from the fp32 stage files' metadata (empty when absent)."""

    metas = {}
    for stage in stage_artefacts("fp32"):
        file = folder / stage.onnx
        if os.path.lexists(file):
            try:
                proto = load_onnx(file, f"the fp32 {stage.role} model")
            except FormatError as exc:
                raise ModelError(str(exc)) from None
            props = {p.key: p.value for p in proto.metadata_props}
            metas[stage.stage] = ModelMetadata.from_props(props, source=str(file))
    first = metas.get(1) or metas.get(2)
    thresholds: dict[str, float] = {}
    for number in (2, 1):  # stage 1 wins, as in ModelPair.threshold
        if number in metas:
            thresholds.update({k: float(v) for k, v in metas[number].thresholds.items()})
    return {
        "pairedge_version": __version__,
        "feature_spec": first.feature_spec if first else "",
        "feature_spec_version": first.feature_spec_version if first else "",
        "labels": metas[2].labels if 2 in metas else (),
        "thresholds": thresholds,
    }


def _folder(folder: str | Path) -> Path:
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise ModelError(f"{folder}: expected a model folder (a directory), got no such directory")
    return path


def write_manifest(folder: str | Path, roles: Mapping[str, str]) -> Manifest:
    """Write a new ``manifest.json`` listing exactly ``roles`` (file name -> role), hashed now.

    The spec, labels and thresholds are read from the metadata of ``stage1.onnx`` / ``stage2.onnx`` in the
    folder. Raises ModelError when a listed file is missing, InputError for a name outside the folder.
    """
    path = _folder(folder)
    entries = {e.name: e for e in (_entry(path, n, r) for n, r in roles.items())}
    manifest = Manifest(files=entries, **_summary(path))
    manifest.save(path)
    return manifest


def register_files(folder: str | Path, roles: Mapping[str, str]) -> Manifest:
    """Add or replace the entries of ``roles`` (hashed now), keep the others; create the manifest if missing.

    The summary fields are re-read from the fp32 stage files, so registering a re-exported ``stage2.onnx``
    also updates the labels.
    """
    path = _folder(folder)
    old = read_manifest(path)
    entries = dict(old.files) if old is not None else {}
    for name, role in roles.items():
        entry = _entry(path, name, role)
        entries[entry.name] = entry
    manifest = Manifest(files=entries, **_summary(path))
    manifest.save(path)
    return manifest


def read_manifest(folder: str | Path) -> Manifest | None:
    """The folder's manifest, or None when it has none. Raises ModelError when it exists but is malformed."""
    file = Path(folder).expanduser() / MANIFEST_NAME
    if not os.path.lexists(file):  # a dangling symlink is a broken manifest, not "no manifest"
        return None
    return Manifest.load(file)


def verify_files(folder: str | Path, names: Iterable[str] | None = None) -> Manifest:
    """Check files against the manifest (SHA-256 and size); returns the manifest.

    Args:
        folder: the model folder.
        names: the files to check (folder-relative); None checks every listed file.

    Raises:
        ModelIntegrityError: no manifest, a name not listed, a listed file missing, or a size / hash mismatch;
            the message names the file, the expected and actual values and how to fix it.
    """
    path = _folder(folder)
    manifest = read_manifest(path)
    if manifest is None:
        raise ModelIntegrityError(
            f"{path}: no {MANIFEST_NAME}, so its files cannot be verified; export the model with "
            "`pairedge export` (which writes it) or create it with pairedge.core.modelfolder.write_manifest"
        )
    wanted = sorted(manifest.files) if names is None else [_safe_name(n) for n in names]
    for name in wanted:
        entry = manifest.files.get(name)
        file = path / name
        if entry is None:
            raise ModelIntegrityError(
                f"{file}: not listed in {path / MANIFEST_NAME} (listed: "
                f"{', '.join(sorted(manifest.files)) or 'none'}); "
                "a file added by hand is not trusted: produce it with the pairedge command that makes it, or "
                "register it with pairedge.core.modelfolder.register_files(folder, {name: role})"
            )
        _verify_entry(path, entry)
    return manifest


def _verify_entry(folder: Path, entry: FileEntry) -> None:
    """Check one listed file: inside the folder, a regular file, then its size, then its SHA-256."""
    file = folder / entry.name
    if not os.path.lexists(file):
        raise ModelIntegrityError(f"{file}: listed in the manifest (role {entry.role!r}) but missing; {_FIX}")
    inside_folder(folder, entry.name)
    expected = f"the file the manifest lists (role {entry.role!r})"
    try:
        size = limits.regular_file(file, expected)
        if size != entry.size:  # no need to hash a file of the wrong size (it may be huge)
            raise ModelIntegrityError(
                f"{file}: does not match the manifest (expected SHA-256 {entry.sha256}, {entry.size} bytes; "
                f"got {size} bytes): the file is corrupt or was modified; {_FIX}"
            )
        digest = sha256_file(file, expected)
    except FormatError as exc:
        raise ModelIntegrityError(f"{exc}; {_FIX}") from None
    if digest != entry.sha256:
        raise ModelIntegrityError(
            f"{file}: does not match the manifest (expected SHA-256 {entry.sha256}, {entry.size} bytes; got "
            f"{digest}, {size} bytes): the file is corrupt or was modified; {_FIX}"
        )


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple | list) else value


def summary_mismatches(manifest: Manifest, source: Path, actual: Mapping[str, Any]) -> list[str]:
    """How the manifest's summary disagrees with ``actual`` (some of ``feature_spec``,
    ``feature_spec_version``, ``labels``, ``thresholds`` as the models' metadata gives them), one line each.

    ``source``: the manifest file, for the message. Fields absent from ``actual`` are not compared.
    """
    out = []
    for key, what in (
        ("feature_spec", "feature spec"),
        ("feature_spec_version", "feature spec version"),
        ("labels", "labels"),
        ("thresholds", "thresholds"),
    ):
        if key not in actual:
            continue
        have, want = getattr(manifest, key), actual[key]
        have, want = (dict(have), dict(want)) if key == "thresholds" else (_plain(have), _plain(want))
        if have != want:
            out.append(
                f"{source}: records {what} {have!r}, the models' metadata says {want!r}; the manifest was "
                "edited or belongs to another model: re-export the model (`pairedge export`) or re-register "
                "its files (pairedge.core.modelfolder.register_files)"
            )
    return out


def summary_problems(folder: str | Path, manifest: Manifest) -> list[str]:
    """How the manifest's summary (spec, version, labels, thresholds) disagrees with the metadata of the
    fp32 ``stage1.onnx`` / ``stage2.onnx`` it describes (one line each; empty when they agree).

    The runtime trusts the ONNX metadata; a manifest that says otherwise was edited or is stale.

    Raises:
        ModelError: a stage file is not a readable ONNX model.
    """
    path = _folder(folder)
    if not any(os.path.lexists(path / name) for name in STAGE_FILES.values()):
        return []  # nothing to compare with (the missing stage files are reported by whoever needs them)
    return summary_mismatches(manifest, path / MANIFEST_NAME, _summary(path))
