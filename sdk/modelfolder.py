"""The model folder a robot team ships as a unit, and its ``manifest.json`` (SPEC section 5).

Every deployment step adds files to one folder and records them in its manifest::

    manifest.json                      pairedge version, feature spec + version, labels, thresholds,
                                       and for every file: name, role, SHA-256, size
    stage1.onnx, stage2.onnx           fp32 classifiers (roles "stage1", "stage2"; from `pairedge export`)
    stage1.fp16.onnx, stage2.int8.onnx ... (roles "stage1.fp16", "stage2.int8", ...; from `pairedge calibrate`)
    calibration.json                   (role "calibration")
    engines/<device>-<cc>-trt<ver>/stage1.int8.engine  (role "engine"; from `pairedge build`)

File names in the manifest are POSIX paths relative to the folder; names that leave the folder (absolute,
``..``) are refused. :func:`verify_files` re-hashes files and raises :class:`ModelIntegrityError` naming
the file, the expected and actual SHA-256 and how to fix it. The summary fields (spec, labels, thresholds)
are read from the metadata of ``stage1.onnx`` / ``stage2.onnx`` whenever the manifest is written, so they
always describe the fp32 models in the folder.

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

from pairedge.errors import InputError, ModelError, ModelIntegrityError

MANIFEST_NAME = "manifest.json"
#: Version of the manifest's own layout (not of pairedge).
MANIFEST_FORMAT = 1
#: Canonical file name of each fp32 stage; precision variants are ``stage{n}.{precision}.onnx``.
STAGE_FILES = {"stage1": "stage1.onnx", "stage2": "stage2.onnx"}
_CHUNK = 1 << 20

__all__ = [
    "MANIFEST_NAME",
    "FileEntry",
    "Manifest",
    "ModelIntegrityError",
    "read_manifest",
    "register_files",
    "sha256_file",
    "verify_files",
    "write_manifest",
]

_FIX = (
    "copy the model folder again from its source; if you changed the file on purpose, re-export it "
    "(`pairedge export` / `pairedge calibrate` update the manifest) or re-register it with "
    "pairedge.modelfolder.register_files(folder, {name: role})"
)


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB chunks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class FileEntry:
    """One file of a model folder.

    Attributes:
        name: POSIX path relative to the folder (``stage1.onnx``, ``engines/orin-8.7-trt10.3/stage1.int8.engine``).
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
        try:
            text = file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ModelError(f"{file}: no model manifest here") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ModelError(
                f"{file}: cannot read the model manifest ({type(exc).__name__}: {exc})"
            ) from None
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
            f"'format': expected an integer 1..{MANIFEST_FORMAT} (newer manifests need a newer pairedge), got {fmt!r}"
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
    if not file.is_file():
        raise ModelError(f"{file}: cannot register a file that does not exist (role {role!r})")
    return FileEntry(name=safe, role=role, sha256=sha256_file(file), size=file.stat().st_size)


def _summary(folder: Path) -> dict[str, Any]:
    """Spec, labels and thresholds from the fp32 stage files' metadata (empty when absent)."""
    import onnx
    from pairedge import __version__
    from pairedge.modelmeta import ModelMetadata

    metas = {}
    for role, name in STAGE_FILES.items():
        file = folder / name
        if file.is_file():
            try:
                proto = onnx.load(str(file), load_external_data=False)
            except Exception as exc:  # protobuf raises its own DecodeError types
                raise ModelError(f"{file}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None
            props = {p.key: p.value for p in proto.metadata_props}
            metas[role] = ModelMetadata.from_props(props, source=str(file))
    first = metas.get("stage1") or metas.get("stage2")
    thresholds: dict[str, float] = {}
    for role in ("stage2", "stage1"):  # stage 1 wins, as in ModelPair.threshold
        if role in metas:
            thresholds.update({k: float(v) for k, v in metas[role].thresholds.items()})
    return {
        "pairedge_version": __version__,
        "feature_spec": first.feature_spec if first else "",
        "feature_spec_version": first.feature_spec_version if first else "",
        "labels": metas["stage2"].labels if "stage2" in metas else (),
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
    if not file.exists():
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
            "`pairedge export` (which writes it) or create it with pairedge.modelfolder.write_manifest"
        )
    wanted = sorted(manifest.files) if names is None else [_safe_name(n) for n in names]
    for name in wanted:
        entry = manifest.files.get(name)
        file = path / name
        if entry is None:
            raise ModelIntegrityError(
                f"{file}: not listed in {path / MANIFEST_NAME} (listed: {', '.join(sorted(manifest.files)) or 'none'}); "
                "a file added by hand is not trusted: produce it with the pairedge command that makes it, or "
                "register it with pairedge.modelfolder.register_files(folder, {name: role})"
            )
        if not file.is_file():
            raise ModelIntegrityError(
                f"{file}: listed in the manifest (role {entry.role!r}) but missing; {_FIX}"
            )
        size = file.stat().st_size
        digest = sha256_file(file)
        if size != entry.size or digest != entry.sha256:
            raise ModelIntegrityError(
                f"{file}: does not match the manifest (expected SHA-256 {entry.sha256}, {entry.size} bytes; got "
                f"{digest}, {size} bytes): the file is corrupt or was modified; {_FIX}"
            )
    return manifest
