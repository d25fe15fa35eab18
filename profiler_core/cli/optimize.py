"""``oprof optimize WORKLOAD``: the headless closed loop (see profiler_core/optimize/loop.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from profiler_core import api
from profiler_core.capture.config import CaptureConfig, CompileMode, CounterMode
from profiler_core.cli import command, emit_json, err_console, out_console
from profiler_core.optimize import OptimizeConfig, OptimizeResult


@command("optimize")
def optimize_cmd(
    workload: Annotated[Path, typer.Argument(help="A workload file defining get_model_and_inputs(device).")],
    budget: Annotated[int, typer.Option(help="Passes to try at most.", min=1)] = 4,
    out: Annotated[Path | None, typer.Option(
        help="Run directory [default: oprof-runs/<name>-optimize-<time>].")] = None,
    compile_mode: Annotated[CompileMode, typer.Option(help="How the workload is compiled.")] = CompileMode.DEFAULT,
    device: Annotated[str, typer.Option(help="Device for captures, passes and wall times: cuda or cuda:N.")] = "cuda",
    counters: Annotated[CounterMode, typer.Option(help="ncu counter mode for every capture.")] = CounterMode.PER_CONFIG,
    nsys: Annotated[bool, typer.Option(help="Take an nsys timeline in every capture (else Kineto's).")] = True,
    warmup: Annotated[int, typer.Option(min=0)] = 2,
    iters: Annotated[int, typer.Option(min=1)] = 2,
    wall_iters: Annotated[int, typer.Option(help="End-to-end iterations timed with CUDA events (0 skips).",
                                            min=0)] = 30,
    baseline: Annotated[Path | None, typer.Option(
        help="Reuse this capture directory as the baseline instead of capturing one.")] = None,
    no_yardstick: Annotated[bool, typer.Option(
        "--no-yardstick", help="Skip timing the recipe a user would write instead (compile, autocast bf16 + "
                               "compile, + reduce-overhead): a quicker run.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print optimize.json on stdout.")] = False,
) -> None:
    """Capture, diagnose, apply passes, validate, re-capture, keep what is faster; write a run directory."""
    cap = dataclasses.replace(CaptureConfig(), compile_mode=compile_mode, counters=counters, nsys=nsys,
                              warmup=warmup, iters=iters)
    config = OptimizeConfig(out_dir=out, budget=budget, device=device, capture=cap, wall_iters=wall_iters,
                            baseline_run=baseline, yardstick=not no_yardstick)
    result = api.optimize(workload, config, progress=print_progress)
    if as_json:
        emit_json(result)
    else:
        render_result(result)
    if result.validation_failures:
        err_console.print(f"[bold red]{result.validation_failures} pass(es) failed numerical validation[/] "
                          "and were not kept; see optimize.json")
        raise typer.Exit(1)


def print_progress(phase: str, step: int, total: int, message: str) -> None:
    """A loop's progress line on stderr (the loop's ``progress`` callback)."""
    err_console.print(f"[dim]{phase}[/] {message}")


def _brief(reason: str, width: int = 160) -> str:
    """A trial's reason for the table: its first clause (the worst leaf), cut at a word, never mid-number."""
    first = reason.split("; ")[0]
    if len(first) <= width:
        return first + (" ..." if first != reason else "")
    return first[:width].rsplit(" ", 1)[0] + " ..."


def render_result(result: OptimizeResult) -> None:
    """The trials and the before/after figures as rich tables on stdout."""
    t = Table(title=f"{Path(result.workload).name}: trials")
    for col in ("pass", "outcome", "kernel us", "speedup", "max abs err", "reason"):
        t.add_column(col)
    for tr in result.trials:
        t.add_row(tr.transformation, tr.outcome, "-" if tr.kernel_ns is None else f"{tr.kernel_ns / 1e3:.1f}",
                  "-" if tr.speedup_vs_best is None else f"{tr.speedup_vs_best:.2f}x",
                  "-" if tr.max_abs_err is None else f"{tr.max_abs_err:.2g}", _brief(tr.reason))
    out_console.print(t)
    wall = result.wall_time
    wall_line = ""
    if "baseline" in wall and "optimized" in wall:
        base, opt = wall["baseline"], wall["optimized"]
        speedup = "n/a" if result.wall_speedup is None else f"{result.wall_speedup:.2f}x"
        wall_line = (f"; end-to-end median {base['median_ms']:.3f} -> {opt['median_ms']:.3f} ms "
                     f"({speedup} over {base['iterations']} iterations)")
    elif "baseline" in wall:
        wall_line = f"; end-to-end median {wall['baseline']['median_ms']:.3f} ms (nothing kept to compare)"
    for line in result.notes:
        err_console.print(f"[yellow]note:[/] {line}")
    if result.yardstick is not None:
        render_yardstick(result)
    out_console.print(
        f"kept: {', '.join(result.kept_passes) or 'nothing'}; profiled kernel time "
        f"{result.baseline_kernel_ns / 1e3:.1f} -> {result.optimized_kernel_ns / 1e3:.1f} us "
        f"({result.kernel_speedup:.2f}x){wall_line}; report {Path(result.run_dir) / 'report.html'}")


def render_yardstick(result: OptimizeResult) -> None:
    """The plan beside the recipe a user writes instead, and the verdict line."""
    stick = result.yardstick
    if stick is None:
        return
    t = Table(title=f"{Path(result.workload).name}: plan vs recipe (end-to-end median)")
    for col in ("run", "outcome", "median ms", "max abs err", "note"):
        t.add_column(col)
    plan = result.plan_wall_ms
    t.add_row("the loop: " + (", ".join(result.kept_passes) or "nothing kept"), "timed",
              "-" if plan is None else f"{plan:.3f}", "-", "")
    for r in stick.recipes:
        t.add_row(r.code, r.outcome, "-" if r.median_ms is None else f"{r.median_ms:.3f}",
                  "-" if r.max_abs_err is None else f"{r.max_abs_err:.2g}", _brief(r.reason, 100))
    out_console.print(t)
    out_console.print(f"yardstick: {stick.verdict}")
