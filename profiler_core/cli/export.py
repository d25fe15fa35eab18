"""``oprof export PROFILE --out DIR``: kernels.csv and operators.csv for spreadsheets and notebooks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from profiler_core import api
from profiler_core.cli import command, out_console
from profiler_core.cli.outputs import PROFILE_HELP
from profiler_core.report.frames import write_csv


@command("export", acyclic=True)
def export_cmd(
    profile: Annotated[Path, typer.Argument(help=PROFILE_HELP)],
    out: Annotated[Path, typer.Option(help="Directory for kernels.csv and operators.csv.")] = Path("."),
) -> None:
    """Write the profile as two CSV tables: one row per kernel, one per operator."""
    kernels, operators = write_csv(api.load_profile(profile), out)
    out_console.print(f"wrote {kernels} and {operators}")
