"""What this machine can run from a model folder (``pairedge doctor --model FOLDER``).

A model folder (SPEC section 5) grows with every deployment step: ``stage{1,2}.onnx`` from export,
``stage{1,2}.{fp16,int8}.onnx`` from calibrate, ``engines/<device>-<cc>-trt<version>/stage{1,2}.<p>.engine``
with their engine manifests from build (the names, and which backends run them, of
:mod:`pairedge.core.artefacts`). :func:`inspect_model_folder` answers, for every precision and
classifier backend, "does it run here, and if not, why not", with the checks the runtime itself makes
when it loads them (:func:`pairedge.runtime.loading.find_models`: manifest hashes, stale calibrated files,
metadata; engine manifests: TensorRT version, compute capability, source ONNX hash, engine hash), plus a
real inference for every ONNX Runtime option that loads: batches of 1, 64 and 512 pairs (the default build
profile) of realistic features, drawn from each model's own normalisation statistics, whose logits must come
back finite and of the right shape. It never raises for a broken file: the problem becomes the option's
reason, and a file that is broken (listed but unloadable, failing on realistic rows on the CPU, a manifest
that disagrees with the ONNX metadata, a stage file that is a symlink out of the folder) is also one of the
report's ``problems`` (``pairedge doctor --model`` exits 1). Nothing here imports torch or TensorRT unless
TensorRT is installed.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.apps.probe import cuda_devices
from pairedge.core import artefacts, limits
from pairedge.core.errors import ModelError, ModelIntegrityError, PairedgeError
from pairedge.core.modelfolder import (
    MANIFEST_NAME,
    inside_folder,
    read_manifest,
    sha256_file,
    summary_problems,
    verify_files,
)
from pairedge.runtime.backends.registry import backend_class
from pairedge.runtime.backends.tensorrt_loader import (
    EngineEnvironment,
    EngineManifest,
    check_compatible,
    manifest_path,
    read_verified_engine,
)
from pairedge.runtime.flow import available_flow_backends
from pairedge.runtime.loading import find_models, spec_uses_flow

#: Backends tried for every precision whose ONNX files are present: the table's ONNX backends.
ORT_BACKENDS = artefacts.ONNX_BACKENDS
#: The backend whose failure on realistic rows means the file itself is broken (not a provider limitation).
REFERENCE_BACKEND = "onnxruntime"
#: Batch sizes of the realistic inference: one pair, and the default build profile's opt / max (1, 64, 512).
BATCH_SIZES = (1, 64, 512)


@dataclass(frozen=True)
class RunOption:
    """One way to run the folder's models.

    Attributes:
        precision: "fp32", "fp16" or "int8".
        backend: the classifier backend name, for engines ``tensorrt (<engine folder>)``.
        files: the files this option needs, relative to the model folder.
        reason: None when it runs here, else why not (one line, with the fix where there is one).
    """

    precision: str
    backend: str
    files: tuple[str, ...]
    reason: str | None = None

    @property
    def runs(self) -> bool:
        return self.reason is None


@dataclass(frozen=True)
class FolderReport:
    """The answer for one model folder.

    Attributes:
        folder: the model folder (absolute).
        integrity: how the folder's files were checked against its ``manifest.json`` (or why they could not
            be).
        model: feature spec, version, labels and mode of the fp32 models ("" when they do not load).
        flow: the optical-flow backend the features need and whether it runs here (None: no flow needed).
        options: every (precision, backend) pair, runnable or not.
        problems: broken files (hash mismatches, unreadable engine manifests), one line each.
    """

    folder: Path
    integrity: str
    model: str
    flow: str | None
    options: tuple[RunOption, ...]
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def runnable(self) -> tuple[RunOption, ...]:
        return tuple(o for o in self.options if o.runs)

    def summary(self) -> str:
        """One line: what runs here, or that nothing does."""
        if not self.runnable:
            return "nothing in this folder runs on this machine"
        by_backend: dict[str, list[str]] = {}
        for o in self.runnable:
            by_backend.setdefault(o.backend, []).append(o.precision)
        return "runs here: " + "; ".join(f"{', '.join(p)} on {b}" for b, p in by_backend.items())

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["folder"] = str(self.folder)
        out["summary"] = self.summary()
        return out


@dataclass(frozen=True)
class LocalGpu:
    """What the engine checks compare against: the TensorRT version and the first GPU (None: absent).

    ``tensorrt_reason`` / ``gpu_reason`` say why one is missing."""

    tensorrt_version: str | None
    device_name: str | None
    compute_capability: str | None
    tensorrt_reason: str = ""
    gpu_reason: str = ""


def local_gpu() -> LocalGpu:
    """Probe TensorRT (imported only when installed) and the first CUDA device (through libcuda)."""

    trt_version, trt_reason = None, ""
    try:
        from pairedge.gpu.tensorrt import load_tensorrt

        trt_version = str(load_tensorrt().__version__)
    except ImportError as exc:
        trt_reason = str(exc)
    devices, gpu_reason = cuda_devices()
    name, cc = devices[0] if devices else (None, None)
    return LocalGpu(trt_version, name, cc, trt_reason, gpu_reason or "")


def inspect_model_folder(folder: str | Path, gpu: LocalGpu | None = None) -> FolderReport:
    """Every (precision, backend) option of ``folder`` and whether it runs here.

    Args:
        folder: a model folder.
        gpu: the local TensorRT / GPU to judge engines against (None: probe this machine).

    Raises:
        ModelError: ``folder`` is not a directory (everything else is reported, not raised).
    """

    path = Path(folder).expanduser().absolute()
    if not path.is_dir():
        raise ModelError(
            f"{folder}: not a model folder (expected a directory with "
            f"{' and '.join(artefacts.stage_files())})"
        )
    integrity, problems = _integrity(path)
    # a backend this machine lacks is one row ("all" precisions), not one per precision
    absent = {b: r for b in ORT_BACKENDS if (r := backend_class(b).unavailable_reason()) is not None}
    options = [RunOption("all", b, (), r) for b, r in absent.items()]
    model, flow = "", None
    for precision in artefacts.PRECISIONS:
        names = artefacts.stage_files(precision)
        if not any(os.path.lexists(path / n) for n in names):
            how = artefacts.artefact(1, precision).made_by
            options.append(RunOption(precision, "-", names, f"not in the folder (`{how}` writes it)"))
            continue
        pair, reason = _load(path, precision)
        if reason is not None and not any(reason in known for known in problems):
            problems.append(f"{precision}: {reason}")  # present (or half present) but not loadable: broken
        if pair is not None and precision == "fp32":
            model, flow = _describe(pair)
        for backend in (b for b in ORT_BACKENDS if b not in absent):
            why = reason or _ort_reason(backend, pair)
            if reason is None and why is not None and backend == REFERENCE_BACKEND:
                problems.append(f"{precision}: fails on realistic features on {backend}: {why}")
            options.append(RunOption(precision, backend, names, why))
    engine_options, engine_problems = _engines(path, gpu)
    return FolderReport(
        path, integrity, model, flow, tuple(options + engine_options), tuple(problems + engine_problems)
    )


def _integrity(path: Path) -> tuple[str, list[str]]:

    try:
        manifest = read_manifest(path)
    except PairedgeError as exc:
        return f"unreadable {MANIFEST_NAME}", [str(exc)]
    if manifest is None:
        return (
            f"unverified: no {MANIFEST_NAME} (exported before manifests); re-export with `pairedge export` "
            "to record SHA-256 hashes"
        ), []
    # engines (often large) are hashed once, against their own engine manifests, in _engine_reason
    names = [n for n, entry in manifest.files.items() if entry.role != artefacts.ENGINE_ROLE]
    try:
        verify_files(path, names)
    except ModelIntegrityError as exc:
        return f"FAILED: a file does not match {MANIFEST_NAME}", [str(exc)]
    try:
        mismatch = summary_problems(path, manifest)
    except PairedgeError as exc:  # an unreadable stage file: its own row says why
        mismatch = [str(exc)]
    if mismatch:
        return f"FAILED: {MANIFEST_NAME} disagrees with the models' metadata", mismatch
    return f"verified: {len(names)} files match the SHA-256 in {MANIFEST_NAME} (engines: below)", []


def _load(path: Path, precision: str) -> tuple[Any, str | None]:
    """The checked model pair of ``precision`` (or None) and why it does not load."""

    try:
        return find_models(path, precision), None
    except PairedgeError as exc:
        return None, str(exc)


def _describe(pair: Any) -> tuple[str, str | None]:
    """The fp32 models' spec line and the flow backend they need (None: box-only / no flow)."""

    meta, spec = pair.stage2.metadata, pair.stage2.spec
    try:
        config = pair.feature_config()
    except PairedgeError as exc:
        return f"{meta.feature_spec} v{meta.feature_spec_version}: {exc}", None
    mode = "flow" if spec_uses_flow(spec, config) else "box-only"
    model = (
        f"{meta.feature_spec} v{meta.feature_spec_version}, {mode}, stage 1 {pair.stage1.num_features} / "
        f"stage 2 {pair.stage2.num_features} features, labels {', '.join(meta.labels)}"
    )
    if mode == "box-only":
        return model, None
    name = spec.flow_backend
    reason = available_flow_backends().get(name, f"{name!r} is not a registered flow backend")
    return model, f"{name}: " + ("runs here" if reason is None else f"not usable ({reason})")


