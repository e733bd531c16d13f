"""Reading MATLAB v5 files with scipy, with an optional crash probe in a child process.

``scipy.io.loadmat`` can crash the whole interpreter (segmentation fault) on some corrupted files; a
two-byte edit of a valid file is enough with scipy 1.17. A crash cannot be caught in Python, so with
``isolate=True`` :class:`MatLoader` first parses the files in a separate Python process
(``sys.executable -c ...``) and loads only those that survived in this process; a file that crashed the
probe becomes a :class:`FormatError` naming it. Nothing is transferred back from the child (no pickles): it
only reports how far it got. :meth:`MatLoader.check` probes many files with one process start.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pairedge._optional import require
from pairedge.errors import FormatError

PURPOSE = "reading MATLAB .mat files"
PROBE_TIMEOUT_S = 120.0
_OPTIONS = {"squeeze_me": False, "struct_as_record": True}
_PROBE = (
    "import sys, scipy.io\n"
    "for i, p in enumerate(sys.argv[1:]):\n"
    "    try:\n"
    f"        scipy.io.loadmat(p, **{_OPTIONS!r})\n"
    "    except Exception:\n"
    "        pass\n"
    "    print(i, flush=True)\n"
)


def crashing_files(paths: Iterable[Path], timeout: float = PROBE_TIMEOUT_S) -> set[Path]:
    """The files on which ``scipy.io.loadmat`` kills the process, found in child processes.

    Runs one child for all files; when it dies on a file, that file is recorded and a new child continues
    with the rest. A child that exceeds ``timeout`` seconds marks the file it was reading as crashing.
    """
    remaining = [Path(p) for p in paths]
    crashed: set[Path] = set()
    while remaining:
        try:
            run = subprocess.run(
                [sys.executable, "-c", _PROBE, *map(str, remaining)],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            stdout, ok = run.stdout, run.returncode == 0
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout or b""
            stdout, ok = out.decode() if isinstance(out, bytes) else out, False
        done = len(stdout.split())
        if ok and done == len(remaining):
            break
        crashed.add(remaining[done])
        remaining = remaining[done + 1 :]
    return crashed


class MatLoader:
    """Loads ``.mat`` files into dicts of numpy arrays (structs as numpy records).

    Args:
        isolate: probe each file in a child process first (see the module docstring).
        purpose: what the files are for, used in the message when scipy is missing.
    """

    def __init__(self, isolate: bool = True, purpose: str = PURPOSE) -> None:
        self._sio = require("scipy.io", extra="data", purpose=purpose)
        self.isolate = isolate
        self._safe: set[Path] = set()
        self._crashed: set[Path] = set()

    def check(self, paths: Iterable[str | Path]) -> None:
        """Probe several files with one child process (isolated mode; a no-op otherwise)."""
        if not self.isolate:
            return
        todo = [Path(p).resolve() for p in paths]
        todo = [p for p in todo if p.is_file() and p not in self._safe and p not in self._crashed]
        if todo:
            bad = crashing_files(todo)
            self._crashed |= bad
            self._safe |= set(todo) - bad

    def load(self, path: str | Path) -> dict[str, Any]:
        """The variables of a MATLAB file.

        Raises:
            FormatError: file missing, not a readable MATLAB file, or scipy crashed on it (isolated mode).
        """
        path = Path(path)
        if not path.is_file():
            raise FormatError(path, "file not found")
        self.check([path])
        if path.resolve() in self._crashed:
            raise FormatError(
                path,
                "expected a MATLAB v5 .mat file; the MATLAB reader (scipy) crashed on it, the file is corrupt",
            )
        try:
            return self._sio.loadmat(str(path), **_OPTIONS)
        except Exception as exc:  # scipy raises assorted errors on corrupt or truncated files
            raise FormatError(path, f"expected a MATLAB v5 .mat file, could not read it: {exc}") from None
