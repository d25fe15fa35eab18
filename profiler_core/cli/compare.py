"""``oprof compare BASE.json OPT.json``: time and counter deltas, a verdict, and a CI gate.

Exit status: 0 when the gate passes (or none is set), 1 when ``--fail-if-slower PCT`` trips,
2 for a user error (missing or invalid profile, or two different workloads:
``WorkloadMismatchError``, which ``--force`` overrides). Comparability warnings go to stderr in every
mode, and into the JSON and markdown outputs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from profiler_core.analysis.comparability import workload_mismatch_text
from profiler_core.analysis.compare import compare
from profiler_core.cli import command, emit_json, err_console, out_console
from profiler_core.cli.outputs import load_profile, write_output
from profiler_core.errors import WorkloadMismatchError
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
    from profiler_core.rundir import is_multi_rank

    if is_multi_rank(base) and is_multi_rank(opt):
        _compare_ranks(base, opt, as_json=as_json, fail_if_slower=fail_if_slower)
        return
    base_profile, opt_profile = load_profile(base), load_profile(opt)
    result = compare(base_profile, opt_profile, base_label=str(base), opt_label=str(opt))
    mismatches = result.comparability.workload_mismatches()
    if mismatches and not force:
        raise WorkloadMismatchError(
            workload_mismatch_text(str(base), str(opt), mismatches)
            + ": pass the baseline of the same workload, or --force to compare anyway")
    if markdown is not None:
        write_output(markdown, render_markdown(comparison=result))
    if html is not None:
        write_output(html, render_html(opt_profile, comparison=result))
    if as_json:
        emit_json(result)
        if (w := warnings_renderable(result.warnings)) is not None:
            err_console.print(w)
    else:
        for item in comparison_renderables(result):
            out_console.print(item)
    if fail_if_slower is not None and result.delta_pct > fail_if_slower:
        err_console.print(f"[bold red]FAIL[/]: {result.delta_pct:.1f}% slower than the baseline "
                          f"(limit {fail_if_slower:g}%)")
        raise typer.Exit(GATE_EXIT_CODE)


def _compare_ranks(base: Path, opt: Path, *, as_json: bool, fail_if_slower: float | None) -> None:
    from profiler_core.distributed.attribute import load_rank_profiles
    from profiler_core.distributed.compare import compare_ranks

    result = compare_ranks(load_rank_profiles(base), load_rank_profiles(opt), base_label=str(base),
                           opt_label=str(opt))
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