def realistic_rows(model: Any, n: int, seed: int = 0) -> np.ndarray:
    """(n, F) float32 features like real frames give ``model``: each column drawn around the training data's
    mean with its standard deviation (the normalisation statistics in the model's metadata)."""
    meta = model.metadata
    mean = np.asarray(meta.norm_mean, np.float64)
    std = np.asarray(meta.norm_std, np.float64)
    z = np.random.default_rng(seed).standard_normal((n, len(mean)))
    return (mean + std * np.clip(z, -3.0, 3.0)).astype(np.float32)


def _ort_reason(backend: str, pair: Any) -> str | None:
    """None when both stages run realistic batches of :data:`BATCH_SIZES` pairs on ``backend`` with finite
    logits; else why not (one line)."""

    cls = backend_class(backend)
    for model in (pair.stage1, pair.stage2):
        rows = realistic_rows(model, max(BATCH_SIZES), seed=model.metadata.stage)
        try:
            with cls(model) as session:
                for n in BATCH_SIZES:
                    logits = session.infer(rows[:n])
                    bad = int((~np.isfinite(logits)).any(axis=1).sum())
                    if bad:
                        return (
                            f"{model.path.name}: NaN or inf logits for {bad} of {n} pairs of realistic "
                            "features; the model is broken: re-export or re-calibrate it"
                        )
        except Exception as exc:  # a provider that loads but cannot run this graph: report, never crash
            line = f"{type(exc).__name__}: {exc}".splitlines()[0]
            return f"{model.path.name} on a batch of realistic features: {line}"
    return None


