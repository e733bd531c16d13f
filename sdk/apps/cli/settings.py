"""Command-line options generated from the run settings (:data:`pairedge.runtime.settings.SETTINGS`).

A command names the settings it takes; :func:`with_settings` adds one Typer option per setting -- its flag,
type, default, bounds, choices and help all read off the setting's field -- and hands the command the
values as one :class:`Chosen` in its ``settings`` parameter::

    @app.command()
    @handle_errors
    @with_settings("precision", "backend", "flow")
    def eval(data: str = typer.Argument(...), *, settings: Chosen) -> None:
        run = settings.run()            # RunSettings: deployment, config, detector

So ``pairedge run``, ``eval``, ``parity`` and the others cannot disagree on a default or a help text: there is
one of each, on the field.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from enum import Enum
from typing import Any, TypeVar

import typer
from pairedge.core.settings import Setting
from pairedge.runtime.settings import SETTINGS, RunSettings
from rich.markup import escape
from typer.main import get_current_context

F = TypeVar("F", bound=Callable[..., Any])

#: The parameter of a decorated command that receives the settings.
PARAMETER = "settings"
#: Where a value came from when the user did not give it (click's ``ParameterSource`` names).
_DEFAULTS = ("DEFAULT", "DEFAULT_MAP")


class Chosen(Mapping[str, Any]):
    """The settings a command was given (setting name -> value, defaults included); :attr:`given`: the
    names set on the command line (or in the environment), not left at their default."""

    def __init__(self, values: Mapping[str, Any], given: frozenset[str] = frozenset()) -> None:
        self._values = dict(values)
        self.given = given

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def run(self, base: RunSettings | None = None, **extra: Any) -> RunSettings:
        """The :class:`RunSettings` of these values (and of ``extra``, more settings by name) applied to
        ``base`` (default: every other setting at its default)."""
        return RunSettings.from_values({**self._values, **extra}, base)


def option_for(
    s: Setting, panel: str | None = None, defaults: Mapping[str, Any] | None = None, note: str | None = None
) -> tuple[Any, Any]:
    """The annotation and the ``typer.Option`` of one setting; ``defaults[s.name]`` (when there) and ``note``
    (a sentence added to the help) are a command's own reading of it."""
    value = (defaults or {}).get(s.name, s.default)
    kind: Any = s.kind
    if s.choices:  # a closed set of names: a value outside it is a usage error (exit 2) that lists them
        kind = Enum(s.name, {c: c for c in s.choices}, type=str)  # type: ignore[misc]
        value = None if value is None else kind(value)
    annotation: Any = kind | None if s.optional or value is None else kind
    bounds = {"min": s.low, "max": s.high} if s.kind in (int, float) else {}
    text = s.help if note is None else f"{s.help} {note}"
    option = typer.Option(
        value,
        s.flag,
        help=escape(text),  # Rich reads the help as markup: "pip install 'pairedge[trackers]'" stays intact
        rich_help_panel=panel,
        show_default=value is not None,
        case_sensitive=False,
        **{k: v for k, v in bounds.items() if v is not None},
    )
    return annotation, option


def _plain(value: Any) -> Any:
    """A choice's name (the options of settings with choices are enums for Typer), else the value."""
    return value.value if isinstance(value, Enum) else value


def _given(values: Mapping[str, Any]) -> frozenset[str]:
    """The names of ``values`` the user set (click's parameter source), outside a command: none."""
    ctx = get_current_context(silent=True)  # Typer's context (its click may not be the installed one)
    if ctx is None:
        return frozenset()
    sources = {n: ctx.get_parameter_source(n) for n in values}
    return frozenset(n for n, src in sources.items() if src is not None and src.name not in _DEFAULTS)


def with_settings(
    *names: str,
    panel: str | None = None,
    defaults: Mapping[str, Any] | None = None,
    notes: Mapping[str, str] | None = None,
) -> Callable[[F], F]:
    """Give the decorated command an option for each run setting of ``names`` (in that order, after its own
    options); the command receives them as ``settings: Chosen``.

    ``defaults``: another default where the command reads a setting in its own way (``parity record`` runs
    the reference on the CPU backend; ``build --detector`` is a mode, off unless given); ``notes``: a
    sentence added to a setting's help for this command. Both are rare and stay beside the command.

    Raises:
        KeyError: a name that is no run setting (a programming error, at import).
        TypeError: the command has no ``settings`` parameter, or already an option of that name.
    """
    chosen = [SETTINGS[n] for n in names]

    def decorate(func: F) -> F:
        signature = inspect.signature(func)
        if PARAMETER not in signature.parameters:
            raise TypeError(f"{func.__name__}: needs a keyword-only parameter {PARAMETER!r}")
        own = [p for p in signature.parameters.values() if p.name != PARAMETER]
        clash = {p.name for p in own} & set(names)
        if clash:
            raise TypeError(f"{func.__name__}: declares its own option(s) {sorted(clash)} of a run setting")
        generated = []
        annotations = {k: v for k, v in func.__annotations__.items() if k != PARAMETER}
        for s in chosen:
            annotation, option = option_for(s, panel, defaults, (notes or {}).get(s.name))
            generated.append(
                inspect.Parameter(
                    s.name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation
                )
            )
            annotations[s.name] = annotation

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = {n: _plain(kwargs.pop(n)) for n in names if n in kwargs}
            return func(*args, **kwargs, **{PARAMETER: Chosen(values, _given(values))})

        keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
        shown = signature.replace(parameters=[*keyword, *generated])  # what Typer reads the options from
        wrapper.__signature__ = shown  # type: ignore[attr-defined]
        wrapper.__annotations__ = annotations
        return wrapper  # type: ignore[return-value]

    return decorate
