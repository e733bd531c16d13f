"""The one factory of ONNX Runtime sessions: classifiers, detectors, calibration and the export checks.

Every session pairedge makes has the same options: ``intra_op_threads`` threads of one operator, one
inter-op thread, sequential execution, a graph optimisation level, and ONNX Runtime's own log at FATAL
(severity 4) -- for the process-wide default logger as well as the session's. ONNX Runtime logs every error
it raises (``[E:onnxruntime:...] Non-zero status code ...``) before raising it; pairedge turns the exception
into its own one line, so at ERROR the user would read the same failure twice, ONNX Runtime's first. A load
failure is one :class:`SessionError` line with ONNX Runtime's first line of explanation; a session that
silently fell back to another provider is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pairedge.core.errors import BackendError

#: ``GraphOptimizationLevel`` by pairedge's name for it.
OPTIMIZATION_LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}
#: ONNX Runtime's log severity for pairedge's sessions (0 verbose ... 3 error, 4 fatal; see the module doc).
LOG_SEVERITY = 4
CPU = ("CPUExecutionProvider",)


class SessionError(BackendError):
    """ONNX Runtime could not make a session of a model (first line of its reason in the message)."""


class ProviderFallbackError(SessionError):
    """The session runs on another provider than the one asked for first (GPU libraries missing)."""


def onnxruntime() -> Any:
    """The ``onnxruntime`` module, its default logger at :data:`LOG_SEVERITY` (set once per process)."""
    import onnxruntime as ort

    ort.set_default_logger_severity(LOG_SEVERITY)
    return ort


def provider_unavailable(provider: str) -> str | None:
    """Why ONNX Runtime cannot run ``provider`` here (not importable, or not one of its providers), else
    None."""
    try:
        available = onnxruntime().get_available_providers()
    except ImportError as exc:
        return f"onnxruntime is not importable ({exc}); pip install onnxruntime"
    if provider not in available:
        return (
            f"{provider} is not offered by this onnxruntime (available: {', '.join(available)}); "
            "for GPU providers: pip uninstall -y onnxruntime && pip install onnxruntime-gpu"
        )
    return None


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's text (its type name when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def make_session(
    model: str | Path | bytes | Any,
    *,
    threads: int = 1,
    optimization: str = "all",
    providers: Sequence[Any] = CPU,
    what: str = "the model",
) -> Any:
    """An ``onnxruntime.InferenceSession`` of a path, serialized bytes or a ModelProto.

    Args:
        threads: intra-op threads (0: ONNX Runtime decides).
        optimization: a key of :data:`OPTIMIZATION_LEVELS`.
        providers: execution providers, preferred first (entries may be ``(name, options)`` pairs).
        what: how the error names the model (``"stage1.onnx"``, ``"the detector yolox.onnx"``).

    Raises:
        SessionError: ONNX Runtime refuses the model; ProviderFallbackError (a SessionError): the first
            provider is not the session's.
    """
    ort = onnxruntime()
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, OPTIMIZATION_LEVELS[optimization])
    so.log_severity_level = LOG_SEVERITY
    source = model.SerializeToString() if hasattr(model, "SerializeToString") else model
    try:
        session = ort.InferenceSession(
            source if isinstance(source, bytes) else str(source), so, providers=list(providers)
        )
    except Exception as exc:  # onnxruntime raises its own exception types (Fail, InvalidGraph, ...)
        raise SessionError(f"{what}: ONNX Runtime could not load it ({first_line(exc)})") from None
    wanted = providers[0][0] if isinstance(providers[0], tuple) else providers[0]
    if wanted not in session.get_providers():
        raise ProviderFallbackError(
            f"{what}: ONNX Runtime fell back to {session.get_providers()} instead of {wanted} "
            "(missing CUDA / TensorRT libraries?); run `pairedge doctor`"
        )
    return session
