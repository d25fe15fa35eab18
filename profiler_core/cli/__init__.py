"""``oprof``: the command-line adapter over profiler_core's public API.

Each subcommand lives in its own module beside this one and registers itself on ``app``
with :func:`command`, which turns a :class:`~profiler_core.errors.ProfilerError` into one
line on stderr and exit status 2 (never a traceback for a user error). Human output goes
to stderr through rich; ``--json`` output goes to stdout and nothing else does.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

from profiler_core.errors import ProfilerError

app = typer.Typer(
    name="oprof",
    help="Attribute NVIDIA hardware counters to PyTorch operators; diagnose, transform, re-measure.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Without a terminal rich assumes 80 columns; tables of kernel names need more.
err_console = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 150)


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

        app.command(name, **kwargs)(wrapper)
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
