"""``oprof diagnose PROFILE.json``: findings (symptom -> bottleneck -> transformation) with their bounds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from profiler_core import api
from profiler_core.cli import command, emit_json, out_console
from profiler_core.cli.outputs import PROFILE_HELP, write_output
from profiler_core.report.terminal import findings_renderables, profile_renderables


@command("diagnose", acyclic=True)
def diagnose_command(
    profile: Annotated[Path, typer.Argument(help=PROFILE_HELP)],
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON on stdout.")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="Also write the findings JSON here.")] = None,
    threshold: Annotated[list[str] | None, typer.Option(
        "--threshold", help="Override a threshold, NAME=VALUE (repeatable; see docs/diagnose.md).")] = None,
    roofline: Annotated[bool, typer.Option(
        "--roofline/--no-roofline", help="Judge operators against the chip's roofline: flag those far below "
                                         "both roofs and cap precision-change gain bounds by the target "
                                         "roofline (docs/roofline.md); --no-roofline leaves both out.")
    ] = True,
) -> None:
    """Map the profile's measured symptoms to bottlenecks and the transformations they license."""
    from profiler_core.analysis.profile_view import shared_views

    prof = api.load_profile(profile)
    with shared_views():  # the rules and the summary read one view of the profile
        report = api.diagnose_profile(prof, threshold_overrides=threshold, roofline=roofline)
        if out is not None:
            write_output(out, report.model_dump_json(indent=1))
        if as_json:
            emit_json(report)
            return
        renderables = [*profile_renderables(prof, top_k=5), *findings_renderables(report)]
    for item in renderables:
        out_console.print(item)
    if out is not None:
        out_console.print(f"findings written to {out}", markup=False)
