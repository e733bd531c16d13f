"""``pairedge`` command line. Importing this package registers every command on :data:`app`."""

from __future__ import annotations

from pairedge.cli import bench as _bench  # noqa: F401  (registers the command)
from pairedge.cli import build as _build  # noqa: F401  (registers the command)
from pairedge.cli import calibrate as _calibrate  # noqa: F401  (registers the command)
from pairedge.cli import check as _check  # noqa: F401  (registers the command)
from pairedge.cli import demo as _demo  # noqa: F401  (registers the command)
from pairedge.cli import doctor as _doctor  # noqa: F401  (registers the command)
from pairedge.cli import eval as _eval  # noqa: F401  (registers the command)
from pairedge.cli import export as _export  # noqa: F401  (registers the command)
from pairedge.cli import parity as _parity  # noqa: F401  (registers the command)
from pairedge.cli import run as _run  # noqa: F401  (registers the command)
from pairedge.cli import score as _score  # noqa: F401  (registers the command)
from pairedge.cli import simulate as _simulate  # noqa: F401  (registers the command)
from pairedge.cli import train as _train  # noqa: F401  (registers the command)
from pairedge.cli.app import app, main

__all__ = ["app", "main"]
