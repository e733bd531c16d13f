"""The engine manifest: a JSON file beside every serialized engine, and the checks that refuse mismatches.

A TensorRT engine is only valid for the TensorRT version and the GPU (compute capability) that built it,
and only describes the ONNX file it was built from. ``stage1.fp16.engine`` comes with
``stage1.fp16.engine.json`` (both names from :mod:`pairedge.core.artefacts`)::

    {"format": 1, "pairedge_version": "0.1.0", "stage": 1, "precision": "fp16",
     "tensorrt_version": "10.3.0.30", "cuda_version": "12.6", "device_name": "Orin",
     "compute_capability": "8.7", "profile": {"min": 1, "opt": 64, "max": 512},
     "onnx": {"file": "stage1.fp16.onnx", "sha256": "...", "size": 12345},
     "calibration": {"file": "calibration.json", "sha256": "..."} | null,
     "engine": {"file": "stage1.fp16.engine", "sha256": "...", "size": 67890},
     "labels": [...], "feature_spec": "pairedge", "feature_spec_version": "1", "num_features": 25,
     "input_name": "features", "output_name": "logits", "dla_core": null, "gpu_fallback": false,
     "build": {"built_at": "2026-...Z", "seconds": 12.3, "workspace_mib": 1024, "generation": "...",
               "network_flags": 2, "builder_flags": ["FP16"], "timing_cache": "...", "timing_cache_bytes": 0}}

Before any deserialisation the loader checks, in this order: the manifest reads (a regular file within
:data:`pairedge.core.limits.MAX_SIDECAR_BYTES`, its fields of the right JSON types); the running TensorRT
version, the device's compute capability and the ONNX file's SHA-256 match (all differences are listed,
with the exact ``pairedge build`` command that rebuilds the engine); the engine file's size and SHA-256 match
(a truncated or corrupt file never reaches ``deserialize_cuda_engine``).

A DLA engine (``pairedge build --dla-core N``) records ``"dla_core": N`` (``null``: a GPU engine; manifests
written before the field existed read as GPU engines) and whether layers may fall back to the GPU; it lives
in its own folder ``<device>-sm<cc>-trt<version>-dla<N>`` (:func:`engine_folder`). A runner that asks for
another DLA core (or the GPU) than the manifest records is refused with the rebuild command.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core import limits
from pairedge.core.artefacts import ENGINE_MANIFEST_SUFFIX
from pairedge.core.errors import BackendError, FormatError, ModelError
from pairedge.core.modelfolder import sha256_file  # noqa: F401  (re-exported: engine manifests hash with it)

FORMAT = 1


class EngineMismatchError(ModelError):
    """The engine was built for another TensorRT version, GPU, or ONNX file. The message says how to
    rebuild."""


class EngineFileError(ModelError):
    """The engine or its manifest is missing, unreadable, truncated or corrupt."""


def slug(text: str) -> str:
    """``"NVIDIA Jetson AGX Orin"`` -> ``"nvidia-jetson-agx-orin"`` (folder-safe)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


def device_tag(device_name: str, compute_capability: str, tensorrt_version: str) -> str:
    """The engine folder name ``<device>-sm<cc>-trt<version>``, e.g. ``orin-sm87-trt10.3.0``."""
    short = ".".join(tensorrt_version.split(".")[:3])
    return f"{slug(device_name)}-sm{compute_capability.replace('.', '')}-trt{short}"


def engine_folder(tag: str, dla_core: int | None) -> str:
    """The engine folder of a device tag: ``tag`` for GPU engines, ``tag-dla<N>`` for DLA core N's."""
    return tag if dla_core is None else f"{tag}-dla{dla_core}"


#: ``check_compatible(dla_core=ANY_DEVICE)``: accept the engine's device (GPU or any DLA core) as recorded.
ANY_DEVICE = "any"


def manifest_path(engine: Path) -> Path:
    """``stage1.fp16.engine`` -> ``stage1.fp16.engine.json``."""
    return engine.with_name(engine.name + ENGINE_MANIFEST_SUFFIX)


