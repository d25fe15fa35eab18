"""``oprof``: the command-line adapter over profiler_core's public API.

Each subcommand lives in its own module beside this one and registers itself on ``app``
with :func:`command`, which turns a :class:`~profiler_core.errors.ProfilerError` into one
line on stderr and exit status 2 (never a traceback for a user error). Streams: a command's
result (tables, findings, the paths it wrote) goes to stdout through ``out_console``, or as
JSON alone with ``--json``; progress, notes, warnings and errors go to stderr through
``err_console``. ``NO_COLOR`` turns off every colour and style. The flag conventions are in
docs/cli.md.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar
from typing import Any as _Any

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup

from profiler_core.errors import ProfilerError


def _flags_take_no_value(params: list[_Any]) -> list[_Any]:
    # typer shows every option's type; an on/off flag takes no value, so "--json", not "--json <bool>"
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class _Command(TyperCommand):
    def get_params(self, ctx: _Any) -> list[_Any]:
        return _flags_take_no_value(super().get_params(ctx))


class _Group(TyperGroup):
    def get_params(self, ctx: _Any) -> list[_Any]:
        return _flags_take_no_value(super().get_params(ctx))


app = typer.Typer(
    name="oprof",
    cls=_Group,
    help="Attribute NVIDIA hardware counters to PyTorch operators; diagnose, transform, re-measure.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    pretty_exceptions_enable=False,
)


def no_color() -> bool:
    """Whether ``NO_COLOR`` asks for output without colour (https://no-color.org: any non-empty value)."""
    return bool(os.environ.get("NO_COLOR"))


def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    # Without a terminal rich assumes 80 columns; tables of kernel names and paths need more.
    return Console(stderr=stderr, highlight=False, width=None if stream.isatty() else 200,
                   no_color=no_color() or None, color_system=None if no_color() else "auto")


err_console = _console(stderr=True)  # progress, notes, warnings, errors
out_console = _console(stderr=False)  # the command's result


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    """Attribute NVIDIA hardware counters to PyTorch operators; diagnose, transform, re-measure."""
    if version:
        from profiler_core import __version__

        typer.echo(__version__)
        raise typer.Exit(0)

F = TypeVar("F", bound=Callable[..., Any])

# Subcommand modules, imported (and so registered) when the app is first built.
_COMMAND_MODULES = (
    "profiler_core.cli.summary",
    "profiler_core.cli.attribute",
    "profiler_core.cli.capture",
    "profiler_core.cli.diagnose",
    "profiler_core.cli.compare",
    "profiler_core.cli.report",
    "profiler_core.cli.passes",
    "profiler_core.cli.optimize",
    "profiler_core.cli.demo",
    "profiler_core.cli.export",
)


def command(name: str | None = None, **kwargs: Any) -> Callable[[F], F]:
    """Register a subcommand whose ProfilerErrors become one clean line and exit status 2."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kw: Any) -> Any:
            try:
                return fn(*args, **kw)
            except ProfilerError as err:
                err_console.print(f"[bold red]error:[/] {err}", soft_wrap=True, markup=True)
                raise typer.Exit(err.exit_code) from None
            except KeyboardInterrupt:
                err_console.print("[bold red]interrupted[/]")
                raise typer.Exit(130) from None

        app.command(name, cls=_Command, **kwargs)(wrapper)
        return fn

    return decorate


def emit_json(payload: Any) -> None:
    """Print a JSON document on stdout (the only thing ``--json`` writes there)."""
    if hasattr(payload, "model_dump"):
        payload = payload.model_dump(mode="json")
    sys.stdout.write(json.dumps(payload, indent=1, default=str) + "\n")
    sys.stdout.flush()


def load_commands() -> typer.Typer:
    """Import every subcommand module (each registers itself) and return the app."""
    for module in _COMMAND_MODULES:
        importlib.import_module(module)
    return app


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    load_commands()
    app(args=argv, prog_name="oprof")
