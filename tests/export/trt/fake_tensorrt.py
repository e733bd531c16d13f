"""A recording fake of the ``tensorrt`` Python module, one per TensorRT generation.

Every class and member here exists in the TensorRT 10.13 stubs (``test_tensorrt.py`` checks it); the 11.x
fake additionally lacks every API NVIDIA removed in 11.x, so code that touches one fails with
AttributeError, as it would on a real 11.x install. Calls are recorded in ``module.calls`` as
``("Class.member", args...)``.

The "engine" a fake build produces is a small JSON plan naming the ONNX file; the fake runtime executes it
with ONNX Runtime, reading and writing the device buffers of :class:`FakeCudaMemory`. So the native backend's
whole data path (pinned buffers, async copies, set_input_shape, execute_async_v3, batching) runs for real
against real model outputs, only without a GPU.
"""

from __future__ import annotations

import enum
import json
import types
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import onnx

REMOVED_IN_11_FLAGS = {
    "FP16",
    "INT8",
    "FP8",
    "BF16",
    "INT4",
    "FP4",
    "OBEY_PRECISION_CONSTRAINTS",
    "PREFER_PRECISION_CONSTRAINTS",
    "DIRECT_IO",
}
PLAN_MAGIC = b"FAKEPLAN"


def make_fake_tensorrt(
    version: str = "10.13.0.35",
    *,
    unsupported_ops: frozenset[str] = frozenset(),
    fail_build: bool = False,
    memory: FakeCudaMemory | None = None,
    dla_cores: int = 0,
    dla_unsupported_ops: frozenset[str] = frozenset(),
    int8_refused: frozenset[str] = frozenset(),
) -> types.ModuleType:
    """A fresh fake ``tensorrt`` module.

    Args:
        version: ``__version__``; "11.x" versions lack the removed weak-typing API.
        unsupported_ops: ONNX op types the fake parser rejects (to test parser errors).
        fail_build: ``build_serialized_network`` returns None after logging an error.
        memory: the fake device memory that ``execute_async_v3`` reads and writes.
        dla_cores: ``Builder.num_DLA_cores`` / ``Runtime.num_DLA_cores`` (0 as on x86; 2 on AGX Orin).
        dla_unsupported_ops: ONNX op types whose layers ``IBuilderConfig.can_run_on_DLA`` says no to; a DLA
            build holding one fails without ``GPU_FALLBACK``, as TensorRT's does.
        int8_refused: Gemm node names the fake engine runs in fp16 despite their Q/DQ (no int8 kernel).

    One layer per ONNX node (named after the node); a DLA build's plan records the DLA core, and the fake
    runtime deserialises it only after ``Runtime.DLA_core`` is set to that core.
    """
    mod = types.ModuleType("tensorrt")
    mod.__version__ = version
    calls: list[tuple[Any, ...]] = []
    mod.calls = calls
    major = int(version.split(".")[0])

    def rec(name: str, *args: Any) -> None:
        calls.append((name, *args))

    # -- enums --------------------------------------------------------------------------------------------
    flag_names = [
        "FP16",
        "BF16",
        "INT8",
        "DEBUG",
        "GPU_FALLBACK",
        "REFIT",
        "DISABLE_TIMING_CACHE",
        "TF32",
        "SPARSE_WEIGHTS",
        "OBEY_PRECISION_CONSTRAINTS",
        "PREFER_PRECISION_CONSTRAINTS",
        "DIRECT_IO",
        "FP8",
        "INT4",
        "FP4",
    ]
    if major >= 11:
        flag_names = [f for f in flag_names if f not in REMOVED_IN_11_FLAGS]
    mod.BuilderFlag = enum.IntEnum("BuilderFlag", {n: i for i, n in enumerate(flag_names)})
    mod.NetworkDefinitionCreationFlag = enum.IntEnum(
        "NetworkDefinitionCreationFlag", {"EXPLICIT_BATCH": 0, "STRONGLY_TYPED": 1}
    )
    mod.MemoryPoolType = enum.IntEnum("MemoryPoolType", {"WORKSPACE": 0, "TACTIC_SHARED_MEMORY": 5})
    mod.TensorIOMode = enum.IntEnum("TensorIOMode", {"NONE": 0, "INPUT": 1, "OUTPUT": 2})
    mod.DataType = enum.IntEnum("DataType", {"FLOAT": 0, "HALF": 1, "INT8": 2, "INT32": 3, "INT64": 4})
    mod.DeviceType = enum.IntEnum("DeviceType", {"GPU": 0, "DLA": 1})
    mod.ProfilingVerbosity = enum.IntEnum(
        "ProfilingVerbosity", {"LAYER_NAMES_ONLY": 0, "NONE": 1, "DETAILED": 2}
    )
    mod.LayerInformationFormat = enum.IntEnum("LayerInformationFormat", {"ONELINE": 0, "JSON": 1})

    class ILogger:
        Severity = enum.IntEnum(
            "Severity", {"INTERNAL_ERROR": 0, "ERROR": 1, "WARNING": 2, "INFO": 3, "VERBOSE": 4}
        )

        def __init__(self) -> None:
            rec("ILogger.__init__")

        def log(self, severity: Any, msg: str) -> None:
            raise NotImplementedError

    mod.ILogger = ILogger

    class IProgressMonitor:
        def __init__(self) -> None:
            rec("IProgressMonitor.__init__")

        def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
            raise NotImplementedError

        def step_complete(self, phase_name: str, step: int) -> bool:
            raise NotImplementedError

        def phase_finish(self, phase_name: str) -> None:
            raise NotImplementedError

    mod.IProgressMonitor = IProgressMonitor

    class ParserError:
        def __init__(self, node: int, name: str, op: str, desc: str) -> None:
            self._v = (node, name, op, desc)

        def node(self) -> int:
            return self._v[0]

        def node_name(self) -> str:
            return self._v[1]

        def node_operator(self) -> str:
            return self._v[2]

        def desc(self) -> str:
            return self._v[3]

    mod.ParserError = ParserError

    class ITensor:
        def __init__(self, name: str, shape: tuple[int, ...]) -> None:
            self.name = name
            self.shape = shape

    class ILayer:
        def __init__(self, name: str, op: str) -> None:
            self.name = name
            self._op = op

    class INetworkDefinition:
        def __init__(self, flags: int) -> None:
            self.flags = flags
            self._inputs: list[ITensor] = []
            self._outputs: list[ITensor] = []
            self._layers: list[ILayer] = []
            self.onnx_path = ""

        @property
        def num_layers(self) -> int:
            return len(self._layers)

        def get_layer(self, index: int) -> ILayer:
            return self._layers[index]

        @property
        def num_inputs(self) -> int:
            return len(self._inputs)

        @property
        def num_outputs(self) -> int:
            return len(self._outputs)

        def get_input(self, index: int) -> ITensor:
            rec("INetworkDefinition.get_input", index)
            return self._inputs[index]

        def get_output(self, index: int) -> ITensor:
            rec("INetworkDefinition.get_output", index)
            return self._outputs[index]

    class OnnxParser:
        def __init__(self, network: INetworkDefinition, logger: Any) -> None:
            rec("OnnxParser.__init__", type(network).__name__, isinstance(logger, ILogger))
            self._network = network
            self._errors: list[ParserError] = []

        def parse_from_file(self, model: str) -> bool:
            rec("OnnxParser.parse_from_file", model)
            proto = onnx.load(model, load_external_data=False)
            for i, node in enumerate(proto.graph.node):
                if node.op_type in unsupported_ops:
                    self._errors.append(
                        ParserError(
                            i, node.name, node.op_type, f"No importer registered for op: {node.op_type}"
                        )
                    )
            if self._errors:
                return False
            inits = {t.name for t in proto.graph.initializer}
            for vi in proto.graph.input:
                if vi.name in inits:
                    continue
                dims = tuple(
                    d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim
                )
                self._network._inputs.append(ITensor(vi.name, dims))
            for vi in proto.graph.output:
                self._network._outputs.append(ITensor(vi.name, (-1, -1)))
            for i, node in enumerate(proto.graph.node):
                self._network._layers.append(ILayer(node.name or f"{node.op_type}_{i}", node.op_type))
            self._network.onnx_path = model
            return True

        @property
        def num_errors(self) -> int:
            return len(self._errors)

        def get_error(self, index: int) -> ParserError:
            return self._errors[index]

    mod.OnnxParser = OnnxParser

    class IOptimizationProfile:
        def __init__(self) -> None:
            self.shapes: dict[str, tuple[Any, Any, Any]] = {}

        # the parameter names are TensorRT's (they shadow builtins)
        def set_shape(self, input: str, min: Any, opt: Any, max: Any) -> None:
            rec("IOptimizationProfile.set_shape", input, tuple(min), tuple(opt), tuple(max))
            self.shapes[input] = (tuple(min), tuple(opt), tuple(max))

    class IHostMemory(bytes):
        @property
        def nbytes(self) -> int:
            return len(self)

    class ITimingCache:
        def __init__(self, data: bytes) -> None:
            self.entries = json.loads(data.decode()) if data else {"builds": 0}

        def serialize(self) -> IHostMemory:
            rec("ITimingCache.serialize")
            return IHostMemory(json.dumps(self.entries).encode())

    class IBuilderConfig:
        def __init__(self) -> None:
            self.flags = 0
            self.pools: dict[int, int] = {}
            self.profiles: list[IOptimizationProfile] = []
            self._cache: Any = None  # TensorRT holds raw pointers: the fake holds weak references
            self._progress: Any = None
            self._level = 3
            self._device = mod.DeviceType.GPU
            self._dla_core = -1
            self._verbosity: Any = None  # TensorRT's default: LAYER_NAMES_ONLY

        @property
        def profiling_verbosity(self) -> Any:
            return self._verbosity

        @profiling_verbosity.setter
        def profiling_verbosity(self, value: Any) -> None:
            rec("IBuilderConfig.profiling_verbosity=", value.name)
            self._verbosity = value

        def set_memory_pool_limit(self, pool: Any, pool_size: int) -> None:
            rec("IBuilderConfig.set_memory_pool_limit", pool.name, pool_size)
            self.pools[int(pool)] = pool_size

        def set_flag(self, flag: Any) -> None:
            rec("IBuilderConfig.set_flag", flag.name)
            self.flags |= 1 << int(flag)

        def add_optimization_profile(self, profile: IOptimizationProfile) -> int:
            rec("IBuilderConfig.add_optimization_profile")
            self.profiles.append(profile)
            return len(self.profiles) - 1

        def create_timing_cache(self, serialized_timing_cache: bytes) -> ITimingCache | None:
            rec("IBuilderConfig.create_timing_cache", len(serialized_timing_cache))
            try:
                return ITimingCache(bytes(serialized_timing_cache))
            except (ValueError, UnicodeDecodeError):
                return None

        def set_timing_cache(self, cache: ITimingCache, ignore_mismatch: bool) -> bool:
            rec("IBuilderConfig.set_timing_cache", ignore_mismatch)
            self._cache = weakref.ref(cache)
            return True

        @property
        def _held_cache(self) -> ITimingCache | None:
            if self._cache is None:
                return None
            cache = self._cache()
            assert cache is not None, "the timing cache was freed while TensorRT still uses it"
            return cache

        def get_timing_cache(self) -> ITimingCache | None:
            rec("IBuilderConfig.get_timing_cache")
            return self._held_cache

        @property
        def progress_monitor(self) -> Any:
            if self._progress is None:
                return None
            monitor = self._progress()
            assert monitor is not None, "the progress monitor was freed while TensorRT still calls it"
            return monitor

        @progress_monitor.setter
        def progress_monitor(self, value: Any) -> None:
            rec("IBuilderConfig.progress_monitor=", isinstance(value, IProgressMonitor))
            self._progress = weakref.ref(value)

        @property
        def default_device_type(self) -> Any:
            return self._device

        @default_device_type.setter
        def default_device_type(self, value: Any) -> None:
            rec("IBuilderConfig.default_device_type=", value.name)
            self._device = value

        @property
        def DLA_core(self) -> int:  # noqa: N802 (TensorRT's name)
            return self._dla_core

        @DLA_core.setter
        def DLA_core(self, value: int) -> None:  # noqa: N802
            rec("IBuilderConfig.DLA_core=", value)
            self._dla_core = value

        def can_run_on_DLA(self, layer: ILayer) -> bool:  # noqa: N802
            rec("IBuilderConfig.can_run_on_DLA", layer.name)
            return layer._op not in dla_unsupported_ops

        @property
        def builder_optimization_level(self) -> int:
            return self._level

        @builder_optimization_level.setter
        def builder_optimization_level(self, value: int) -> None:
            rec("IBuilderConfig.builder_optimization_level=", value)
            self._level = value

    class Builder:
        def __init__(self, logger: Any) -> None:
            rec("Builder.__init__", isinstance(logger, ILogger))
            self._logger_ref = weakref.ref(logger)

        @property
        def _logger(self) -> Any:
            logger = self._logger_ref()
            assert logger is not None, "the logger was freed while TensorRT still logs to it"
            return logger

        @property
        def num_DLA_cores(self) -> int:  # noqa: N802 (TensorRT's name)
            rec("Builder.num_DLA_cores")
            return dla_cores

        def create_network(self, flags: int = 0) -> INetworkDefinition:
            rec("Builder.create_network", flags)
            return INetworkDefinition(flags)

        def create_builder_config(self) -> IBuilderConfig:
            rec("Builder.create_builder_config")
            return IBuilderConfig()

        def create_optimization_profile(self) -> IOptimizationProfile:
            rec("Builder.create_optimization_profile")
            return IOptimizationProfile()

        def build_serialized_network(self, network: INetworkDefinition, config: IBuilderConfig) -> Any:
            rec("Builder.build_serialized_network")
            assert self._logger is not None  # (refcounting frees what only TensorRT "holds" at once)
            if config.progress_monitor is not None:
                mon = config.progress_monitor
                mon.phase_start("Building engine", None, 2)
                for step in range(2):
                    mon.step_complete("Building engine", step)
                mon.phase_finish("Building engine")
            if fail_build:
                self._logger.log(ILogger.Severity.ERROR, "fake: out of workspace memory")
                return None
            on_dla = config._device == mod.DeviceType.DLA
            if on_dla:
                assert 0 <= config._dla_core < dla_cores, "DLA core out of range"
                fallback = config.flags & (1 << int(mod.BuilderFlag.GPU_FALLBACK))
                refused = [la.name for la in network._layers if la._op in dla_unsupported_ops]
                if refused and not fallback:
                    self._logger.log(ILogger.Severity.ERROR, f"fake: {refused[0]} cannot run on DLA")
                    return None
            if config._held_cache is not None:
                config._held_cache.entries["builds"] = config._held_cache.entries.get("builds", 0) + 1
            shapes = config.profiles[0].shapes
            name, (lo, opt, hi) = next(iter(shapes.items()))
            plan = {
                "onnx": network.onnx_path,
                "input": name,
                "min": lo,
                "opt": opt,
                "max": hi,
                "shapes": {n: list(s) for n, s in shapes.items()},
                "network_flags": network.flags,
                "builder_flags": config.flags,
                "version": version,
                "dla_core": config._dla_core if on_dla else None,
                "verbosity": None if config.profiling_verbosity is None else int(config.profiling_verbosity),
                "layers": engine_layers(
                    network, config, mod.BuilderFlag, major >= 11 or bool(network.flags & 2), int8_refused
                ),
            }
            return IHostMemory(PLAN_MAGIC + json.dumps(plan).encode())

    mod.Builder = Builder

    # -- runtime ------------------------------------------------------------------------------------------
    ort_types = {
        "tensor(float)": "FLOAT",
        "tensor(float16)": "HALF",
        "tensor(int64)": "INT64",
        "tensor(int32)": "INT32",
    }
    np_types = {
        "FLOAT": np.float32,
        "HALF": np.float16,
        "INT64": np.int64,
        "INT32": np.int32,
        "INT8": np.int8,
    }

    class IExecutionContext:
        def __init__(self, engine: ICudaEngine) -> None:
            self._engine = engine
            self._shapes: dict[str, tuple[int, ...]] = {}
            self._addresses: dict[str, int] = {}

        def set_tensor_address(self, name: str, memory: int) -> bool:
            rec("IExecutionContext.set_tensor_address", name, memory)
            self._addresses[name] = memory
            return True

        def set_input_shape(self, name: str, shape: Any) -> bool:
            shape = tuple(shape)
            rec("IExecutionContext.set_input_shape", name, shape)
            profile = self._engine.plan["shapes"].get(name)
            if profile is None or len(shape) != len(profile[0]):
                return False
            lo, _, hi = profile
            if not all(a <= d <= b for a, d, b in zip(lo, shape, hi, strict=True)):
                return False
            self._shapes[name] = shape
            return True

        def execute_async_v3(self, stream_handle: int) -> bool:
            rec("IExecutionContext.execute_async_v3", stream_handle)
            runtime = self._engine.runtime_ref()
            assert runtime is not None and runtime.logger_ref() is not None, "runtime or its logger was freed"
            engine = self._engine
            feeds = {}
            for name, _, static in engine.inputs:
                shape = self._shapes.get(name, static)
                assert all(d >= 0 for d in shape), f"input shape of {name!r} not set"
                feeds[name] = memory.read(self._addresses[name], shape, np_types[engine.dtypes[name]])
            names = [n for n, _, _ in engine.outputs]
            for name, value in zip(names, engine.session.run(names, feeds), strict=True):
                memory.write(
                    self._addresses[name], np.ascontiguousarray(value, np_types[engine.dtypes[name]])
                )
            return True

    class ICudaEngine:
        def __init__(self, plan: dict[str, Any], runtime: Any) -> None:
            import onnxruntime

            self.runtime_ref = weakref.ref(runtime)
            self.plan = plan
            self.session = onnxruntime.InferenceSession(plan["onnx"], providers=["CPUExecutionProvider"])

            def io(args: Any, mode: Any) -> list[tuple[str, Any, tuple[int, ...]]]:
                return [(a.name, mode, tuple(d if isinstance(d, int) else -1 for d in a.shape)) for a in args]

            self.inputs = io(self.session.get_inputs(), mod.TensorIOMode.INPUT)
            self.outputs = io(self.session.get_outputs(), mod.TensorIOMode.OUTPUT)
            self.dtypes = {
                a.name: ort_types[a.type] for a in [*self.session.get_inputs(), *self.session.get_outputs()]
            }
            self.output_name = self.outputs[0][0]
            self._io = self.inputs + self.outputs

        @property
        def num_io_tensors(self) -> int:
            return len(self._io)

        @property
        def num_optimization_profiles(self) -> int:
            return 1

        def get_tensor_name(self, index: int) -> str:
            return self._io[index][0]

        def get_tensor_mode(self, name: str) -> Any:
            return {n: m for n, m, _ in self._io}[name]

        def get_tensor_dtype(self, name: str) -> Any:
            return getattr(mod.DataType, self.dtypes[name])

        def get_tensor_shape(self, name: str) -> tuple[int, ...]:
            return {n: s for n, _, s in self._io}[name]

        def get_tensor_profile_shape(self, name: str, profile_index: int) -> list[tuple[int, ...]]:
            rec("ICudaEngine.get_tensor_profile_shape", name, profile_index)
            return [tuple(s) for s in self.plan["shapes"][name]]

        def create_execution_context(self) -> IExecutionContext:
            rec("ICudaEngine.create_execution_context")
            return IExecutionContext(self)

        def create_engine_inspector(self) -> EngineInspector:
            rec("ICudaEngine.create_engine_inspector")
            return EngineInspector(self)

    class EngineInspector:
        """TensorRT's layer report: names only unless built with DETAILED verbosity; datatypes only for
        inputs whose shape the inspected context has set (dynamic shapes otherwise)."""

        def __init__(self, engine: ICudaEngine) -> None:
            self._engine = engine
            self._context: IExecutionContext | None = None

        @property
        def execution_context(self) -> Any:
            return self._context

        @execution_context.setter
        def execution_context(self, value: Any) -> None:
            rec("EngineInspector.execution_context=")
            self._context = value

        def get_engine_information(self, format: Any) -> str:  # noqa: A002 (TensorRT's name)
            rec("EngineInspector.get_engine_information", format.name)
            plan = self._engine.plan
            if plan.get("verbosity") != int(mod.ProfilingVerbosity.DETAILED):
                return json.dumps({"Layers": [la["name"] for la in plan["layers"]], "Bindings": []})
            known = self._context is not None and all(
                n in self._context._shapes for n, _, _ in self._engine.inputs
            )
            layers = []
            for la in plan["layers"]:
                fmt = f"Row major linear {la['datatype']} format" if known else "N/A due to dynamic shapes"
                layers.append(
                    {
                        "Name": la["name"],
                        "LayerType": la["type"],
                        "Inputs": [{"Name": "x", "Format/Datatype": fmt}],
                        "Outputs": [{"Name": "y", "Format/Datatype": fmt}],
                    }
                )
            return json.dumps({"Layers": layers, "Bindings": [n for n, _, _ in self._engine._io]})

    class Runtime:
        def __init__(self, logger: Any) -> None:
            rec("Runtime.__init__", isinstance(logger, ILogger))
            self.logger_ref = weakref.ref(logger)
            self._dla_core = -1

        @property
        def num_DLA_cores(self) -> int:  # noqa: N802 (TensorRT's name)
            return dla_cores

        @property
        def DLA_core(self) -> int:  # noqa: N802
            return self._dla_core

        @DLA_core.setter
        def DLA_core(self, value: int) -> None:  # noqa: N802
            rec("Runtime.DLA_core=", value)
            assert 0 <= value < dla_cores, "DLA core out of range"
            self._dla_core = value

        def deserialize_cuda_engine(self, serialized_engine: bytes) -> ICudaEngine | None:
            rec("Runtime.deserialize_cuda_engine", len(serialized_engine))
            blob = bytes(serialized_engine)
            if not blob.startswith(PLAN_MAGIC):
                return None
            plan = json.loads(blob[len(PLAN_MAGIC) :])
            core = plan.get("dla_core")
            if core is not None and self._dla_core != core:
                self.logger_ref().log(
                    ILogger.Severity.ERROR, f"fake: a DLA core {core} engine, Runtime.DLA_core unset"
                )
                return None
            return ICudaEngine(plan, self)

    mod.Runtime = Runtime
    # names the surface test maps back to TensorRT classes
    mod._fake_classes = {
        "ILogger": ILogger,
        "IProgressMonitor": IProgressMonitor,
        "ParserError": ParserError,
        "ITensor": ITensor,
        "ILayer": ILayer,
        "INetworkDefinition": INetworkDefinition,
        "OnnxParser": OnnxParser,
        "IOptimizationProfile": IOptimizationProfile,
        "IHostMemory": IHostMemory,
        "ITimingCache": ITimingCache,
        "IBuilderConfig": IBuilderConfig,
        "Builder": Builder,
        "IExecutionContext": IExecutionContext,
        "ICudaEngine": ICudaEngine,
        "EngineInspector": EngineInspector,
        "Runtime": Runtime,
    }
    return mod


