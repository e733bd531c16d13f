"""``pairedge`` command line. Importing this package registers every command on :data:`app`."""

from __future__ import annotations

from pairedge.cli import doctor as _doctor  # noqa: F401  (registers the command)
from pairedge.cli.app import app, main

__all__ = ["app", "main"]
