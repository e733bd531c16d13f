"""``pairedge build``: both stages of a model folder -> engines + engine manifests, registered in the folder.

Layout (SPEC section 5)::

    MODEL_DIR/stage{1,2}.onnx | stage{1,2}.fp16.onnx | stage{1,2}.int8.onnx (+ calibration.json)
    MODEL_DIR/engines/<device>-sm<cc>-trt<version>/stage{1,2}.<precision>.engine
                                                  /stage{1,2}.<precision>.engine.json   (engine manifest)
    MODEL_DIR/engines/<device>-sm<cc>-trt<version>-dla<N>/...     (--dla-core N: DLA engines apart)

Both engine files and their manifests are registered in ``MODEL_DIR/manifest.json`` (role "engine" /
"engine-manifest") so the folder a robot team copies stays verifiable. Every name and role here is
:mod:`pairedge.core.artefacts`'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pairedge.core import artefacts
from pairedge.core.errors import ModelError
from pairedge.core.modelfolder import register_files
from pairedge.core.version import __version__
from pairedge.export.tensorrt.builder import BuildOutput, BuildSettings, build_record, build_serialized
from pairedge.export.tensorrt.engine_files import build_environment, file_record, write_engine
from pairedge.export.tensorrt.progress import ProgressSink
from pairedge.gpu.tensorrt import load_tensorrt
from pairedge.runtime.backends.model import load_model
from pairedge.runtime.backends.tensorrt_loader import (
    EngineManifest,
    engine_folder,
    manifest_path,
    sha256_file,
)


def stage_onnx_files(model_dir: Path, precision: str) -> list[Path]:
    """The two ONNX files a build of ``precision`` needs (checked to exist).

    Raises:
        InputError: an unknown precision. ModelError: a file is missing, with the command that makes it.
    """
    paths = [model_dir / name for name in artefacts.stage_files(precision)]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        how = (
            f"`pairedge export` writes {', '.join(missing)}"
            if precision == "fp32"
            else f"`pairedge calibrate {model_dir} --out {model_dir} --scenes static:0-3,moving:0-3` writes "
            f"the {precision} models"
        )
        raise ModelError(f"{model_dir}: no {', '.join(missing)} for a {precision} build; {how}")
    return paths


@dataclass(frozen=True)
class BuiltEngine:
    """One engine written by :func:`build_model_folder`."""

    stage: int
    engine: Path
    manifest: EngineManifest
    output: BuildOutput


def build_model_folder(
    model_dir: Path,
    settings: BuildSettings,
    *,
    out: Path | None = None,
    trt: Any = None,
    memory: Any = None,
    progress: Callable[[int], ProgressSink | None] | None = None,
) -> list[BuiltEngine]:
    """Build the stage-1 and stage-2 engines of ``model_dir`` at ``settings.precision``.

    Args:
        model_dir: the model folder.
        settings: precision, profile, workspace, timing cache.
        out: engine folder; default ``model_dir/engines/<device>-sm<cc>-trt<version>`` (``...-dla<N>`` for a
            DLA build, :func:`~pairedge.runtime.backends.tensorrt_loader.engine_folder`).
        trt: the ``tensorrt`` module (default: imported, or a one-line error saying how to get it).
        memory: a CUDA memory layer used to read the device (default: cuda-python / pycuda).
        progress: stage -> progress sink for that stage's build.

    Raises:
        MissingDependencyError: no TensorRT / no cuda-python. DeviceUnavailableError: no GPU.
        ModelError: missing ONNX files. BuildError: the parser or builder failed, or a layer cannot run
        on the DLA. InputError: a DLA build with a dynamic profile or a DLA core the device lacks.
    """

    settings.check_dla_profile()  # before anything is loaded
    onnx_files = stage_onnx_files(model_dir, settings.precision)
    models = [load_model(p, stage=s) for s, p in zip(artefacts.STAGES, onnx_files, strict=True)]
    trt = trt if trt is not None else load_tensorrt()
    env = build_environment(trt, memory)
    engine_dir = (
        out
        if out is not None
        else model_dir / artefacts.ENGINES_DIR / engine_folder(env.tag, settings.dla_core)
    )
    engine_dir.mkdir(parents=True, exist_ok=True)
    calibration = model_dir / artefacts.CALIBRATION_FILE
    built: list[BuiltEngine] = []
    for stage, onnx_path, model in zip(artefacts.STAGES, onnx_files, models, strict=True):
        sink = progress(stage) if progress is not None else None
        result = build_serialized(trt, onnx_path, settings, progress=sink)
        engine = engine_dir / artefacts.artefact(stage, settings.precision).engine
        engine_record = write_engine(engine, result.plan)
        meta = model.metadata
        manifest = EngineManifest(
            stage=stage,
            precision=settings.precision,
            tensorrt_version=env.tensorrt_version,
            cuda_version=env.cuda_version,
            device_name=env.device_name,
            compute_capability=env.compute_capability,
            profile=settings.profile.as_dict(),
            onnx=file_record(onnx_path),
            engine=engine_record,
            labels=tuple(meta.labels),
            feature_spec=meta.feature_spec,
            feature_spec_version=meta.feature_spec_version,
            num_features=meta.num_features,
            input_name=result.input_name,
            output_name=result.output_names[0] if result.output_names else "logits",
            calibration=(
                {"file": artefacts.CALIBRATION_FILE, "sha256": sha256_file(calibration)}
                if settings.precision == "int8" and calibration.is_file()
                else None
            ),
            build=build_record(settings, result),
            pairedge_version=__version__,
            dla_core=settings.dla_core,
            gpu_fallback=settings.gpu_fallback,
        )
        manifest.write(engine)
        built.append(BuiltEngine(stage, engine, manifest, result))
    _register(model_dir, [b.engine for b in built])
    return built


def _register(model_dir: Path, engines: list[Path]) -> None:
    """Record the engines and their manifests in the folder's manifest.json (when they lie inside it)."""

    root = model_dir.resolve()
    roles: dict[str, str] = {}
    for engine in engines:
        for path, role in (
            (engine, artefacts.ENGINE_ROLE),
            (manifest_path(engine), artefacts.ENGINE_MANIFEST_ROLE),
        ):
            resolved = path.resolve()
            if resolved.is_relative_to(root):
                roles[resolved.relative_to(root).as_posix()] = role
    if roles:
        register_files(model_dir, roles)
