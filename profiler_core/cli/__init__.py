"""``oprof``: the command-line adapter over profiler_core's public API.

Each subcommand lives in its own module beside this one, imported only when that command runs
(see :data:`COMMANDS`), and registers itself on ``app`` with :func:`command`, which turns a
:class:`~profiler_core.errors.ProfilerError`, a file system error (a read-only mount, a full
disk) or an input too large or too deep into one line on stderr and exit status 2 (never a
traceback for a user error); Ctrl-C is one line and status 130, SIGTERM removes half-written
temp files and exits 143. Streams: a command's result (tables, findings, the paths it wrote)
goes to stdout through ``out_console``, or as JSON alone with ``--json``; progress, notes,
warnings and errors go to stderr through ``err_console``. ``NO_COLOR`` turns off every colour
and style. The flag conventions are in docs/cli.md.
"""

from __future__ import annotations

import functools
import importlib
import os
import signal
import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar
from typing import Any as _Any

import typer
import typer.main
from rich.console import Console
from typer.core import TyperCommand, TyperGroup

from profiler_core.echo import clip_message
from profiler_core.errors import ProfilerError
from profiler_core.gc_pause import gc_paused
from profiler_core.json_output import json_document, json_pieces, write_json
from profiler_core.numpy_pages import small_pages


def _flags_take_no_value(params: list[_Any]) -> list[_Any]:
    # typer shows every option's type; an on/off flag takes no value, so "--json", not "--json <bool>"
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class _Command(TyperCommand):
    def get_params(self, ctx: _Any) -> list[_Any]:
        return _flags_take_no_value(super().get_params(ctx))


# Every subcommand: its module (which registers it with :func:`command` when imported) and the
# first paragraph of its help, shown by ``oprof --help`` without importing the module. The order is
# the order of ``oprof --help``. tests/cli/test_lazy_cli.py checks this table against the commands.
COMMANDS: dict[str, tuple[str, str]] = {
    "summary": ("profiler_core.cli.summary",
                "Validate a profile.json and print its coverage and top operators."),
    "attribute": ("profiler_core.cli.attribute",
                  "Attribute every kernel to its operator, with counters and evidence tiers."),
    "capture": ("profiler_core.cli.capture",
                "Capture a workload: Kineto + Inductor artifacts, nsys timeline, ncu counters, checked."),
    "diagnose": ("profiler_core.cli.diagnose",
                 "Map the profile's measured symptoms to bottlenecks and the transformations they license."),
    "compare": ("profiler_core.cli.compare",
                "Compare an optimized profile with its baseline: per class, per operator, per counter."),
    "report": ("profiler_core.cli.report",
               "Report a profile: where the time went, why, and (with --baseline) what changed."),
    "apply-pass": ("profiler_core.cli.passes",
                   "Apply graph passes to a workload, validate its outputs, and write the plan and "
                   "optimized workload."),
    "passes": ("profiler_core.cli.passes",
               "List the registered passes with their level and the profile symptom each addresses."),
    "optimize": ("profiler_core.cli.optimize",
                 "Capture, diagnose, apply passes, validate, re-capture, keep what is faster; write a run "
                 "directory."),
    "yardstick": ("profiler_core.cli.yardstick",
                  "Time a finished optimize run again beside the recipe a user would write instead; no new "
                  "capture."),
    "demo": ("profiler_core.cli.demo",
             "Run the closed loop live on a GPU, or its analysis half on the shipped H200 captures."),
    "export": ("profiler_core.cli.export",
               "Write the profile as two CSV tables: one row per kernel, one per operator."),
}


class _Group(TyperGroup):
    """The ``oprof`` group: a subcommand's module is imported only when that command runs.

    Listing the commands (``oprof --help``, shell completion of a command name) shows each one's
    help from :data:`COMMANDS` and imports nothing, so ``oprof --help`` does not pay for torch.
    """

    _listing = False

    def get_params(self, ctx: _Any) -> list[_Any]:
        return _flags_take_no_value(super().get_params(ctx))

    def list_commands(self, ctx: _Any) -> list[str]:
        return [*COMMANDS, *(name for name in self.commands if name not in COMMANDS)]

    def get_command(self, ctx: _Any, cmd_name: str) -> _Any:
        if cmd_name in self.commands or cmd_name not in COMMANDS:
            return self.commands.get(cmd_name)
        module, short_help = COMMANDS[cmd_name]
        if self._listing:
            return TyperCommand(cmd_name, help=short_help)
        importlib.import_module(module)
        [info] = [i for i in app.registered_commands if i.name == cmd_name]
        self.add_command(typer.main.get_command_from_info(
            info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=app.rich_markup_mode))
        return self.commands[cmd_name]

    def _list_only(self, method: Callable[..., Any], *args: Any) -> Any:
        self._listing = True
        try:
            return method(*args)
        finally:
            self._listing = False

    def format_help(self, ctx: _Any, formatter: _Any) -> None:
        self._list_only(super().format_help, ctx, formatter)

    def shell_complete(self, ctx: _Any, incomplete: str) -> list[_Any]:
        return self._list_only(super().shell_complete, ctx, incomplete)  # type: ignore[no-any-return]

    def resolve_command(self, ctx: _Any, args: list[str]) -> tuple[str | None, _Any, list[str]]:
        if not args or args[0] in self.commands or args[0] in COMMANDS:
            return super().resolve_command(ctx, args)
        # an unknown name: typer's "Did you mean" looks in self.commands; let it see every command
        loaded = self.commands
        self.commands = {**dict.fromkeys(COMMANDS), **loaded}  # type: ignore[dict-item]
        try:
            return super().resolve_command(ctx, args)
        finally:
            self.commands = loaded


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


