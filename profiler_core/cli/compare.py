"""``oprof compare BASE.json OPT.json``: time and counter deltas, a verdict, and a CI gate.

The verdict leads with wall time per step when the two runs have one recorded beside them
(``walltime.json`` or ``optimize.json`` next to ``baseline/``), profiled kernel time second.

Exit status without a gate: 0, or 1 when ``--fail-if-slower PCT`` trips on kernel time; 2 for a
user error (missing or invalid profile, or two different workloads: ``WorkloadMismatchError``,
which ``--force`` overrides). With ``--gate PCT``, one status per outcome, judged on wall time per
step where measured and kernel time otherwise (``profiler_core.report.gate``): 0 faster, 1 slower,
3 unchanged (within PCT either way), 4 not comparable (different workloads, chips, clocks, or a
multi-rank run against a single-rank one). Comparability warnings go to stderr in every mode, and
into the JSON and markdown outputs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from profiler_core import api
from profiler_core.analysis.compare import comparison_json_fields
from profiler_core.cli import command, emit_json, err_console, out_console
from profiler_core.cli.outputs import write_output
from profiler_core.distributed.compare import MultiRankComparison
from profiler_core.errors import ComparabilityError
from profiler_core.report.end_to_end import verdict_fields
from profiler_core.report.gate import GateResult, judge, judge_ranks, not_comparable
from profiler_core.report.html import render_html
from profiler_core.report.markdown import render_markdown
from profiler_core.report.terminal import comparison_renderables, warnings_renderable

GATE_EXIT_CODE = 1


@command("compare", acyclic=True)
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
        help="Exit 1 when the optimized run's kernel time is more than PCT percent slower.")] = None,
    gate: Annotated[float | None, typer.Option(
        "--gate", min=0.0, metavar="PCT",
        help="CI gate, on wall time per step where measured, else kernel time: exit 0 faster, 1 slower, "
             "3 unchanged (within PCT), 4 not comparable.")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Compare even when the two profiles measure different workloads.")] = False,
) -> None:
    """Compare an optimized profile with its baseline: per class, per operator, per counter.

    Two multi-rank run directories are compared rank by rank, plus the merged view.
    """
    if gate is not None and (why := _unmatched_runs(base, opt)) is not None:
        _finish_gate(not_comparable(gate, why))
    from profiler_core.analysis.profile_view import shared_views

    with shared_views():  # compare, the baseline's diagnosis and the reports read one view per profile
        try:
            done = api.compare_paths(base, opt, force=force, force_option="--force")
        except ComparabilityError as err:
            if gate is None:
                raise
            _finish_gate(not_comparable(gate, str(err)))
        if done.ranks is not None:
            ranks_gate = None if gate is None else judge_ranks(done.ranks.max_delta_pct, done.ranks.per_rank, gate)
            _render_ranks(done.ranks, as_json=as_json, fail_if_slower=fail_if_slower, gate=ranks_gate)
            return
        result, opt_profile, e2e = done.comparison, done.opt, done.end_to_end
        if result is None or opt_profile is None:
            return  # compare_paths gives either the ranks or both of these
        if markdown is not None:
            write_output(markdown, render_markdown(comparison=result, end_to_end=e2e))
        if html is not None:
            write_output(html, render_html(opt_profile, comparison=result, end_to_end=e2e))
        outcome = None if gate is None else judge(result, e2e, gate)
        if as_json:
            # the operator rows written a batch at a time, each row's model built as it is written
            emit_json({**comparison_json_fields(result), "end_to_end": verdict_fields(result, e2e),
                       **({"gate": outcome.as_dict()} if outcome is not None else {})},
                      listed="operators", items=result.operators)
            if (w := warnings_renderable(result.warnings)) is not None:
                err_console.print(w)
        else:
            for item in comparison_renderables(result, end_to_end=e2e):
                out_console.print(item)
        _finish(fail_if_slower, result.delta_pct, "{:.1f}% slower than the baseline", outcome)


def _finish(fail_if_slower: float | None, delta_pct: float, what: str, gate: GateResult | None) -> None:
    """Exit 1 past ``--fail-if-slower`` (``what`` formats the delta), else with the gate's code, if any."""
    if fail_if_slower is not None and delta_pct > fail_if_slower:
        err_console.print(f"[bold red]FAIL[/]: {what.format(delta_pct)} (limit {fail_if_slower:g}%)")
        raise typer.Exit(GATE_EXIT_CODE)
    if gate is not None:
        _finish_gate(gate)


def _unmatched_runs(base: Path, opt: Path) -> str | None:
    """Why two paths cannot be compared as runs (a multi-rank run against a single-rank one), else None."""
    from profiler_core.rundir import is_multi_rank

    b, o = is_multi_rank(base), is_multi_rank(opt)
    if b == o:
        return None
    return (f"{base if b else opt} is a multi-rank run and {opt if b else base} is not; "
            "compare two multi-rank runs, or one rank's profile with another")


def _finish_gate(outcome: GateResult) -> None:
    """Print the gate's one line on stderr and exit with its status."""
    style = {"faster": "bold green", "unchanged": "bold", "slower": "bold red"}.get(outcome.outcome, "bold yellow")
    err_console.print(f"[{style}]gate[/]: {outcome.reason} (exit {outcome.exit_code})", soft_wrap=True,
                      highlight=False)
    raise typer.Exit(outcome.exit_code)


def _render_ranks(result: MultiRankComparison, *, as_json: bool, fail_if_slower: float | None,
                  gate: GateResult | None = None) -> None:
    if as_json:
        emit_json({**result.model_dump(mode="json"), **({"gate": gate.as_dict()} if gate is not None else {})})
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
    _finish(fail_if_slower, result.max_delta_pct, "slowest rank {:.1f}% slower", gate)
