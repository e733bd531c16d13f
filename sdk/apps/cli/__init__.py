"""``pairedge`` command line. Importing this package registers every command on :data:`app`."""

from __future__ import annotations

from pairedge.apps.cli import bench as _bench  # noqa: F401  (registers the command)
from pairedge.apps.cli import build as _build  # noqa: F401  (registers the command)
from pairedge.apps.cli import calibrate as _calibrate  # noqa: F401  (registers the command)
from pairedge.apps.cli import check as _check  # noqa: F401  (registers the command)
from pairedge.apps.cli import demo as _demo  # noqa: F401  (registers the command)
from pairedge.apps.cli import doctor as _doctor  # noqa: F401  (registers the command)
from pairedge.apps.cli import eval as _eval  # noqa: F401  (registers the command)
from pairedge.apps.cli import export as _export  # noqa: F401  (registers the command)
from pairedge.apps.cli import parity as _parity  # noqa: F401  (registers the command)
from pairedge.apps.cli import run as _run  # noqa: F401  (registers the command)
from pairedge.apps.cli import score as _score  # noqa: F401  (registers the command)
from pairedge.apps.cli import simulate as _simulate  # noqa: F401  (registers the command)
from pairedge.apps.cli import train as _train  # noqa: F401  (registers the command)
from pairedge.apps.cli.app import app, main

__all__ = ["app", "main"]