def _print_version(value: bool) -> None:
    if value:
        from profiler_core import __version__

        typer.echo(f"oprof {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                 help="Print the version and exit."),
) -> None:
    """Attribute NVIDIA hardware counters to PyTorch operators; diagnose, transform, re-measure."""

F = TypeVar("F", bound=Callable[..., Any])
ACYCLIC: set[str] = set()  # the commands registered ``acyclic`` (the cyclic collector paused for all of it)

def _fail(message: str, code: int = 2) -> typer.Exit:
    message = clip_message(message)  # a huge value in a message is shown as a prefix
    err_console.print(f"[bold red]error:[/] {message}", soft_wrap=True, markup=True, highlight=False)
    return typer.Exit(code)


def _os_error_message(err: OSError) -> str:
    where = err.filename if err.filename else "stdout"
    return f"{where}: {err.strerror or err}; check the path, its permissions and the free space"


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush cannot fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def command(name: str | None = None, *, acyclic: bool = False, **kwargs: Any) -> Callable[[F], F]:
    """Register a subcommand whose user errors become one clean line and exit status 2.

    ``acyclic``: the command reads files and builds plain data (models, rows, tables) that form no
    reference cycles, so the cyclic collector is paused for all of it. Between the blocks that pause
    it themselves, each of its passes over a large profile's models cost seconds and freed nothing
    (the 100k-kernel diagnose: 14.1 s CPU with it, 11.9 s without, the same peak). Never for a command
    that runs a workload: torch's objects do form cycles. Such a command also runs with NumPy's
    huge-page advice off (``numpy_pages``: the system time of its large temporaries).
    """

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kw: Any) -> Any:
            try:
                if acyclic:
                    with gc_paused(), small_pages():
                        return fn(*args, **kw)
                return fn(*args, **kw)
            except ProfilerError as err:
                raise _fail(str(err), err.exit_code) from None
            except KeyboardInterrupt:
                err_console.print("[bold red]interrupted[/]")
                raise typer.Exit(130) from None
            except OSError as err:
                if err.filename is None:
                    _silence_stdout()  # stdout itself failed (a full disk, a closed pipe)
                raise _fail(_os_error_message(err)) from None
            except RecursionError:
                raise _fail("an input is nested too deeply to be an artifact oprof reads; pass the real file") \
                    from None
            except MemoryError:
                raise _fail("ran out of memory reading the inputs; pass the artifacts themselves (a trace, "
                            "not a device or a huge unrelated file)") from None

        app.command(name, cls=_Command, **kwargs)(wrapper)
        if acyclic:
            ACYCLIC.add(name or fn.__name__)
        return fn

    return decorate


def emit_json(payload: Any, *, listed: str | None = None, items: Iterable[Any] = ()) -> None:
    """Print a JSON document on stdout (the only thing ``--json`` writes there); ``listed``: a key of
    the payload whose value is the list of ``items``, written a batch at a time (:func:`json_pieces`)."""
    pieces = json_pieces(payload, listed, items) if listed is not None else iter((json_document(payload),))
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a text-only stream (some test harnesses)
        for data in pieces:
            sys.stdout.write(data.decode())
    else:
        write_json(buffer, pieces)
        buffer.flush()
    sys.stdout.flush()


def load_commands() -> typer.Typer:
    """Import every subcommand module (each registers itself) and return the app.

    ``oprof`` itself imports a command's module only when that command runs; this is for callers
    that inspect every command (the tests, documentation).
    """
    for module, _ in COMMANDS.values():
        importlib.import_module(module)
    return app


def _terminate(signum: int, _frame: Any) -> None:
    """SIGTERM as an exception: ``finally`` clauses (temp-file removal) run before the exit."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        app(args=argv, prog_name="oprof")
    except KeyboardInterrupt:  # while a command loads; inside one, its wrapper answers
        sys.stderr.write("oprof: interrupted\n")
        raise SystemExit(130) from None
