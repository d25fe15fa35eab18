"""``oprof yardstick RUN_DIR``: time a finished optimize run again beside the recipes (optimize/remeasure.py).

The baseline, the kept plan and each recipe (compile, autocast bf16 + compile, + reduce-overhead) are
timed end to end as ``oprof optimize`` times them; RUN_DIR's optimize.json gets the new yardstick
(these figures, when and where) and a note, and nothing else changes: the loop's own wall times stay.
``--json`` prints the updated optimize.json; progress goes to stderr.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from profiler_core.cli import command, emit_json, err_console, out_console
from profiler_core.optimize.result import OptimizeResult
from profiler_core.rundir.layout import OPTIMIZE_NAME


class Backend(StrEnum):
    """torch.compile backend of the recipes."""

    INDUCTOR = "inductor"
    EAGER = "eager"


@command("yardstick")
def yardstick_cmd(
    run_dir: Annotated[Path, typer.Argument(help="An `oprof optimize` run directory (it holds optimize.json).")],
    workload: Annotated[Path | None, typer.Option(
        help="The workload the run optimized (default: optimize.json's, found from here or from a folder "
             "above RUN_DIR).")
    ] = None,
    wall_iters: Annotated[int, typer.Option(help="End-to-end iterations timed, per run.", min=1)] = 30,
    warmup: Annotated[int, typer.Option(help="Untimed iterations before them.", min=0)] = 5,
    device: Annotated[str, typer.Option(help="Device to time on: cuda, cuda:N or cpu.")] = "cuda",
    backend: Annotated[Backend, typer.Option(
        help="torch.compile backend of the recipes; eager times their plumbing only (useful on a CPU).")
    ] = Backend.INDUCTOR,
    as_json: Annotated[bool, typer.Option("--json", help="Print the updated optimize.json on stdout.")] = False,
) -> None:
    """Time a finished optimize run again beside the recipe a user would write instead; no new capture."""
    from profiler_core.optimize.remeasure import remeasure

    result = remeasure(run_dir, workload=workload, wall_iters=wall_iters, warmup=warmup, device=device,
                       backend=backend.value, python=sys.executable, progress=print_progress)
    if as_json:
        emit_json(result)
        return
    render_remeasured(result)
    out_console.print(f"updated {run_dir / OPTIMIZE_NAME} (its yardstick; the loop's own wall times kept)",
                      soft_wrap=True)


def print_progress(phase: str, step: int, total: int, message: str) -> None:
    """A progress line on stderr."""
    err_console.print(f"[dim]{phase}[/] {message}", soft_wrap=True)


def _cell(text: str, width: int = 100) -> str:
    """A reason for the table: its first clause, cut at a word."""
    first = text.split("; ")[0]
    if len(first) <= width:
        return first + (" ..." if first != text else "")
    return first[:width].rsplit(" ", 1)[0] + " ..."


def _median(figures: dict[str, float | int]) -> str:
    value = figures.get("median_ms")
    return "-" if value is None else f"{float(value):.3f}"


def render_remeasured(result: OptimizeResult) -> None:
    """Baseline, plan and each recipe (median ms, or the outcome and why), then the verdict line."""
    stick = result.yardstick
    base = stick.baseline_wall_time if stick else {}
    t = Table(title=f"{Path(result.workload).name}: re-measured end to end (median)")
    for col in ("run", "outcome", "median ms", "max abs err", "note"):
        t.add_column(col)
    t.add_row("baseline (as written)", "timed", _median(base), "-", "")
    if result.kept_passes and stick is not None:
        plan, base_ms = stick.plan_wall_time.get("median_ms"), base.get("median_ms")
        speedup = f"{float(base_ms) / float(plan):.2f}x over the baseline" if plan and base_ms else ""
        t.add_row("the loop: " + ", ".join(result.kept_passes), "timed", _median(stick.plan_wall_time), "-", speedup)
    else:
        t.add_row("the loop: nothing kept", "-", "-", "-", "the baseline is the plan")
    stick = result.yardstick
    for r in stick.recipes if stick else []:
        t.add_row(r.code, r.outcome, "-" if r.median_ms is None else f"{r.median_ms:.3f}",
                  "-" if r.max_abs_err is None else f"{r.max_abs_err:.2g}", _cell(r.reason))
    out_console.print(t)
    if stick is not None:
        out_console.print(f"yardstick: {stick.verdict}", soft_wrap=True)
