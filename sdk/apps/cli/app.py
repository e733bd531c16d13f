"""The Typer application and its error boundary.

Commands are thin: parse options, call one library function, print. Each command module registers itself
on :data:`app`; heavy imports happen inside the command bodies so ``pairedge --help`` needs only the core
dependencies.

The boundary (:func:`handle_errors` on every command, :class:`PairedgeGroup` around the whole program):

* a :class:`~pairedge.core.errors.PairedgeError` -> its message as one line on stderr, exit code 1;
* any other exception (``OSError``, ``ValueError``, ``MemoryError``, ``cv2.error``, ...) -> one line
  on stderr naming the command, its input files and what failed, exit code 1 (never a traceback);
* a usage error (unknown option, missing or invalid value) -> one line on stderr, exit code 2 (the Unix
  convention for "wrong command line");
* ``PAIREDGE_DEBUG=1`` (or ``pairedge --debug COMMAND``) re-raises instead, with the full traceback.

Every message is escaped before Rich prints it, so text like ``pip install 'pairedge[train]'`` or a file
named ``x[/]y.mp4`` prints intact.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import typer
from pairedge.core.errors import PairedgeError
from pairedge.core.version import __version__
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

#: Environment variable that makes the CLI re-raise errors with their traceback (for developers).
DEBUG_ENV = "PAIREDGE_DEBUG"
_DEBUG_META = "pairedge.debug"
#: The longest error line printed; longer messages keep their start and end.
MAX_MESSAGE = 1000

console = Console()
err_console = Console(stderr=True)


def one_line(message: str, limit: int = MAX_MESSAGE) -> str:
    """``message`` with every run of whitespace (newlines included) made one space, cut to ``limit`` chars."""
    text = " ".join(str(message).split())
    if len(text) > limit:
        keep = (limit - 5) // 2
        text = f"{text[:keep]} ... {text[-keep:]}"
    return text


def print_error(message: str) -> None:
    """``message`` as one escaped line ``error: ...`` on stderr."""
    err_console.print(
        f"[bold red]error:[/] {escape(one_line(message))}", highlight=False, soft_wrap=True, crop=False
    )


def fail(message: str) -> typer.Exit:
    """Print ``message`` as one line on stderr and return the exit to raise (code 1)."""
    print_error(message)
    return typer.Exit(code=1)


def debug_enabled() -> bool:
    """True with ``pairedge --debug ...`` or when ``PAIREDGE_DEBUG`` is set to a true value."""
    from typer.main import get_current_context

    ctx = get_current_context(silent=True)
    if ctx is not None and ctx.meta.get(_DEBUG_META):
        return True
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def describe(exc: BaseException) -> str:
    """What an unexpected exception means for the user, one line (no traceback)."""
    if isinstance(exc, OSError):
        names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
        reason = exc.strerror or str(exc) or type(exc).__name__
        return f"{' -> '.join(names)}: {reason}" if names else f"{type(exc).__name__}: {reason}"
    if isinstance(exc, MemoryError):
        return "out of memory (MemoryError); the input is too large for this machine"
    if isinstance(exc, RecursionError):
        return "input nested too deeply (RecursionError)"
    text = one_line(str(exc))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _inputs(kwargs: dict[str, Any]) -> str:
    """``name=value`` of the command's path arguments that were given, for the error line."""
    given = [f"{name.replace('_', '-')}={value}" for name, value in kwargs.items() if isinstance(value, Path)]
    return f" ({', '.join(given)})" if given else ""


def _mark_debug(exc: BaseException) -> None:
    """Tell :class:`PairedgeGroup` to let ``exc`` through (``--debug`` lives in the command's context)."""
    try:
        setattr(exc, _DEBUG_META, True)
    except (AttributeError, TypeError):  # an exception type without attributes: the env var still works
        pass


def _reraise(exc: BaseException) -> bool:
    return debug_enabled() or bool(getattr(exc, _DEBUG_META, False))


P = ParamSpec("P")
R = TypeVar("R")


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Decorator for commands: any error becomes one line on stderr and exit code 1, no traceback.

    A :class:`PairedgeError` prints its own message (it names the file, record and problem). Anything else
    prints the command, its path arguments and the exception; ``PAIREDGE_DEBUG=1`` re-raises it instead.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException, KeyboardInterrupt):
            raise
        except PairedgeError as exc:
            if debug_enabled():
                _mark_debug(exc)
                raise
            raise fail(str(exc)) from None
        except Exception as exc:  # the boundary: nothing escapes as a traceback
            if debug_enabled():
                _mark_debug(exc)
                raise
            command = func.__name__.removesuffix("_command")
            raise fail(
                f"pairedge {command}{_inputs(dict(kwargs))}: {describe(exc)} "
                f"(set {DEBUG_ENV}=1 for the traceback)"
            ) from None

    return wrapper


class PairedgeGroup(TyperGroup):
    """The root command: usage errors as one line (exit 2) and a backstop for errors outside commands."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.TyperException as exc:  # usage errors (click's): one line, their exit code (2)
            if type(exc).__name__ == "NoArgsIsHelpError":  # `pairedge` alone: the help is already printed
                sys.exit(exc.exit_code)
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            print_error(exc.format_message() + hint)
            sys.exit(exc.exit_code)
        except typer.Abort:
            print_error("aborted")
            sys.exit(1)
        except (KeyboardInterrupt, EOFError):
            print_error("interrupted")
            sys.exit(130)
        except PairedgeError as exc:  # raised outside a command body (e.g. a parameter callback)
            if _reraise(exc):
                raise
            print_error(str(exc))
            sys.exit(1)
        except Exception as exc:
            if _reraise(exc):
                raise
            print_error(f"pairedge: {describe(exc)} (set {DEBUG_ENV}=1 for the traceback)")
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    name="pairedge",
    help="Pairwise human-interaction models from PyTorch to a robot.",
    cls=PairedgeGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        console.print(__version__, highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False,
        "--version",
        help="Print the pairedge version and exit.",
        callback=_print_version,
        is_eager=True,
        expose_value=True,
    ),
    debug: bool = typer.Option(
        False, "--debug", help=f"Show the full traceback of an error (same as {DEBUG_ENV}=1)."
    ),
) -> None:
    """Pairwise human-interaction models from PyTorch to a robot."""
    ctx.meta[_DEBUG_META] = debug


def main() -> None:
    """Console-script entry point (``pairedge``; also ``python -m pairedge.apps.cli``)."""
    app()
