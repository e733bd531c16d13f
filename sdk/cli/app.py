"""The Typer application and the boundary that turns :class:`PairedgeError` into exit code 1.

Commands are thin: parse options, call one library function, print. Each command module registers itself
on :data:`app`; heavy imports happen inside the command bodies so ``pairedge --help`` needs only the core
dependencies.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer
from pairedge.errors import PairedgeError
from rich.console import Console

app = typer.Typer(
    name="pairedge",
    help="Pairwise human-interaction models from PyTorch to a robot.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

console = Console()
err_console = Console(stderr=True)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the pairedge version and exit."),
) -> None:
    """Pairwise human-interaction models from PyTorch to a robot."""
    if version:
        from pairedge import __version__

        console.print(__version__)
        raise typer.Exit()


P = ParamSpec("P")
R = TypeVar("R")


def fail(message: str) -> typer.Exit:
    """Print ``message`` as one line on stderr and return the exit to raise (code 1)."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code=1)


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Decorator for commands: a PairedgeError becomes one line on stderr and exit code 1, no traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except PairedgeError as exc:
            raise fail(str(exc)) from None

    return wrapper


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except PairedgeError as exc:  # backstop for errors raised outside a command body
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(1)
