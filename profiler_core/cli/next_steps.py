"""The ``Next:`` commands a command ends with, spelled so that they run as printed in a new shell.

A project virtualenv (``.venv``) is not on a new shell's ``PATH``: a bare ``oprof`` there fails
with "command not found". So the commands name the program the way this process was installed:

    oprof_program()  ->  Invocation("oprof", None)                        # installed on PATH (pipx, a global pip)
    oprof_program()  ->  Invocation(".venv/bin/oprof", "or activate ...")  # the checkout's .venv, not active
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from profiler_core.cli import out_console


@dataclass(frozen=True, slots=True)
class Invocation:
    """How a new shell runs oprof, and a note when that is more than the bare name."""

    program: str
    note: str | None = None


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it, else in full."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _in_virtualenv() -> bool:
    return sys.prefix != getattr(sys, "base_prefix", sys.prefix)


def oprof_program() -> Invocation:
    """The command that runs this oprof from a new shell in the current directory."""
    scripts = Path(sys.prefix) / ("Scripts" if os.name == "nt" else "bin")
    here = scripts / ("oprof.exe" if os.name == "nt" else "oprof")
    on_path = shutil.which("oprof")
    if not _in_virtualenv() and on_path is not None:
        return Invocation("oprof")  # a global or user install: on every shell's PATH
    if here.is_file():
        activate = scripts / ("activate.bat" if os.name == "nt" else "activate")
        how = _shown(activate) if os.name == "nt" else f"source {_shown(activate)}"
        return Invocation(_shown(here), f"or activate the environment once ({how}) and type oprof")
    python = _shown(Path(sys.executable))
    return Invocation(f"{python} -m profiler_core", "oprof is not installed as a command here")


def print_next_steps(steps: list[tuple[str, str]]) -> None:
    """Print ``Next:`` and each command (its ``oprof`` spelled as :func:`oprof_program` says) with what it shows.

    Each command is given as it would be typed with oprof on the PATH (``"oprof report ..."``).
    """
    run = oprof_program()
    out_console.print("Next (from this directory):", markup=False)
    for cmd, why in steps:
        shown = run.program + cmd[len("oprof"):] if cmd.startswith("oprof ") else cmd
        out_console.print(f"  {shown}", markup=False, soft_wrap=True)
        out_console.print(f"      {why}", markup=False, soft_wrap=True, style="dim")
    if run.note is not None:
        out_console.print(f"  ({run.note})", markup=False, soft_wrap=True, style="dim")
