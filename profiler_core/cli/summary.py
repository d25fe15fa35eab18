"""``oprof summary PROFILE.json``: print a validated profile's headline figures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from profiler_core import api
from profiler_core.attribution.operator_table import slowest
from profiler_core.cli import command, emit_json, out_console
from profiler_core.cli.outputs import PROFILE_HELP


@command("summary", acyclic=True)
def summary(
    profile: Annotated[Path, typer.Argument(help=PROFILE_HELP)],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    """Validate a profile.json and print its coverage and top operators."""
    prof = api.load_profile(profile)
    if as_json:
        emit_json({"operators": len(prof.operators), "kernels": len(prof.kernels),
                   "coverage": prof.coverage.model_dump(mode="json")})
        return
    table = Table(title=f"{profile}: {len(prof.kernels)} kernels, {len(prof.operators)} operators")
    table.add_column("operator")
    table.add_column("time (us)", justify="right")
    for op in slowest(prof.operators, 10):
        table.add_row(op.key, f"{op.duration_ns / 1e3:.1f}")
    out_console.print(table)
