"""Everything that differs between TensorRT 10.3, 10.12+ and 11.x, in one place.

The rest of :mod:`pairedge.export.tensorrt` and the native runtime backend ask this module; none of them
branches on a version number itself (the Polygraphy habit).

Facts it encodes (NVIDIA, "Migrating from TensorRT 10.x to 11.x" and the 10.x release notes):

- **TensorRT 10.0 - 10.11** (JetPack 6.x ships 10.3): networks are weakly typed by default. Reduced
  precision is *allowed* with builder flags: ``BuilderFlag.FP16`` for the fp16 build, ``BuilderFlag.INT8``
  for an explicitly quantized (Q/DQ) ONNX, whose Q/DQ scales then decide the int8 layers.
- **TensorRT 10.12 and later 10.x**: weak typing is deprecated; the network is created with
  ``NetworkDefinitionCreationFlag.STRONGLY_TYPED`` and the types come from the ONNX graph (fp16 initialisers
  and casts in ``stage*.fp16.onnx``, Q/DQ in ``stage*.int8.onnx``). No precision flag is set.
- **TensorRT 11.x**: every weak-typing API is removed (precision builder flags, INT8 calibrators, quantization
  flags, ``platform_has_fast_fp16/int8``); every network is strongly typed, the creation flag is not needed.
  JetPack is not supported by 11.x so far: Jetson users are on 10.x.

So the ONNX file of a precision is the same on every version (``stage{1,2}.onnx`` / ``.fp16.onnx`` /
``.int8.onnx``, the names and the precision list of :mod:`pairedge.core.artefacts`); only *how* the builder
is told differs, and only here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pairedge.core.artefacts import check_precision
from pairedge.core.errors import InputError

#: First 10.x release where strongly typed networks are the recommended (and weak typing deprecated) path.
STRONG_TYPING_FROM: tuple[int, int] = (10, 12)

#: Python API names that TensorRT 11.x removed ("Removed Python APIs and Replacements"). pairedge's 11.x path
#: must never touch them; ``tests/export/trt/test_tensorrt.py`` checks the source against this list.
REMOVED_IN_11: frozenset[str] = frozenset(
    {
        "BuilderFlag.FP16",
        "BuilderFlag.INT8",
        "BuilderFlag.FP8",
        "BuilderFlag.BF16",
        "BuilderFlag.INT4",
        "BuilderFlag.FP4",
        "BuilderFlag.OBEY_PRECISION_CONSTRAINTS",
        "BuilderFlag.PREFER_PRECISION_CONSTRAINTS",
        "BuilderFlag.DIRECT_IO",
        "IBuilderConfig.int8_calibrator",
        "IBuilderConfig.set_calibration_profile",
        "IBuilderConfig.get_calibration_profile",
        "IBuilderConfig.set_quantization_flag",
        "IBuilderConfig.get_quantization_flag",
        "IBuilderConfig.clear_quantization_flag",
        "IBuilderConfig.quantization_flags",
        "IBuilderConfig.algorithm_selector",
        "ICudaEngine.device_memory_size",
        "Builder.platform_has_fast_fp16",
        "Builder.platform_has_fast_int8",
        "IInt8Calibrator",
        "IInt8EntropyCalibrator",
        "IInt8EntropyCalibrator2",
        "IInt8MinMaxCalibrator",
        "IInt8LegacyCalibrator",
        "CalibrationAlgoType",
        "QuantizationFlag",
        "IAlgorithm",
        "IAlgorithmContext",
        "IAlgorithmIOInfo",
        "IAlgorithmSelector",
        "IAlgorithmVariant",
    }
)


@dataclass(frozen=True, order=True)
class TrtVersion:
    """A TensorRT version, e.g. ``10.3.0.30`` (build number optional).

    Attributes:
        major, minor, patch, build: the dotted parts; missing ones are 0.
    """

    major: int
    minor: int
    patch: int = 0
    build: int = 0

    @classmethod
    def parse(cls, text: str) -> TrtVersion:
        """Parse ``"10.13.0.35"``, ``"10.3.0"``, ``"11.1"``, or a target name ``"tensorrt-10.3"``."""
        match = re.fullmatch(
            r"(?:tensorrt-?)?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:\.(\d+))?(?:[.+-].*)?", text.strip()
        )
        if not match:
            raise InputError(f"TensorRT version: expected a dotted version such as 10.3.0, got {text!r}")
        parts = [int(p) if p is not None else 0 for p in match.groups()]
        return cls(*parts)

    @classmethod
    def of(cls, trt: Any) -> TrtVersion:
        """The version of an imported ``tensorrt`` module (its ``__version__``)."""
        return cls.parse(str(getattr(trt, "__version__", "")))

    def __str__(self) -> str:
        return self.short + (f".{self.build}" if self.build else "")

    @property
    def short(self) -> str:
        """``major.minor.patch``: what engines are tied to, and what folder names carry."""
        return f"{self.major}.{self.minor}.{self.patch}"


@dataclass(frozen=True)
class Generation:
    """How one TensorRT generation is driven.

    Attributes:
        name: "10.0-10.11 (weakly typed)", "10.12+ (strongly typed)" or "11.x (always strongly typed)".
        strongly_typed: the network's types come from the ONNX graph.
        creation_flag: whether ``NetworkDefinitionCreationFlag.STRONGLY_TYPED`` must be passed.
        precision_flags: whether ``BuilderFlag.FP16`` / ``INT8`` are used for reduced precision.
    """

    name: str
    strongly_typed: bool
    creation_flag: bool
    precision_flags: bool


def generation(version: TrtVersion) -> Generation:
    """The :class:`Generation` of ``version``.

    Raises:
        InputError: TensorRT before 10 (its API differs: bindings, enqueue_v2) is not supported.
    """
    if version.major < 10:
        raise InputError(
            f"TensorRT {version} is not supported: pairedge needs TensorRT 10 or later (JetPack 6 ships "
            "10.3); upgrade JetPack, or on x86 `pip install -U '.[tensorrt]'` in the pairedge folder"
        )
    if version.major >= 11:
        return Generation("11.x (always strongly typed)", True, False, False)
    if (version.major, version.minor) >= STRONG_TYPING_FROM:
        return Generation("10.12+ (strongly typed)", True, True, False)
    return Generation("10.0-10.11 (weakly typed)", False, False, True)


def network_flags(trt: Any, version: TrtVersion) -> int:
    """The ``flags`` argument of ``Builder.create_network`` for this version (0 or the strongly-typed bit)."""
    if generation(version).creation_flag:
        return 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    return 0


def precision_flags(trt: Any, version: TrtVersion, precision: str, *, dla: bool = False) -> list[Any]:
    """The ``BuilderFlag`` members to set for ``precision`` (empty on strongly typed generations).

    Weakly typed 10.x: fp16 -> ``[FP16]``; int8 from a Q/DQ ONNX -> ``[INT8, FP16]`` (explicit quantization
    needs INT8 there; FP16 lets the layers outside Q/DQ pairs, such as the Gemms a sensitivity sweep keeps
    float, run in fp16 rather than fp32, as ``trtexec --int8 --fp16``; on the DLA, which runs nothing in
    fp32, it is required); fp32 -> ``[]``. Strongly typed generations take the types from the ONNX graph,
    DLA or not: there the float Gemms of an int8 file run in fp32. ``dla`` is accepted for the callers'
    symmetry; it no longer changes the flags.
    """
    check_precision(precision)
    if not generation(version).precision_flags or precision == "fp32":
        return []
    if precision == "fp16":
        return [trt.BuilderFlag.FP16]
    return [trt.BuilderFlag.INT8, trt.BuilderFlag.FP16]


def has_progress_monitor(trt: Any) -> bool:
    """Whether this TensorRT offers ``IProgressMonitor`` (10.0 and later do)."""
    return hasattr(trt, "IProgressMonitor")


def describe_parser_error(err: Any) -> str:
    """One line for a ``ParserError``: node index, node name, operator, reason.

    ``node_name`` / ``node_operator`` are read when present (10.x bindings added them after ``node``); an
    older binding still yields the node index and the description.
    """
    parts = [f"node {err.node()}"]
    name = err.node_name() if hasattr(err, "node_name") else ""
    op = err.node_operator() if hasattr(err, "node_operator") else ""
    if name:
        parts.append(f"{name!r}")
    if op:
        parts.append(f"(op {op})")
    return " ".join(parts) + f": {err.desc()}"
