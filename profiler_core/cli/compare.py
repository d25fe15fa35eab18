"""``oprof compare BASE.json OPT.json``: time and counter deltas, a verdict, and a CI gate.

The verdict leads with wall time per step when the two runs have one recorded beside them
(``walltime.json`` or ``optimize.json`` next to ``baseline/``), profiled kernel time second.

Exit status: 0 when the gate passes (or none is set), 1 when ``--fail-if-slower PCT`` trips,
2 for a user error (missing or invalid profile, or two different workloads:
``WorkloadMismatchError``, which ``--force`` overrides). Comparability warnings go to stderr in every
mode, and into the JSON and markdown outputs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from profiler_core import api
from profiler_core.cli import command, emit_json, err_console, out_console
from profiler_core.cli.outputs import write_output
from profiler_core.distributed.compare import MultiRankComparison
from profiler_core.report.end_to_end import verdict_fields
from profiler_core.report.html import render_html
from profiler_core.report.markdown import render_markdown
from profiler_core.report.terminal import comparison_renderables, warnings_renderable

GATE_EXIT_CODE = 1


@command("compare")
def compare_command(
    base: Annotated[Path, typer.Argument(help="Baseline: a profile.json or a run directory.")],
    opt: Annotated[Path, typer.Argument(help="Optimized: a profile.json or a run directory.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON on stdout.")] = False,
    markdown: Annotated[Path | None, typer.Option(
        "--markdown", help="Write a markdown report (for a pull-request comment) here.")] = None,
    html: Annotated[Path | None, typer.Option(
        "--html", help="Write a self-contained HTML report here.")] = None,
    fail_if_slower: Annotated[float | None, typer.Option(
        "--fail-if-slower", min=0.0, metavar="PCT",
        help="Exit 1 when the optimized run is more than PCT percent slower.")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Compare even when the two profiles measure different workloads.")] = False,
) -> None:
    """Compare an optimized profile with its baseline: per class, per operator, per counter.

    Two multi-rank run directories are compared rank by rank, plus the merged view.
    """
    done = api.compare_paths(base, opt, force=force, force_option="--force")
    if done.ranks is not None:
        _render_ranks(done.ranks, as_json=as_json, fail_if_slower=fail_if_slower)
        return
    result, opt_profile, e2e = done.comparison, done.opt, done.end_to_end
    if result is None or opt_profile is None:
        return  # compare_paths gives either the ranks or both of these
    if markdown is not None:
        write_output(markdown, render_markdown(comparison=result, end_to_end=e2e))
    if html is not None:
        write_output(html, render_html(opt_profile, comparison=result, end_to_end=e2e))
    if as_json:
        emit_json({**result.model_dump(mode="json"), "end_to_end": verdict_fields(result, e2e)})
        if (w := warnings_renderable(result.warnings)) is not None:
            err_console.print(w)
    else:
        for item in comparison_renderables(result, end_to_end=e2e):
            out_console.print(item)
    if fail_if_slower is not None and result.delta_pct > fail_if_slower:
        err_console.print(f"[bold red]FAIL[/]: {result.delta_pct:.1f}% slower than the baseline "
                          f"(limit {fail_if_slower:g}%)")
        raise typer.Exit(GATE_EXIT_CODE)


def _render_ranks(result: MultiRankComparison, *, as_json: bool, fail_if_slower: float | None) -> None:
    if as_json:
        emit_json(result)
    else:
        for rank, comparison in result.per_rank.items():
            out_console.print(f"[bold]rank {rank}[/]")
            for item in comparison_renderables(comparison):
                out_console.print(item)
        out_console.print(
            f"slowest rank: {result.base_slowest_rank} -> {result.opt_slowest_rank}; its kernel time "
            f"{result.base_max_ns / 1e3:.1f} -> {result.opt_max_ns / 1e3:.1f} us ({result.max_delta_pct:+.1f}%); "
            f"spread {result.base_spread_ns / 1e3:.1f} -> {result.opt_spread_ns / 1e3:.1f} us")
    for w in result.warnings:
        err_console.print(f"[yellow]warning:[/] {w}")
    if fail_if_slower is not None and result.max_delta_pct > fail_if_slower:
        err_console.print(f"[bold red]FAIL[/]: slowest rank {result.max_delta_pct:.1f}% slower "
                          f"(limit {fail_if_slower:g}%)")
        raise typer.Exit(GATE_EXIT_CODE)
