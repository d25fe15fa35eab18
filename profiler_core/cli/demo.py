"""``oprof demo``: the main job. Live on an NVIDIA GPU; without one, on the shipped H200 captures.

Offline it runs the analysis half of the loop on real captures from an H200
(``examples/captures/h200/<example>/{baseline,optimized}``): attribute each capture from its
raw artifacts, diagnose the baseline, compare baseline with optimized, and write an HTML
report per example. Live (a CUDA GPU and Nsight Compute present) it runs the whole loop,
``oprof optimize``, on one example.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from profiler_core import api
from profiler_core.cli import command, err_console, out_console
from profiler_core.errors import ArtifactFormatError, ToolNotFoundError

PACKAGED_EXAMPLES = "demo_examples"  # where a wheel carries examples/ (see pyproject's wheel target)


def examples_dir() -> Path:
    """``examples/``: the checkout's beside this package, else the copy a wheel install carries."""
    package = Path(__file__).resolve().parents[1]
    checkout = package.parent / "examples"
    return checkout if (checkout / "captures").is_dir() else package / PACKAGED_EXAMPLES


EXAMPLES = examples_dir()
CAPTURES = EXAMPLES / "captures" / "h200"


def _gpu_ready() -> str | None:
    """None when a live capture can run here, else why not."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU is visible"
    try:
        from profiler_core.capture.tools import find_ncu

        find_ncu()
    except ToolNotFoundError as err:
        return str(err)
    return None


@command("demo")
def demo(
    out: Annotated[Path, typer.Option(help="Where reports go.")] = Path("oprof-runs/demo"),
    offline: Annotated[bool, typer.Option(
        "--offline", help="Analyse the shipped H200 captures even on a GPU machine.")] = False,
    example: Annotated[str, typer.Option(help="Example optimized live (examples/<name>.py).")] = "sdpa_attention",
) -> None:
    """Run the closed loop live on a GPU, or its analysis half on the shipped H200 captures."""
    why_not = None if offline else _gpu_ready()
    if not offline and why_not is None:
        from profiler_core.cli.optimize import print_progress, render_result
        from profiler_core.optimize import OptimizeConfig

        workload = EXAMPLES / f"{example}.py"
        if not workload.exists():
            raise ArtifactFormatError(f"{workload}: no such example; pick one of {_example_names()}")
        err_console.print(f"live: optimizing {workload.name} on this GPU")
        result = api.optimize(workload, OptimizeConfig(out_dir=out / f"{example}-live"), progress=print_progress)
        render_result(result)
        run = Path(result.run_dir)
        _next_steps([
            (f"oprof report {result.final_run_dir or run / 'baseline'} --baseline {run / 'baseline'}",
             "the attributed profile of the best run against the baseline"),
            ("oprof optimize your_workload.py --budget 3", "the same loop on your own model"),
        ])
        return
    if not CAPTURES.is_dir():
        raise ArtifactFormatError(f"{CAPTURES}: the shipped captures are missing; reinstall operator-profiler "
                                  "from a complete wheel, or run oprof demo from a checkout")
    err_console.print(
        f"[bold]No live capture here[/] ({why_not or 'offline requested'}): live capture needs an NVIDIA GPU "
        f"with Nsight Compute. Analysing the real H200 captures in {CAPTURES} instead.", soft_wrap=True)
    rows = [_row(d, out / d.name) for d in sorted(p for p in CAPTURES.iterdir() if (p / "baseline").is_dir())]
    table = Table(title="H200 captures: attribute -> diagnose -> compare (shipped optimize results)")
    for col in ("example", "kernels", "attributed", "top finding", "passes kept", "kernel time",
                "end-to-end (30 it.)"):
        table.add_column(col)
    for r in rows:
        table.add_row(*r[:-1])
    out_console.print(table)
    # paths on lines of their own: a table column would cut them at any terminal width
    out_console.print("HTML reports:", markup=False)
    for r in rows:
        out_console.print(f"  {r[0]}: {r[-1]}", markup=False, soft_wrap=True)
    first = out / rows[0][0] if rows else out
    _next_steps([
        (f"oprof report {first / 'optimized.profile.json'} --baseline {first / 'baseline.profile.json'}",
         "one example's operators, findings and deltas in the terminal"),
        (f"oprof diagnose {first / 'baseline.profile.json'}",
         "why its baseline is slow, and the pass each finding licenses"),
        ("oprof capture your_workload.py --attribute", "on a machine with an NVIDIA GPU and Nsight Compute"),
        ("oprof optimize your_workload.py --budget 3", "the whole loop on your own model"),
    ])


def _next_steps(steps: list[tuple[str, str]]) -> None:
    """The commands to run next, each with what it shows (the demo's last lines)."""
    out_console.print("Next:", markup=False)
    for cmd, why in steps:
        out_console.print(f"  {cmd}", markup=False, soft_wrap=True)
        out_console.print(f"      {why}", markup=False, soft_wrap=True, style="dim")


def _example_names() -> str:
    return ", ".join(sorted(p.stem for p in EXAMPLES.glob("*.py")))


def _row(example_dir: Path, out: Path) -> tuple[str, ...]:
    """One example analysed (``api.analyse_shipped_run``), as a row of the demo's table."""
    from profiler_core.analysis.findings import in_priority_order

    done = api.analyse_shipped_run(example_dir, out)
    top = next(iter(in_priority_order(done.findings.findings)), None)
    top_text = f"{top.rule_id} -> {top.transformation or 'structural'}" if top else "-"
    c = done.comparison
    kernel = (f"{c.base_total_ns / 1e3:.0f} -> {c.opt_total_ns / 1e3:.0f} us ({c.speedup:.2f}x)" if c is not None
              else f"{done.baseline.coverage.duration_ns / 1e3:.0f} us")
    kept = "-" if done.kept_passes is None else (", ".join(done.kept_passes) or "none")
    w = done.wall_ms
    if "baseline" in w and "optimized" in w:
        wall = f"{w['baseline']:.2f} -> {w['optimized']:.2f} ms"
    elif "baseline" in w:  # nothing kept: the baseline's own timing
        wall = f"{w['baseline']:.2f} ms"
    else:
        wall = "-"
    cov = done.baseline.coverage
    return (done.name, str(cov.kernel_count), f"{cov.attributed_time_pct:.1f}%", top_text, kept, kernel,
            wall, str(done.report_html))