@dataclass(frozen=True)
class EngineEnvironment:
    """What the running machine offers: an engine must have been built for exactly this.

    Attributes:
        tensorrt_version: ``tensorrt.__version__``, e.g. "10.3.0.30".
        cuda_version: CUDA runtime version, "major.minor".
        device_name: the GPU's name as CUDA reports it ("Orin").
        compute_capability: "major.minor", e.g. "8.7".
    """

    tensorrt_version: str
    cuda_version: str
    device_name: str
    compute_capability: str

    @property
    def tag(self) -> str:
        return device_tag(self.device_name, self.compute_capability, self.tensorrt_version)


@dataclass(frozen=True)
class EngineManifest:
    """Contents of an engine manifest (see the module docstring for the JSON layout)."""

    stage: int
    precision: str
    tensorrt_version: str
    cuda_version: str
    device_name: str
    compute_capability: str
    profile: Mapping[str, int]
    onnx: Mapping[str, Any]
    engine: Mapping[str, Any]
    labels: tuple[str, ...]
    feature_spec: str
    feature_spec_version: str
    num_features: int
    input_name: str = "features"
    output_name: str = "logits"
    calibration: Mapping[str, Any] | None = None
    build: Mapping[str, Any] = field(default_factory=dict)
    pairedge_version: str = ""
    dla_core: int | None = None
    gpu_fallback: bool = False
    format: int = FORMAT

    # -- files --------------------------------------------------------------------------------------------
    def to_json(self) -> str:
        data = asdict(self)
        data["labels"] = list(self.labels)
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    def write(self, engine: Path) -> Path:
        """Write beside ``engine``; returns the manifest path."""
        path = manifest_path(engine)
        path.write_text(self.to_json(), encoding="utf-8")
        return path

    @classmethod
    def read(cls, engine: Path) -> EngineManifest:
        """Read the manifest of ``engine`` (``<engine>.json``).

        Raises:
            EngineFileError: missing, not JSON, another format, or missing keys.
        """
        path, data = read_manifest_json(engine)
        if data.get("kind", "classifier") != "classifier":
            raise EngineFileError(
                f"{path}: a {data.get('kind')!r} engine, not a classifier stage; a detector engine runs with "
                "`pairedge run VIDEO --detector ENGINE`"
            )
        known = set(cls.__dataclass_fields__)
        missing = sorted(k for k, f in cls.__dataclass_fields__.items() if k not in data and _required(f))
        if missing:
            raise EngineFileError(
                f"{path}: engine manifest lacks {', '.join(missing)}; rebuild with `pairedge build`"
            )
        values = {k: v for k, v in data.items() if k in known}
        _check_types(path, values)
        values["labels"] = tuple(values["labels"])
        return cls(**values)

    # -- commands -----------------------------------------------------------------------------------------
    def rebuild_command(self, model_dir: Path | str, *, dla_core: int | None | str = ANY_DEVICE) -> str:
        """The exact ``pairedge build`` command that rebuilds this engine from ``model_dir`` (for
        ``dla_core``: None the GPU, N DLA core N; :data:`ANY_DEVICE`: the device the manifest records)."""
        p = self.profile
        parts = [
            "pairedge",
            "build",
            str(model_dir),
            "--precision",
            self.precision,
            "--profile",
            f"{p['min']},{p['opt']},{p['max']}",
        ]
        if self.build.get("workspace_mib"):
            parts += ["--workspace", str(self.build["workspace_mib"])]
        core = self.dla_core if dla_core == ANY_DEVICE else dla_core
        return shlex.join(parts + dla_arguments(core, self.gpu_fallback))  # type: ignore[arg-type]

    @property
    def device_label(self) -> str:
        """``"the GPU"`` or ``"DLA core N"``."""
        return device_label(self.dla_core)


def device_label(dla_core: int | None) -> str:
    """``"the GPU"`` (None) or ``"DLA core N"``."""
    return "the GPU" if dla_core is None else f"DLA core {dla_core}"


def dla_arguments(dla_core: int | None, gpu_fallback: bool) -> list[str]:
    """The ``pairedge build`` arguments of a device: ``[]``, ``["--dla-core", "N"]`` (+
    ``--gpu-fallback``)."""
    if dla_core is None:
        return []
    return ["--dla-core", str(dla_core), *(["--gpu-fallback"] if gpu_fallback else [])]