def _engines(path: Path, gpu: LocalGpu | None) -> tuple[list[RunOption], list[str]]:
    """One option per (engine folder, precision) with both stages' engines judged against ``gpu``."""
    root = path / artefacts.ENGINES_DIR
    if not root.is_dir():
        why = (
            f"no {artefacts.ENGINES_DIR}/ folder: `pairedge build` makes the engines on the device "
            "(TensorRT and a GPU)"
        )
        return [RunOption("all", "tensorrt", (), why)], []
    gpu = gpu if gpu is not None else local_gpu()
    options: list[RunOption] = []
    problems: list[str] = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        # the precisions with an engine file of the table here (other files are no stage's engines)
        found = [
            p
            for p in artefacts.PRECISIONS
            if any(os.path.lexists(sub / a.engine) for a in artefacts.stage_artefacts(p))
        ]
        for precision in sorted(found):
            files = tuple(a.engine_path(sub.name) for a in artefacts.stage_artefacts(precision))
            reasons = [
                r
                for r in (
                    _engine_reason(path, path / f, s, gpu, problems)
                    for s, f in zip(artefacts.STAGES, files, strict=True)
                )
                if r
            ]
            options.append(RunOption(precision, f"tensorrt ({sub.name})", files, "; ".join(reasons) or None))
    return options, problems


def _engine_reason(folder: Path, engine: Path, stage: int, gpu: LocalGpu, problems: list[str]) -> str | None:
    """Why ``engine`` cannot run here (None: it can), with the checks the TensorRT backend makes first."""

    if not os.path.lexists(engine):
        return f"{engine.name} missing"
    try:
        for file in (engine, manifest_path(engine)):
            inside_folder(folder, file.relative_to(folder).as_posix())
        manifest = EngineManifest.read(engine)
        read_verified_engine(engine, manifest)
    except PairedgeError as exc:
        problems.append(str(exc))
        return f"{engine.name}: broken (see problems)"
    if manifest.stage != stage:
        return f"{engine.name}: its manifest says stage {manifest.stage}"
    source = str(manifest.onnx.get("file", ""))
    if not source or not os.path.lexists(folder / source):
        return f"{engine.name}: built from {source!r}, which is not in the folder"
    try:
        onnx_file = inside_folder(folder, source)
        onnx_sha256 = sha256_file(onnx_file, "the ONNX file an engine was built from", limits.MAX_MODEL_BYTES)
    except (PairedgeError, ValueError) as exc:
        problems.append(f"{engine}: its manifest's ONNX file {source!r}: {exc}")
        return f"{engine.name}: broken (see problems)"
    if gpu.tensorrt_version is None or gpu.compute_capability is None:
        missing = [x for x in (gpu.tensorrt_reason, gpu.gpu_reason) if x]
        return (
            f"built for {manifest.device_name} (compute capability {manifest.compute_capability}, TensorRT "
            f"{manifest.tensorrt_version}); this machine: " + "; ".join(missing)
        )
    env = EngineEnvironment(gpu.tensorrt_version, "", gpu.device_name or "", gpu.compute_capability)
    try:
        check_compatible(manifest, env, onnx_sha256=onnx_sha256, model_dir=folder, engine=engine)
    except PairedgeError as exc:
        return str(exc)
    return None
