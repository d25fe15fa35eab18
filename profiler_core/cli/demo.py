"""``oprof demo``: the main job. Live on an NVIDIA GPU; without one, on the shipped H200 captures.

Offline it runs the analysis half of the loop on real captures from an H200
(``examples/captures/h200/<example>/{baseline,optimized}``): attribute each capture from its
raw artifacts, diagnose the baseline, compare baseline with optimized, and write an HTML
report per example. Live (a CUDA GPU and Nsight Compute present) it runs the whole loop,
``oprof optimize``, on one example.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from profiler_core import api
from profiler_core.cli import command, err_console, out_console
from profiler_core.cli.demo_table import COLUMNS, legend, row_of
from profiler_core.cli.next_steps import print_next_steps
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
        print_next_steps([
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
    examples = sorted(p for p in CAPTURES.iterdir() if (p / "baseline").is_dir())
    rows = [_analysed(i, len(examples), d, out / d.name) for i, d in enumerate(examples, 1)]
    table = Table(title="H200 captures: attribute -> diagnose -> compare (shipped optimize results)")
    for col in COLUMNS:
        table.add_column(col)
    for cells, _, _ in rows:
        table.add_row(*cells)
    out_console.print(table)
    for line in legend([(cells[0], note) for cells, _, note in rows if note]):
        out_console.print(line, markup=False, soft_wrap=True)
    # paths on lines of their own: a table column would cut them at any terminal width
    out_console.print("HTML reports:", markup=False)
    for cells, report, _ in rows:
        out_console.print(f"  {cells[0]}: {report}", markup=False, soft_wrap=True)
    first = out / rows[0][0][0] if rows else out
    print_next_steps([
        (f"oprof report {first / 'optimized.profile.json'} --baseline {first / 'baseline.profile.json'}",
         "one example's operators, findings and deltas in the terminal"),
        (f"oprof diagnose {first / 'baseline.profile.json'}",
         "why its baseline is slow, and the pass each finding licenses"),
        ("oprof capture your_workload.py --attribute", "on a machine with an NVIDIA GPU and Nsight Compute"),
        ("oprof optimize your_workload.py --budget 3", "the whole loop on your own model"),
    ])


def _analysed(i: int, n: int, example_dir: Path, out: Path) -> tuple[tuple[str, ...], str, str | None]:
    """One example analysed, with a progress line on stderr as it starts and as it finishes."""
    err_console.print(f"[{i}/{n}] {example_dir.name}: attributing, diagnosing, comparing ...", markup=False,
                      highlight=False)
    start = time.monotonic()
    row = row_of(api.analyse_shipped_run(example_dir, out))
    err_console.print(f"[{i}/{n}] {example_dir.name}: done in {time.monotonic() - start:.1f} s", markup=False,
                      highlight=False)
    return row


def _example_names() -> str:
    return ", ".join(sorted(p.stem for p in EXAMPLES.glob("*.py")))