#: field -> (accepted types, what the message calls it) of the engine manifest's fields the checks use.
_TYPES: Mapping[str, tuple[tuple[type, ...], str]] = {
    "stage": ((int,), "an integer"),
    "precision": ((str,), "a string"),
    "tensorrt_version": ((str,), "a string"),
    "cuda_version": ((str,), "a string"),
    "device_name": ((str,), "a string"),
    "compute_capability": ((str,), "a string"),
    "profile": ((dict,), "an object"),
    "onnx": ((dict,), "an object"),
    "engine": ((dict,), "an object"),
    "labels": ((list,), "a list of strings"),
    "num_features": ((int,), "an integer"),
    "calibration": ((dict, type(None)), "an object or null"),
    "build": ((dict,), "an object"),
    "dla_core": ((int, type(None)), "a DLA core index or null"),
}


def _check_types(path: Path, values: Mapping[str, Any]) -> None:
    """Refuse an engine manifest whose fields have the wrong JSON types (before any check reads them)."""
    for key, (types, what) in _TYPES.items():
        if key in values and (not isinstance(values[key], types) or isinstance(values[key], bool)):
            raise EngineFileError(
                f"{path}: {key!r}: expected {what}, got {values[key]!r}; rebuild with `pairedge build`"
            )
    if not isinstance(values.get("gpu_fallback", False), bool):
        raise EngineFileError(
            f"{path}: 'gpu_fallback': expected true or false, got {values['gpu_fallback']!r}; rebuild with "
            "`pairedge build`"
        )
    core = values.get("dla_core")
    if isinstance(core, int) and core < 0:
        raise EngineFileError(f"{path}: 'dla_core': expected an index >= 0 or null, got {core}")
    if not all(isinstance(v, str) for v in values.get("labels", [])):
        raise EngineFileError(f"{path}: 'labels': expected a list of strings; rebuild with `pairedge build`")
    size = values.get("engine", {}).get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise EngineFileError(
            f"{path}: 'engine.size': expected a byte count, got {size!r}; rebuild with `pairedge build`"
        )


