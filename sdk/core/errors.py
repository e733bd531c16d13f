"""The one exception hierarchy of pairedge.

Every error pairedge raises on purpose is a :class:`PairedgeError`. Each subclass also derives from the
builtin exception a Python user would expect (``ValueError`` for bad input, ``ImportError`` for a missing
package, ...), so ``except ValueError`` keeps working. Messages say what was expected, what came, and how
to fix it; the CLI prints them as one line and exits with code 1.
"""

from __future__ import annotations

from pathlib import Path


class PairedgeError(Exception):
    """Base class of every error pairedge raises on purpose."""


class InputError(PairedgeError, ValueError):
    """Malformed input given through the Python API (arrays, arguments, configuration)."""


class FormatError(InputError):
    """A file does not follow its format. Names the file, the record and the problem.

    Args:
        path: the offending file (or a label such as ``"<pred>"`` for in-memory data).
        problem: what is wrong, phrased as expected vs got.
        record: where in the file (a line number, frame id, JSON path), if known.
    """

    def __init__(self, path: str | Path, problem: str, record: str | int | None = None) -> None:
        self.path = str(path)
        self.problem = problem
        self.record = record
        where = f"{self.path}" if record is None else f"{self.path}, record {record}"
        super().__init__(f"{where}: {problem}")


class MissingDependencyError(PairedgeError, ImportError):
    """An optional package is needed for this feature and is not installed."""


class ModelError(PairedgeError, ValueError):
    """A model file is unusable: unknown feature spec, missing metadata, unsafe external data, ..."""


class ModelIntegrityError(ModelError):
    """A model folder's file does not match its manifest (SHA-256 or size), or is missing / not listed."""


class BackendError(PairedgeError, RuntimeError):
    """A flow or classifier backend failed or is unavailable on this machine."""


class DeviceUnavailableError(BackendError):
    """The requested work needs hardware (GPU) or a runtime (TensorRT, CUDA) this machine lacks."""
