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
    profile = builder.create_optimization_profile()
    profile.set_shape("features", (min, F), (opt, F), (max, F))
    config.add_optimization_profile(profile)
    config.create_timing_cache(bytes); config.set_timing_cache(cache, False)
    config.progress_monitor = <IProgressMonitor subclass>
    plan = builder.build_serialized_network(network, config)      # None -> BuildError with the log's errors
    config.get_timing_cache().serialize() -> timing cache file
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairedge.core.artefacts import check_precision
from pairedge.core.errors import BackendError, InputError
from pairedge.export.tensorrt.progress import ProgressSink, make_progress_monitor
from pairedge.export.tensorrt.timing_cache import attach_timing_cache, save_timing_cache
from pairedge.gpu.tensorrt import versions
from pairedge.gpu.tensorrt.logger import make_logger


class BuildError(BackendError):
    """TensorRT could not parse the ONNX file or build the engine."""




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
    """

    precision: str = "fp32"
    profile: Profile = field(default_factory=Profile)
    workspace_mib: int = 256
    timing_cache: Path | None = None
    optimization_level: int | None = None
    verbose: bool = False

    def __post_init__(self) -> None:
        check_precision(self.precision)
        if self.workspace_mib < 1:
            raise InputError(f"workspace: expected at least 1 MiB, got {self.workspace_mib}")
        if self.optimization_level is not None and not 0 <= self.optimization_level <= 5:
            raise InputError(f"optimization level: expected 0..5, got {self.optimization_level}")


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


def _parser_failure(parser: Any, onnx_path: Path) -> BuildError:
    lines = [versions.describe_parser_error(parser.get_error(i)) for i in range(parser.num_errors)]
    detail = "; ".join(lines) or "no parser error recorded"
    return BuildError(
        f"{onnx_path}: TensorRT's ONNX parser failed: {detail}. Run `pairedge check {onnx_path}` for a static "
        "report of what this TensorRT version does not support"
    )


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
        BuildError: the parser rejects the model, the network is not a (pairs, F) classifier, or the build fails.
    """
    version = versions.TrtVersion.of(trt)
    gen = versions.generation(version)
    logger = make_logger(trt, verbose=settings.verbose)
    builder = trt.Builder(logger)
    flags = versions.network_flags(trt, version)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        raise _parser_failure(parser, onnx_path)
    if network.num_inputs != 1:
        raise BuildError(f"{onnx_path}: expected one input (pairs, F), the network has {network.num_inputs}")
    tensor = network.get_input(0)
    shape = tuple(tensor.shape)
    if len(shape) != 2 or shape[1] < 1:
        raise BuildError(f"{onnx_path}: expected input {tensor.name!r} of shape (pairs, F), got {shape}")
    width = int(shape[1])
    outputs = tuple(network.get_output(i).name for i in range(network.num_outputs))

    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, settings.workspace_mib << 20)
    precision_flags = versions.precision_flags(trt, version, settings.precision)
    for flag in precision_flags:
        config.set_flag(flag)
    if settings.optimization_level is not None:
        config.builder_optimization_level = settings.optimization_level
    p = settings.profile
    profile = builder.create_optimization_profile()
    profile.set_shape(tensor.name, (p.min, width), (p.opt, width), (p.max, width))
    config.add_optimization_profile(profile)
    # TensorRT keeps raw pointers to the cache and the monitor: hold Python references until the build ends.
    timing_cache, loaded = attach_timing_cache(config, settings.timing_cache)
    monitor = None
    if progress is not None and versions.has_progress_monitor(trt):
        monitor = make_progress_monitor(trt, progress, cancel)
        config.progress_monitor = monitor

    start = time.perf_counter()
    plan = builder.build_serialized_network(network, config)
    seconds = time.perf_counter() - start
    if plan is None:
        if cancel is not None and cancel.is_set():
            raise BuildError(f"{onnx_path}: build cancelled")
        errors = "; ".join(logger.errors) or "TensorRT logged no error; rerun with --verbose"
        raise BuildError(f"{onnx_path}: TensorRT could not build a {settings.precision} engine: {errors}")
    saved = save_timing_cache(config, settings.timing_cache)
    del timing_cache, monitor  # safe to release now
    return BuildOutput(
        plan=bytes(memoryview(plan)),
        seconds=seconds,
        input_name=str(tensor.name),
        num_features=width,
        output_names=outputs,
        network_flags=flags,
        builder_flags=tuple(_flag_name(f) for f in precision_flags),
        generation=gen.name,
        timing_cache_loaded=loaded,
        timing_cache_saved=saved,
    )


def _flag_name(flag: Any) -> str:
    return str(getattr(flag, "name", flag)).split(".")[-1]