def read_manifest_json(engine: Path) -> tuple[Path, dict[str, Any]]:
    """``(manifest path, its JSON object)`` of ``engine``: bounded read, format checked (any engine kind).

    Raises:
        EngineFileError: missing, unreadable, not a JSON object, or another format.
    """
    path = manifest_path(engine)
    if not path.exists():
        raise EngineFileError(
            f"{path}: engine manifest not found beside {engine.name}; an engine without its manifest cannot "
            "be checked — rebuild it with `pairedge build`"
        )
    try:
        data = json.loads(
            limits.read_text(path, "an engine manifest (.engine.json)", limits.MAX_SIDECAR_BYTES)
        )
    except FormatError as exc:
        raise EngineFileError(f"not a readable engine manifest: {exc}") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, integers beyond int()'s digit limit
        raise EngineFileError(f"{path}: not a readable engine manifest ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise EngineFileError(f"{path}: expected engine manifest format {FORMAT}, got {got!r}")
    return path, data


def check_device_fields(path: Path, values: Mapping[str, Any]) -> None:
    """Refuse wrong JSON types in the fields every engine manifest shares (versions, device, files, DLA).

    Raises:
        EngineFileError: naming the field.
    """
    _check_types(path, {k: v for k, v in values.items() if k in _SHARED})


#: The fields of :data:`_TYPES` that detector engine manifests share with the classifier's.
_SHARED = (
    "precision",
    "tensorrt_version",
    "cuda_version",
    "device_name",
    "compute_capability",
    "onnx",
    "engine",
    "build",
    "dla_core",
    "gpu_fallback",
)


def _required(f: Any) -> bool:
    from dataclasses import MISSING

    return f.default is MISSING and f.default_factory is MISSING


def check_compatible(
    manifest: EngineManifest,
    env: EngineEnvironment,
    *,
    onnx_sha256: str | None,
    model_dir: Path,
    engine: Path,
    dla_core: int | None | str = ANY_DEVICE,
) -> None:
    """Refuse an engine built for another TensorRT, GPU, ONNX file, or DLA core.

    Args:
        onnx_sha256: SHA-256 of the ONNX file in the model folder this engine must come from (None: skip).
        model_dir: the model folder, for the rebuild command.
        engine: the engine path, for the message.
        dla_core: the device the caller will run it on: None the GPU, N DLA core N; :data:`ANY_DEVICE`
            (the default, for reports that only list engines): whatever the manifest records.

    Raises:
        EngineMismatchError: listing every difference and the rebuild command.
    """
    diffs: list[str] = []
    if manifest.tensorrt_version != env.tensorrt_version:
        diffs.append(
            f"TensorRT {manifest.tensorrt_version} built it, this machine runs {env.tensorrt_version}"
        )
    if manifest.compute_capability != env.compute_capability:
        diffs.append(
            f"built for compute capability {manifest.compute_capability} ({manifest.device_name}), this GPU "
            f"is {env.compute_capability} ({env.device_name})"
        )
    if onnx_sha256 is not None and manifest.onnx.get("sha256") != onnx_sha256:
        diffs.append(
            f"built from {manifest.onnx.get('file')} with SHA-256 {str(manifest.onnx.get('sha256'))[:12]}…, "
            f"the model folder's file has {onnx_sha256[:12]}… (the model changed since the build)"
        )
    wanted = manifest.dla_core if dla_core == ANY_DEVICE else dla_core
    if wanted != manifest.dla_core:
        requested = device_label(wanted)  # type: ignore[arg-type]
        diffs.append(f"built for {device_label(manifest.dla_core)}, requested for {requested}")
    if diffs:
        raise EngineMismatchError(
            f"{engine}: refusing this engine: {'; '.join(diffs)}. Rebuild it on this device with: "
            f"{manifest.rebuild_command(model_dir, dla_core=wanted)}"
        )


def read_verified_engine(engine: Path, manifest: EngineManifest) -> bytes:
    """The engine's bytes, after checking size and SHA-256 against the manifest (never deserialise garbage).

    Raises:
        EngineFileError: missing, not a regular file (a FIFO or a device is never opened), above
            :data:`pairedge.core.limits.MAX_ENGINE_BYTES`, truncated, grown, or corrupt file.
    """
    if not engine.exists():
        raise EngineFileError(f"{engine}: engine file not found; build it with `pairedge build`")
    expected_size = int(manifest.engine.get("size", -1))
    try:
        size = limits.regular_file(engine, "a serialized TensorRT engine", limits.MAX_ENGINE_BYTES)
        if size != expected_size:
            what = "truncated" if size < expected_size else "larger than recorded"
            raise EngineFileError(
                f"{engine}: engine file is {what} ({size} bytes, the manifest records {expected_size}); copy "
                "it again from the build machine or rebuild with `pairedge build`"
            )
        blob = limits.read_bytes(engine, "a serialized TensorRT engine", expected_size)
    except FormatError as exc:
        raise EngineFileError(
            f"{exc}; copy it again from the build machine or rebuild with `pairedge build`"
        ) from None
    digest = hashlib.sha256(blob).hexdigest()
    if digest != manifest.engine.get("sha256"):
        raise EngineFileError(
            f"{engine}: engine file is corrupt (SHA-256 {digest[:12]}…, the manifest records "
            f"{str(manifest.engine.get('sha256'))[:12]}…); copy it again or rebuild with `pairedge build`"
        )
    return blob


def environment(trt: Any, memory: Any) -> EngineEnvironment:
    """The running TensorRT + GPU (``memory``: a :class:`~pairedge.runtime.backends.cudamem.CudaMemory`)."""
    info = memory.device_info()
    return EngineEnvironment(
        tensorrt_version=str(trt.__version__),
        cuda_version=info.cuda_version,
        device_name=info.name,
        compute_capability=info.compute_capability,
    )


#: TensorRT tensor types pairedge binds, by ``trt.DataType`` member name.
NUMPY_DTYPES = {
    "FLOAT": np.float32,
    "HALF": np.float16,
    "INT32": np.int32,
    "INT64": np.int64,
    "INT8": np.int8,
}


def tensor_dtype(trt: Any, engine: Any, name: str) -> Any:
    """The numpy dtype of an engine's I/O tensor ``name``; BackendError for a type pairedge does not bind."""
    dt = engine.get_tensor_dtype(name)
    for key, np_type in NUMPY_DTYPES.items():
        if dt == getattr(trt.DataType, key, None):
            return np_type
    raise BackendError(f"engine tensor {name!r} has TensorRT type {dt}, which pairedge does not bind")