def readback_calls(shapes: dict[str, tuple[int, ...]], dla_core: int | None = None) -> list[tuple[Any, ...]]:
    """The calls with which the builder reads a just-built engine back (``layer_info.engine_layers``)."""
    from unittest.mock import ANY

    return [
        ("Runtime.__init__", True),
        *([("Runtime.DLA_core=", dla_core)] if dla_core is not None else []),
        ("Runtime.deserialize_cuda_engine", ANY),
        ("ICudaEngine.create_execution_context",),
        *[("IExecutionContext.set_input_shape", n, tuple(s)) for n, s in shapes.items()],
        ("ICudaEngine.create_engine_inspector",),
        ("EngineInspector.execution_context=",),
        ("EngineInspector.get_engine_information", "JSON"),
    ]


def engine_layers(
    network: Any, config: Any, flags: Any, strongly_typed: bool, int8_refused: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    """The fake's engine layers, fused as TensorRT fuses a Q/DQ classifier: Q/DQ nodes disappear, a Gemm /
    MatMul absorbs the Relu right after it (``"<gemm> + <relu>"``); a Gemm runs int8 when both its inputs
    come from DequantizeLinear (and the network is strongly typed or the INT8 flag is set), fp16 when the
    FP16 flag is set or its weight is float16, fp32 otherwise (``strongly_typed``: 10.x's STRONGLY_TYPED
    network, every 11.x network)."""
    import onnx

    proto = onnx.load(network.onnx_path, load_external_data=False)
    producer = {o: n for n in proto.graph.node for o in n.output}
    consumers: dict[str, list[Any]] = {}
    for n in proto.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    half = {t.name for t in proto.graph.initializer if t.data_type == onnx.TensorProto.FLOAT16}

    def flag(name: str) -> bool:
        member = getattr(flags, name, None)  # 11.x removed the INT8 / FP16 flags
        return member is not None and bool(config.flags & (1 << int(member)))

    layers, absorbed = [], set()
    for node in proto.graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") or node.name in absorbed:
            continue
        name, kind, dtype = node.name, node.op_type, "Float"
        if node.op_type in ("Gemm", "MatMul"):
            kind = "CaskGemmMatrixMultiply"
            ins = [producer.get(i) for i in node.input[:2]]
            quantized = all(n is not None and n.op_type == "DequantizeLinear" for n in ins)
            if quantized and (strongly_typed or flag("INT8")) and node.name not in int8_refused:
                dtype = "Int8"
            elif flag("FP16") or node.input[1] in half or node.name in int8_refused:
                dtype = "Half"
            after = consumers.get(node.output[0], [])
            if len(after) == 1 and after[0].op_type == "Relu":
                name = f"{name} + {after[0].name}"
                absorbed.add(after[0].name)
        layers.append({"name": name, "type": kind, "datatype": dtype})
    return layers


class FakeCudaMemory:
    """The :class:`~pairedge.runtime.backends.cudamem.CudaMemory` interface over numpy arrays.

    Device pointers are keys into ``self.device``; every operation is recorded in ``self.ops``.
    """

    kind = "fake"

    def __init__(self, name: str = "Orin", cc: str = "8.7", cuda: str = "12.6") -> None:
        self.info = (name, cc, cuda)
        self.device: dict[int, bytearray] = {}
        self.pinned: list[np.ndarray] = []
        self.ops: list[tuple[Any, ...]] = []
        self._next = 0x1000
        self.closed = False

    def device_info(self) -> Any:
        from pairedge.runtime.backends.cudamem import DeviceInfo

        return DeviceInfo(0, *self.info)

    def create_stream(self) -> str:
        self.ops.append(("create_stream",))
        return "stream-0"

    def stream_handle(self, stream: Any) -> int:
        return 0xABC

    def alloc_device(self, nbytes: int) -> int:
        ptr = self._next
        self._next += nbytes + 0x100
        self.device[ptr] = bytearray(nbytes)
        self.ops.append(("alloc_device", nbytes))
        return ptr

    def alloc_pinned(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        arr = np.zeros(shape, dtype)
        self.pinned.append(arr)
        self.ops.append(("alloc_pinned", tuple(shape), np.dtype(dtype).name))
        return arr

    def _is_pinned(self, host: np.ndarray) -> bool:
        return any(np.shares_memory(host, p) for p in self.pinned)

    def htod_async(self, device_ptr: int, host: np.ndarray, stream: Any) -> None:
        assert self._is_pinned(host), "host buffer of a copy must be pinned"
        buf = self.device[device_ptr]
        assert host.nbytes <= len(buf)
        buf[: host.nbytes] = host.tobytes()
        self.ops.append(("htod", host.nbytes, stream))

    def dtoh_async(self, host: np.ndarray, device_ptr: int, stream: Any) -> None:
        assert self._is_pinned(host), "host buffer of a copy must be pinned"
        buf = self.device[device_ptr]
        host[...] = np.frombuffer(bytes(buf[: host.nbytes]), dtype=host.dtype).reshape(host.shape)
        self.ops.append(("dtoh", host.nbytes, stream))

    def synchronize(self, stream: Any) -> None:
        self.ops.append(("sync", stream))

    def close(self) -> None:
        self.closed = True
        self.ops.append(("close",))

    # used by the fake execution context
    def read(self, ptr: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        count = int(np.prod(shape))
        return np.frombuffer(bytes(self.device[ptr][: count * np.dtype(dtype).itemsize]), dtype).reshape(
            shape
        )

    def write(self, ptr: int, array: np.ndarray) -> None:
        buf = self.device[ptr]
        assert array.nbytes <= len(buf), "output larger than its device buffer"
        buf[: array.nbytes] = array.tobytes()


def plan_of(path: Path) -> dict[str, Any]:
    """The JSON plan inside a fake engine file."""
    return json.loads(path.read_bytes()[len(PLAN_MAGIC) :])
