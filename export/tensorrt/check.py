"""``pairedge check``: static TensorRT readiness of an ONNX model — no GPU, no TensorRT, no torch.

Rules (each finding names the rule, the node or tensor, and how to fix it):

``onnx-checker`` ``onnx.checker.check_model`` (full check: strict shape inference) rejects the graph (an
                 operator with the wrong number of inputs, an IR version newer than onnx knows, ...): error.
                 Run first; the TensorRT rules below then look at a graph that is valid ONNX.
``opset``        ai.onnx opset below 9 (error) or above what the target's parser was built for (warning).
``domain``       a node outside the default ONNX domain (com.microsoft contrib ops ...): error.
``op``           an operator the target's parser does not import: error.
``dtype``        DOUBLE anywhere (TensorRT has no float64; error for inputs / outputs / casts, warning for
                 initializers it casts down); INT64 model inputs / outputs or INT64 initializers feeding
                 arithmetic (warning: TensorRT computes them in a narrower or slower form).
``dynamic``      a dynamic axis other than the pair axis (a single profile over pairs cannot cover it), or
                 more than one input: error.
``qdq-*``        explicit quantization (Q/DQ) rules TensorRT relies on, from
                 :func:`pairedge.calibration.qdq_rules.check_qdq_rules` (the same checker ``pairedge
                 calibrate`` applies to its outputs): int8 only, zero point 0, constant positive scales,
                 per-channel weight scales on the output-channel axis, no bias Q/DQ, no dangling Q or DQ,
                 matching Q/DQ pairs.
``fp16-range``   initializers (or calibrated activation ranges in ``calibration.json``) beyond fp16's
                 +-65504: warning (error for an fp16 model, which would hold inf).

Every file is checked before it is opened (:func:`pairedge.core.limits.regular_file`): the model within
:data:`pairedge.core.limits.MAX_MODEL_BYTES`, its external data inside its folder and within the same ceiling,
``calibration.json`` within :data:`pairedge.core.limits.MAX_SIDECAR_BYTES`. A FIFO, a device such as
``/dev/zero`` or a folder is a one-line :class:`~pairedge.core.errors.FormatError`, never read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.calibration.qdq_rules import check_qdq_rules
from pairedge.core import limits
from pairedge.core.artefacts import CALIBRATION_FILE, find
from pairedge.core.errors import FormatError, InputError, ModelError
from pairedge.core.modelfolder import load_onnx
from pairedge.export.tensorrt.onnx_ops import DEFAULT_TARGET, TARGETS, UNSUPPORTED, Target, supported
from pairedge.runtime.backends.model import check_external_data

FP16_MAX = 65504.0
_FLOAT, _INT64, _FLOAT16, _DOUBLE = 1, 7, 10, 11
_ARITH = {"Add", "Sub", "Mul", "Div", "MatMul", "Gemm", "Conv", "Pow", "Sum", "Max", "Min", "Mod"}


@dataclass(frozen=True)
class Finding:
    """One problem. ``severity``: "error" (TensorRT will reject or mis-run it) or "warning"."""

    severity: str
    rule: str
    where: str
    message: str


@dataclass(frozen=True)
class CheckReport:
    """The findings of one model for one target."""

    path: Path
    target: str
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors


def _node_name(node: Any, index: int) -> str:
    return f"{node.name or f'#{index}'} ({node.op_type})"


def _opset(model: Any) -> int | None:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return None


def check_model(
    path: str | Path, target: str = DEFAULT_TARGET, *, calibration: str | Path | None = None
) -> CheckReport:
    """Lint one ONNX file for a TensorRT target.

    Args:
        path: the .onnx file.
        target: one of :data:`~pairedge.export.tensorrt.onnx_ops.TARGETS`.
        calibration: a ``calibration.json`` with per-tensor ranges (default: the one beside the model, if
            any).

    Raises:
        InputError: unknown target. FormatError: not a regular file (FIFO, device, folder) or above its
            ceiling. ModelError: not a readable ONNX file, or external data outside its folder.
    """
    if target not in TARGETS:
        raise InputError(f"--target: expected one of {', '.join(TARGETS)}, got {target!r}")
    file = Path(path)
    model = read_model(file)
    tgt = TARGETS[target]
    found: list[Finding] = _check_onnx(model)
    is_fp16 = any(t.data_type == _FLOAT16 for t in model.graph.initializer)
    rules: tuple[tuple[str, Any], ...] = (
        ("opset", lambda: _check_opset(model, tgt)),
        ("op", lambda: _check_ops(model, tgt)),
        ("dtype", lambda: _check_dtypes(model)),
        ("dynamic", lambda: _check_dynamic(model)),
        ("qdq", lambda: _check_qdq(model)),
        ("fp16-range", lambda: _check_fp16_range(model, is_fp16)),
    )
    for rule, run in rules:
        try:
            found += run()
        except Exception as exc:  # a graph onnx.checker rejected may break a rule: a finding, not a crash
            found.append(
                Finding(
                    "error",
                    rule,
                    "model",
                    f"the rule could not run on this graph ({type(exc).__name__}: {exc})",
                )
            )
    cal = Path(calibration) if calibration else file.parent / CALIBRATION_FILE
    if cal.exists():
        found += _check_calibration_ranges(cal, file, is_fp16)
    return CheckReport(file, target, tuple(found))


def read_model(file: Path) -> Any:
    """The ONNX model of ``file`` with its external data, every file checked before it is read.

    Raises:
        FormatError: ``file`` is not a regular file or is above :data:`pairedge.core.limits.MAX_MODEL_BYTES`.
        ModelError: not ONNX; external data outside the folder, missing, not a regular file or too large.
    """
    from onnx.external_data_helper import load_external_data_for_model

    model = load_onnx(file, "an ONNX model (.onnx)")
    if check_external_data(file.resolve(), model):
        try:
            load_external_data_for_model(model, str(file.resolve().parent))
        except Exception as exc:  # onnx raises OSError / ValueError for unreadable side files
            raise ModelError(
                f"{file}: its external data cannot be read ({type(exc).__name__}: {exc})"
            ) from None
    return model


def _check_onnx(model: Any) -> list[Finding]:
    """``onnx.checker`` (full check, strict shape inference) on the loaded model: one error when it
    rejects."""
    import onnx

    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:  # ValidationError, InferenceError, or a proto too large to serialise
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        context = next((ln.strip() for ln in str(exc).splitlines() if "Context" in ln or "Name:" in ln), "")
        detail = f"{first} ({context.lstrip('=> ')})" if context else first
        return [
            Finding(
                "error",
                "onnx-checker",
                "model",
                f"onnx.checker rejects the graph: {detail}; TensorRT's parser would refuse it too: re-export "
                "the model (`pairedge export`) or fix the graph",
            )
        ]
    return []


def _check_opset(model: Any, tgt: Target) -> list[Finding]:
    opset = _opset(model)
    if opset is None:
        return [
            Finding("error", "opset", "model", "no ai.onnx opset declared; re-export with `pairedge export`")
        ]
    if opset < tgt.min_opset:
        return [
            Finding(
                "error",
                "opset",
                "model",
                f"opset {opset} < {tgt.min_opset}; convert with "
                "onnx.version_converter or re-export with a newer opset",
            )
        ]
    if opset > tgt.max_opset:
        return [
            Finding(
                "warning",
                "opset",
                "model",
                f"opset {opset} is newer than {tgt.name}'s parser "
                f"(opset <= {tgt.max_opset}); re-export with --opset {tgt.max_opset} to be safe",
            )
        ]
    return []


def _check_ops(model: Any, tgt: Target) -> list[Finding]:
    out = []
    for i, node in enumerate(model.graph.node):
        where = _node_name(node, i)
        if node.domain not in ("", "ai.onnx"):
            out.append(
                Finding(
                    "error",
                    "domain",
                    where,
                    f"operator of domain {node.domain!r}: TensorRT's parser "
                    "imports only ai.onnx operators (ONNX Runtime contrib ops need a plugin)",
                )
            )
        elif node.op_type in UNSUPPORTED or not supported(tgt, node.op_type):
            out.append(
                Finding(
                    "error",
                    "op",
                    where,
                    f"{node.op_type} is not supported by {tgt.name}'s ONNX "
                    "parser; rewrite it with supported operators or provide a TensorRT plugin",
                )
            )
    return out


def _elem(value_info: Any) -> int:
    return int(value_info.type.tensor_type.elem_type)


def _check_dtypes(model: Any) -> list[Finding]:
    g = model.graph
    out = []
    for vi in list(g.input) + list(g.output):
        if _elem(vi) == _DOUBLE:
            out.append(
                Finding(
                    "error",
                    "dtype",
                    vi.name,
                    "float64 model input/output: TensorRT has no double; export float32",
                )
            )
        elif _elem(vi) == _INT64:
            out.append(
                Finding(
                    "warning",
                    "dtype",
                    vi.name,
                    "int64 model input/output: TensorRT narrows or slows "
                    "int64; pairedge classifiers take float32 features",
                )
            )
    consumers: dict[str, list[str]] = {}
    for node in g.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node.op_type)
        if node.op_type == "Cast" and any(a.name == "to" and a.i == _DOUBLE for a in node.attribute):
            out.append(
                Finding(
                    "error",
                    "dtype",
                    node.name or node.output[0],
                    "Cast to float64: TensorRT has no double; cast to float32",
                )
            )
    for t in g.initializer:
        if t.data_type == _DOUBLE:
            out.append(
                Finding("warning", "dtype", t.name, "float64 initializer: TensorRT casts it to float32")
            )
        elif t.data_type == _INT64 and _ARITH & set(consumers.get(t.name, ())):
            out.append(
                Finding(
                    "warning",
                    "dtype",
                    t.name,
                    "int64 initializer feeding arithmetic: store it as float32 or int32",
                )
            )
    return out


def _check_dynamic(model: Any) -> list[Finding]:
    inits = {t.name for t in model.graph.initializer}
    inputs = [vi for vi in model.graph.input if vi.name not in inits]
    out = []
    if len(inputs) != 1:
        out.append(
            Finding(
                "error",
                "dynamic",
                "model",
                f"{len(inputs)} inputs: the engine's single optimisation profile covers one (pairs, F) input",
            )
        )
    for vi in inputs:
        dims = vi.type.tensor_type.shape.dim
        for axis, d in enumerate(dims):
            if axis > 0 and not d.HasField("dim_value"):
                out.append(
                    Finding(
                        "error",
                        "dynamic",
                        vi.name,
                        f"axis {axis} is dynamic ({d.dim_param or '?'}): "
                        "only the pair axis may be dynamic; export with a fixed feature width",
                    )
                )
    return out


def _check_qdq(model: Any) -> list[Finding]:
    """Explicit-quantization rules: :func:`pairedge.calibration.qdq_rules.check_qdq_rules` (the one
    checker)."""

    return [
        Finding("error", f"qdq-{issue.rule}", issue.node, issue.message) for issue in check_qdq_rules(model)
    ]


def _check_fp16_range(model: Any, is_fp16: bool) -> list[Finding]:
    from onnx import numpy_helper

    out = []
    for t in model.graph.initializer:
        if t.data_type not in (_FLOAT, _DOUBLE, _FLOAT16):
            continue
        arr = numpy_helper.to_array(t).astype(np.float64)
        peak = float(np.max(np.abs(arr))) if arr.size else 0.0
        if not np.isfinite(peak) or peak > FP16_MAX:
            sev = "error" if is_fp16 else "warning"
            out.append(
                Finding(
                    sev,
                    "fp16-range",
                    t.name,
                    f"max |value| {peak:.4g} exceeds fp16's {FP16_MAX:g}: "
                    "an fp16 engine overflows to inf; keep this tensor in float32",
                )
            )
    return out


def _ranges(report: Any, stage: str | None) -> Iterable[tuple[str, float]]:
    """(tensor, largest magnitude) per calibrated activation of ``calibration.json`` (``pairedge calibrate``:
    ``{"stages": {"stage1": {"tensors": [{"tensor", "range": [lo, hi], "observed_max_abs"}]}}}``), for
    ``stage`` ("stage1" / "stage2") or every stage when None."""
    stages = report.get("stages") if isinstance(report, dict) else None
    for key, entry in (stages if isinstance(stages, dict) else {}).items():
        if stage is not None and key != stage:
            continue
        tensors = entry.get("tensors", []) if isinstance(entry, dict) else []
        for t in tensors if isinstance(tensors, list) else []:
            if not isinstance(t, dict):
                continue
            bounds = t.get("range", [])
            found = [
                _magnitude(v)
                for v in (*(bounds if isinstance(bounds, list) else ()), t.get("observed_max_abs"))
            ]
            values = [v for v in found if v is not None]
            if values:
                yield f"{key}:{t.get('tensor', '?')}", max(values)


def _magnitude(value: Any) -> float | None:
    """``|value|`` of a JSON number (inf for an integer beyond float), None for anything else or NaN."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        out = abs(float(value))
    except OverflowError:
        return float("inf")
    return None if out != out else out


def _check_calibration_ranges(path: Path, model_path: Path, is_fp16: bool) -> list[Finding]:
    try:
        data = json.loads(
            limits.read_text(path, "a calibration report (calibration.json)", limits.MAX_SIDECAR_BYTES)
        )
    except FormatError as exc:  # a FIFO, a device or a huge file is refused before it is opened
        return [
            Finding("warning", "fp16-range", path.name, f"calibration report not readable ({exc.problem})")
        ]
    except (ValueError, RecursionError) as exc:
        return [Finding("warning", "fp16-range", path.name, f"calibration report not readable ({exc})")]
    known = find(model_path.name)
    stage = known.role.split(".")[0] if known is not None else None
    return [
        Finding(
            "error" if is_fp16 else "warning",
            "fp16-range",
            name,
            f"calibrated activation range +-{peak:.4g} exceeds fp16's {FP16_MAX:g} ({path.name}); keep this "
            "tensor in float32",
        )
        for name, peak in _ranges(data, stage)
        if peak > FP16_MAX
    ]
