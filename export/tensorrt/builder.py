"""ONNX -> serialized TensorRT engine, one code path for TensorRT 10.3, 10.12+ and 11.x.

The call sequence (what ``tests/export/trt`` asserts over a recording fake of the ``tensorrt`` module)::

    logger  = <ILogger subclass>                          # TensorRT log -> logging "pairedge.tensorrt"
    builder = trt.Builder(logger)
    network = builder.create_network(flags)               # flags from versions.network_flags
    parser  = trt.OnnxParser(network, logger)
    parser.parse_from_file(onnx)                          # False -> BuildError naming node, op, reason
    config  = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace)
    config.set_flag(flag) for flag in versions.precision_flags   # weakly typed 10.x only
    # --dla-core N (Jetson Orin's DLA; builder.num_DLA_cores is read right after trt.Builder, N refused when
    # out of range, before the ONNX is parsed):
    config.default_device_type = trt.DeviceType.DLA
    config.DLA_core = N
    config.set_flag(trt.BuilderFlag.GPU_FALLBACK)                 # --gpu-fallback; without it:
    config.can_run_on_DLA(network.get_layer(i)) for every layer    # any False -> BuildError naming them
    profile = builder.create_optimization_profile()
    profile.set_shape("features", (min, F), (opt, F), (max, F))
    config.add_optimization_profile(profile)
    config.create_timing_cache(bytes); config.set_timing_cache(cache, False)
    config.progress_monitor = <IProgressMonitor subclass>
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED  # per-layer datatypes, read back below
    plan = builder.build_serialized_network(network, config)      # None -> BuildError with the log's errors
    config.get_timing_cache().serialize() -> timing cache file
    # the engine read back: which precision each ONNX Gemm / MatMul runs in (layer_info.py)
    trt.Runtime(logger).deserialize_cuda_engine(plan).create_engine_inspector().get_engine_information(JSON)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairedge.core.artefacts import DEFAULT_PRECISION, check_precision
from pairedge.core.errors import BackendError, DeviceUnavailableError, InputError
from pairedge.export.tensorrt.layer_info import (
    enable_detailed_layers,
    engine_layers,
    gemm_precisions,
    weighted_node_names,
)
from pairedge.export.tensorrt.progress import ProgressSink, make_progress_monitor
from pairedge.export.tensorrt.timing_cache import attach_timing_cache, save_timing_cache
from pairedge.gpu.tensorrt import versions
from pairedge.gpu.tensorrt.logger import make_logger


class BuildError(BackendError):
    """TensorRT could not parse the ONNX file or build the engine."""


#: The DLA's largest batch (NVIDIA, "DLA Supported Layers and Restrictions": at most 4096, and no dynamic
#: dimensions, so a DLA profile has min = opt = max).
DLA_MAX_BATCH = 4096
#: How many layer names a "cannot run on DLA" error lists before "and K more".
_LISTED_LAYERS = 8


@dataclass(frozen=True)
class Profile:
    """The optimisation profile over the pair axis: min <= opt <= max pairs per call."""

    min: int = 1
    opt: int = 64
    max: int = 512

    def __post_init__(self) -> None:
        if not (1 <= self.min <= self.opt <= self.max):
            raise InputError(
                f"profile: expected 1 <= min <= opt <= max pairs, got {self.min},{self.opt},{self.max}"
            )

    @classmethod
    def parse(cls, text: str) -> Profile:
        """``"1,64,512"`` -> Profile(1, 64, 512)."""
        try:
            values = [int(v) for v in text.split(",")]
        except ValueError:
            values = []
        if len(values) != 3:
            raise InputError(f"--profile: expected three integers MIN,OPT,MAX such as 1,64,512, got {text!r}")
        return cls(*values)

    def as_dict(self) -> dict[str, int]:
        return {"min": self.min, "opt": self.opt, "max": self.max}


@dataclass(frozen=True)
class BuildSettings:
    """How to build one engine.

    Attributes:
        precision: "fp32", "fp16" or "int8" (the ONNX must already carry that precision on strongly typed
            TensorRT: ``*.fp16.onnx`` / Q/DQ ``*.int8.onnx`` from ``pairedge calibrate``).
        profile: pairs per call, min / opt / max.
        workspace_mib: the builder's workspace memory pool limit.
        timing_cache: file to load before and save after the build (None: no cache file).
        optimization_level: ``IBuilderConfig.builder_optimization_level`` (None: TensorRT's default, 3).
        verbose: forward TensorRT's VERBOSE log.
        dla_core: build for this DLA core of a Jetson Orin (``config.default_device_type = DLA``); None: the
            GPU. The DLA runs fp16 and int8 only, and has no dynamic shapes (a classifier's profile must be
            fixed: min = opt = max <= :data:`DLA_MAX_BATCH`).
        gpu_fallback: with ``dla_core``, let the layers the DLA cannot run fall back to the GPU
            (``BuilderFlag.GPU_FALLBACK``); without it such layers are a :class:`BuildError` naming them.
    """

    precision: str = DEFAULT_PRECISION
    profile: Profile = field(default_factory=Profile)
    workspace_mib: int = 256
    timing_cache: Path | None = None
    optimization_level: int | None = None
    verbose: bool = False
    dla_core: int | None = None
    gpu_fallback: bool = False

    def __post_init__(self) -> None:
        check_precision(self.precision)
        if self.workspace_mib < 1:
            raise InputError(f"workspace: expected at least 1 MiB, got {self.workspace_mib}")
        if self.optimization_level is not None and not 0 <= self.optimization_level <= 5:
            raise InputError(f"optimization level: expected 0..5, got {self.optimization_level}")
        core = self.dla_core
        if core is not None and (isinstance(core, bool) or not isinstance(core, int) or core < 0):
            raise InputError(f"--dla-core: expected a DLA core index >= 0, got {core!r}")
        if core is not None and self.precision == "fp32":
            raise InputError(
                "--dla-core: the DLA runs fp16 or int8 only, not fp32; build with --precision fp16 (or int8 "
                "after pairedge calibrate), or leave out --dla-core to build for the GPU"
            )
        if self.gpu_fallback and core is None:
            raise InputError(
                "--gpu-fallback: only with --dla-core N (it lets layers the DLA cannot run use the GPU)"
            )

    def check_dla_profile(self) -> None:
        """Refuse a DLA build of a classifier whose pair profile is dynamic or above the DLA's batch limit.

        Raises:
            InputError: naming the fixed profile to pass instead.
        """
        p = self.profile
        if self.dla_core is None:
            return
        if not p.min == p.opt == p.max or p.max > DLA_MAX_BATCH:
            n = min(p.opt, DLA_MAX_BATCH)
            raise InputError(
                f"--dla-core: the DLA has no dynamic shapes and at most {DLA_MAX_BATCH} rows, so the profile "
                f"must be fixed (min = opt = max <= {DLA_MAX_BATCH}), got {p.min},{p.opt},{p.max}; pass "
                f"--profile {n},{n},{n} (fewer pairs per call are zero-padded, more are split)"
            )

    @property
    def device_label(self) -> str:
        """``"GPU"`` or ``"DLA core N"`` (``+ GPU fallback``), for messages."""
        if self.dla_core is None:
            return "GPU"
        return f"DLA core {self.dla_core}" + (" with GPU fallback" if self.gpu_fallback else "")


@dataclass(frozen=True)
class BuildOutput:
    """A serialized engine and how it was made.

    Attributes:
        plan: the serialized engine.
        seconds: wall time of ``build_serialized_network``.
        input_name, num_features: the network's input and its width F.
        output_names: the network's outputs.
        network_flags: the ``create_network`` flags used.
        builder_flags: names of the ``BuilderFlag`` members set.
        generation: :attr:`versions.Generation.name`.
        timing_cache_loaded, timing_cache_saved: bytes read from / written to the timing cache file.
        dla_core, gpu_fallback: :attr:`BuildSettings.dla_core` / ``gpu_fallback`` of the build.
        gemm_precisions: ONNX Gemm / MatMul node -> the precision its engine layer runs in (``"int8"``,
            ``"fp16"``, ``"fp32"``, ``"unknown"``), read back from the engine (:mod:`.layer_info`).
    """

    plan: bytes
    seconds: float
    input_name: str
    num_features: int
    output_names: tuple[str, ...]
    network_flags: int
    builder_flags: tuple[str, ...]
    generation: str
    timing_cache_loaded: int
    timing_cache_saved: int
    dla_core: int | None = None
    gpu_fallback: bool = False
    gemm_precisions: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NetworkBuild:
    """What :func:`build_network` returns for any network (classifier or detector).

    Attributes:
        plan, seconds, network_flags, builder_flags, generation, timing_cache_loaded, timing_cache_saved:
            as in :class:`BuildOutput`.
        shapes: input name -> (min, opt, max) shapes of the optimisation profile, in the network's order.
        output_names: the network's outputs.
        gemm_precisions: as in :class:`BuildOutput`.
    """

    plan: bytes
    seconds: float
    shapes: Mapping[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]
    output_names: tuple[str, ...]
    network_flags: int
    builder_flags: tuple[str, ...]
    generation: str
    timing_cache_loaded: int
    timing_cache_saved: int
    gemm_precisions: Mapping[str, str] = field(default_factory=dict)


def _parser_failure(parser: Any, onnx_path: Path) -> BuildError:
    lines = [versions.describe_parser_error(parser.get_error(i)) for i in range(parser.num_errors)]
    detail = "; ".join(lines) or "no parser error recorded"
    return BuildError(
        f"{onnx_path}: TensorRT's ONNX parser failed: {detail}. Run `pairedge check {onnx_path}` for a "
        "static report of what this TensorRT version does not support"
    )


#: network -> input name -> (min, opt, max) shapes of the one optimisation profile; raises BuildError for a
#: network it does not take.
ProfileOf = Callable[[Any], dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]]


def build_serialized(
    trt: Any,
    onnx_path: Path,
    settings: BuildSettings,
    progress: ProgressSink | None = None,
    cancel: threading.Event | None = None,
) -> BuildOutput:
    """Build a serialized engine from one ONNX classifier (input ``(pairs, F)``).

    Args:
        trt: the imported ``tensorrt`` module (:func:`load_tensorrt`).
        onnx_path: the ONNX file (external data next to it is found by the parser).
        settings: :class:`BuildSettings`.
        progress: receives build phases (TensorRT's ``IProgressMonitor``); None for none.
        cancel: set it to stop the build at the next progress step.

    Raises:
        InputError: a DLA build with a dynamic pair profile (:meth:`BuildSettings.check_dla_profile`), or a
            DLA core this device does not have.
        DeviceUnavailableError: a DLA build on a device without DLA cores.
        BuildError: the parser rejects the model, the network is not a (pairs, F) classifier, a layer cannot
            run on the DLA (without ``gpu_fallback``), or the build fails.
    """
    settings.check_dla_profile()
    p = settings.profile

    def pair_profile(network: Any) -> dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        if network.num_inputs != 1:
            raise BuildError(
                f"{onnx_path}: expected one input (pairs, F), the network has {network.num_inputs}"
            )
        tensor = network.get_input(0)
        shape = tuple(tensor.shape)
        if len(shape) != 2 or shape[1] < 1:
            raise BuildError(f"{onnx_path}: expected input {tensor.name!r} of shape (pairs, F), got {shape}")
        width = int(shape[1])
        return {str(tensor.name): ((p.min, width), (p.opt, width), (p.max, width))}

    built = build_network(trt, onnx_path, settings, pair_profile, progress, cancel)
    ((input_name, (_, _, (_, width))),) = built.shapes.items()
    return BuildOutput(
        plan=built.plan,
        seconds=built.seconds,
        input_name=input_name,
        num_features=width,
        output_names=built.output_names,
        network_flags=built.network_flags,
        builder_flags=built.builder_flags,
        generation=built.generation,
        timing_cache_loaded=built.timing_cache_loaded,
        timing_cache_saved=built.timing_cache_saved,
        dla_core=settings.dla_core,
        gpu_fallback=settings.gpu_fallback,
        gemm_precisions=built.gemm_precisions,
    )


def build_network(
    trt: Any,
    onnx_path: Path,
    settings: BuildSettings,
    profile_of: ProfileOf,
    progress: ProgressSink | None = None,
    cancel: threading.Event | None = None,
) -> NetworkBuild:
    """Parse ``onnx_path`` and build it with one optimisation profile (the call sequence of the module doc).

    Args:
        profile_of: checks the parsed network and returns its profile shapes per input.
        (the others as in :func:`build_serialized`.)

    Raises:
        InputError, DeviceUnavailableError: a DLA core this device does not have.
        BuildError: parser, network check, DLA layer check or build failure.
    """
    version = versions.TrtVersion.of(trt)
    gen = versions.generation(version)
    logger = make_logger(trt, verbose=settings.verbose)
    builder = trt.Builder(logger)
    if settings.dla_core is not None:
        _check_dla_core(builder, settings.dla_core)
    flags = versions.network_flags(trt, version)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        raise _parser_failure(parser, onnx_path)
    shapes = profile_of(network)
    outputs = tuple(network.get_output(i).name for i in range(network.num_outputs))

    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, settings.workspace_mib << 20)
    dla = settings.dla_core is not None
    set_flags = versions.precision_flags(trt, version, settings.precision, dla=dla)
    for flag in set_flags:
        config.set_flag(flag)
    if settings.dla_core is not None:
        set_flags = [*set_flags, *_configure_dla(trt, network, config, settings, onnx_path)]
    if settings.optimization_level is not None:
        config.builder_optimization_level = settings.optimization_level
    profile = builder.create_optimization_profile()
    for name, (lo, opt, hi) in shapes.items():
        profile.set_shape(name, lo, opt, hi)
    config.add_optimization_profile(profile)
    # TensorRT keeps raw pointers to the cache and the monitor: hold Python references until the build ends.
    timing_cache, loaded = attach_timing_cache(config, settings.timing_cache)
    monitor = None
    if progress is not None and versions.has_progress_monitor(trt):
        monitor = make_progress_monitor(trt, progress, cancel)
        config.progress_monitor = monitor
    detailed = enable_detailed_layers(trt, config)

    start = time.perf_counter()
    plan = builder.build_serialized_network(network, config)
    seconds = time.perf_counter() - start
    if plan is None:
        if cancel is not None and cancel.is_set():
            raise BuildError(f"{onnx_path}: build cancelled")
        errors = "; ".join(logger.errors) or "TensorRT logged no error; rerun with --verbose"
        raise BuildError(
            f"{onnx_path}: TensorRT could not build a {settings.precision} engine for the "
            f"{settings.device_label}: {errors}"
        )
    saved = save_timing_cache(config, settings.timing_cache)
    del timing_cache, monitor  # safe to release now
    blob = bytes(memoryview(plan))
    layers = (
        engine_layers(trt, blob, logger, {n: opt for n, (_, opt, _) in shapes.items()}, settings.dla_core)
        if detailed
        else []
    )
    return NetworkBuild(
        plan=blob,
        seconds=seconds,
        shapes=shapes,
        output_names=outputs,
        network_flags=flags,
        builder_flags=tuple(_flag_name(f) for f in set_flags),
        generation=gen.name,
        timing_cache_loaded=loaded,
        timing_cache_saved=saved,
        gemm_precisions=gemm_precisions(layers, weighted_node_names(onnx_path)),
    )


def _check_dla_core(builder: Any, core: int) -> None:
    """Refuse a DLA core this device does not have (``builder.num_DLA_cores``), before anything is parsed."""
    cores = int(builder.num_DLA_cores)
    if cores == 0:
        raise DeviceUnavailableError(
            f"--dla-core {core}: this device has no DLA (TensorRT reports 0 DLA cores; Jetson AGX Orin and "
            "Orin NX have 2, Orin Nano none); build for the GPU without --dla-core"
        )
    if core >= cores:
        raise InputError(f"--dla-core {core}: this device has {cores} DLA cores (0..{cores - 1})")


def _configure_dla(
    trt: Any, network: Any, config: Any, settings: BuildSettings, onnx_path: Path
) -> list[Any]:
    """Point the build at DLA core ``settings.dla_core``; returns the extra builder flags it set.

    Without ``gpu_fallback`` every layer must be able to run on the DLA (``config.can_run_on_DLA``, asked
    after the precision flags and the device type are set, as TensorRT decides it for this configuration).

    Raises:
        BuildError: layers that cannot run on the DLA, named (at most :data:`_LISTED_LAYERS` of them).
    """
    config.default_device_type = trt.DeviceType.DLA
    config.DLA_core = settings.dla_core
    if settings.gpu_fallback:
        config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
        return [trt.BuilderFlag.GPU_FALLBACK]
    total = int(network.num_layers)
    layers = (network.get_layer(i) for i in range(total))
    refused = [str(layer.name) for layer in layers if not config.can_run_on_DLA(layer)]
    if refused:
        listed = ", ".join(refused[:_LISTED_LAYERS]) + (
            f" and {len(refused) - _LISTED_LAYERS} more" if len(refused) > _LISTED_LAYERS else ""
        )
        raise BuildError(
            f"{onnx_path}: {len(refused)} of {total} layers cannot run on DLA core {settings.dla_core} at "
            f"{settings.precision}: {listed}; add --gpu-fallback to run them on the GPU, or build without "
            "--dla-core"
        )
    return []


def _flag_name(flag: Any) -> str:
    return str(getattr(flag, "name", flag)).split(".")[-1]


def build_record(settings: BuildSettings, result: BuildOutput | NetworkBuild) -> dict[str, Any]:
    """The ``build`` entry of an engine manifest: when and how the engine was built (classifier or
    detector)."""
    return {
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(result.seconds, 3),
        "workspace_mib": settings.workspace_mib,
        "optimization_level": settings.optimization_level,
        "generation": result.generation,
        "network_flags": result.network_flags,
        "builder_flags": list(result.builder_flags),
        "timing_cache": str(settings.timing_cache) if settings.timing_cache else None,
        "timing_cache_bytes": result.timing_cache_saved,
        "gemm_precisions": dict(result.gemm_precisions),
    }
