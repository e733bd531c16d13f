"""TensorRT's log routed to Python :mod:`logging` (logger ``pairedge.tensorrt``).

The class must subclass ``tensorrt.ILogger``, so it is defined inside :func:`make_logger` and importing
this module never needs TensorRT. The logger also keeps the last error messages, which the builder puts
into its exception when a build fails.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

LOG = logging.getLogger("pairedge.tensorrt")


def make_logger(trt: Any, *, verbose: bool = False, keep: int = 20) -> Any:
    """A ``trt.ILogger`` that forwards to :data:`LOG` and remembers the last ``keep`` errors.

    Args:
        trt: the imported ``tensorrt`` module.
        verbose: also forward TensorRT's VERBOSE messages (as DEBUG).
        keep: how many ERROR / INTERNAL_ERROR messages to remember (``.errors``).
    """
    severity = trt.ILogger.Severity
    levels = {
        severity.INTERNAL_ERROR: logging.CRITICAL,
        severity.ERROR: logging.ERROR,
        severity.WARNING: logging.WARNING,
        severity.INFO: logging.INFO,
        severity.VERBOSE: logging.DEBUG,
    }
    errors = {severity.INTERNAL_ERROR, severity.ERROR}

    class _PythonLogger(trt.ILogger):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.errors: deque[str] = deque(maxlen=keep)

        def log(self, sev: Any, msg: str) -> None:
            if sev == severity.VERBOSE and not verbose:
                return
            if sev in errors:
                self.errors.append(str(msg))
            LOG.log(levels.get(sev, logging.INFO), "%s", msg)

    return _PythonLogger()
