"""``oprof capture WORKLOAD.py``: run every capture phase into a run directory.

Progress (one line per phase, with elapsed time) goes to stderr; ``--json`` prints the
manifest on stdout and nothing else there.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from profiler_core import api
from profiler_core.capture.config import (
    DEFAULT_PHASE_TIMEOUT_S,
    CaptureConfig,
    ClockPolicy,
    CompileMode,
    CounterMode,
    ReplayMode,
)
from profiler_core.cli import command, emit_json, err_console, out_console
from profiler_core.rundir import RanksManifest


class _PhaseProgress:
    """Adapts the library's ``progress(phase, step, total, message)`` callback to rich."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, TaskID] = {}

    def __call__(self, phase: str, step: int, total: int, message: str) -> None:
        text = f"[{step}/{total}] {phase}: {message}"
        task = self.tasks.get(phase)
        if task is None:
            task = self.tasks[phase] = self.progress.add_task(text, total=1)
        else:
            self.progress.update(task, description=text)
        if message.startswith(("done", "skipped", "failed")):
            self.progress.update(task, completed=1)
            self.progress.stop_task(task)


_Out = Annotated[Path | None, typer.Option("--out", help="Run directory (default oprof-runs/...).")]
_Mode = Annotated[CompileMode, typer.Option("--compile-mode", help="How the harness compiles the model.")]
_Warmup = Annotated[int, typer.Option("--warmup", help="Warmup iterations (every phase).")]
_Iters = Annotated[int, typer.Option("--iters", help="Measured iterations (every phase).")]
_Counters = Annotated[CounterMode, typer.Option("--counters", help="Which launches ncu measures.")]
_Spot = Annotated[int, typer.Option("--spot-check", help="Launches sampled per configuration (per-config).")]
_Dedup = Annotated[bool, typer.Option("--dedup-iterations", help="Full mode: first iteration only.")]
_Replay = Annotated[ReplayMode, typer.Option("--replay-mode", help="auto: kernel, else application.")]
_Nsys = Annotated[bool, typer.Option("--nsys/--no-nsys", help="Take the nsys timeline (--no-nsys: the Kineto "
                                                              "trace is the timeline).")]
_Clocks = Annotated[ClockPolicy, typer.Option("--clocks", help="Observe (NVML) or probe-and-lock clocks.")]
_NcuClock = Annotated[str, typer.Option("--ncu-clock-control", help="ncu --clock-control: none | base.")]
_Timeout = Annotated[float | None, typer.Option(
    "--phase-timeout", help="Seconds allowed per phase; a phase past it is killed (default 3600 s).")]
_Python = Annotated[str | None, typer.Option("--python", help="Interpreter that runs the workload.")]
_Attribute = Annotated[bool, typer.Option("--attribute", help="Also attribute the run (profile.json).")]
_Json = Annotated[bool, typer.Option("--json", help="Print the manifest as JSON on stdout.")]
_NoFlops = Annotated[bool, typer.Option("--no-flop-counters",
                                        help="Skip ncu's FLOP counters (fewer replay passes, no measured roofline).")]
_Nproc = Annotated[int | None, typer.Option("--nproc-per-node", help="Ranks to launch through torchrun (GPUs).")]


@command("capture")
def capture_command(
    workload: Annotated[Path, typer.Argument(help="Workload .py defining get_model_and_inputs(device).")],
    out: _Out = None,
    compile_mode: _Mode = CompileMode.DEFAULT,
    warmup: _Warmup = 2,
    iters: _Iters = 2,
    counters: _Counters = CounterMode.PER_CONFIG,
    spot_check: _Spot = 1,
    dedup_iterations: _Dedup = False,
    replay_mode: _Replay = ReplayMode.AUTO,
    nsys: _Nsys = True,
    clocks: _Clocks = ClockPolicy.OBSERVE,
    ncu_clock_control: _NcuClock = "none",
    phase_timeout: _Timeout = None,
    python: _Python = None,
    attribute: _Attribute = False,
    as_json: _Json = False,
    nproc_per_node: _Nproc = None,
    no_flop_counters: _NoFlops = False,
) -> None:
    """Capture a workload: Kineto + Inductor artifacts, nsys timeline, ncu counters, checked."""
    config = CaptureConfig(
        out_dir=out, compile_mode=compile_mode, warmup=warmup, iters=iters, counters=counters,
        spot_check=spot_check, dedup_iterations=dedup_iterations, replay_mode=replay_mode,
        nsys=nsys, clocks=clocks, ncu_clock_control=ncu_clock_control,
        phase_timeout_s=DEFAULT_PHASE_TIMEOUT_S if phase_timeout is None else phase_timeout,
        attribute=attribute, flop_counters=not no_flop_counters,
        ranks=nproc_per_node,
    )
    if python:
        config = dataclasses.replace(config, python=python)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=False) as progress:
        result = api.capture(workload, config, progress=_PhaseProgress(progress))
    manifest = result.manifest
    if as_json:
        emit_json(manifest)
        return
    if isinstance(manifest, RanksManifest):
        out_console.print(f"run directory: {result.run_dir} ({manifest.world_size} ranks: rank0/ .. "
                          f"rank{manifest.world_size - 1}/)")
        return
    table = Table(title=f"{result.run_dir}: {manifest.status.value}")
    for column in ("phase", "status", "seconds", "SM MHz (median)"):
        table.add_column(column, justify="right" if column != "phase" else "left")
    for phase in manifest.phases:
        sm = phase.clocks.sm_mhz_median if phase.clocks else None
        table.add_row(phase.name, phase.status.value, f"{phase.duration_s:.1f}",
                      "" if sm is None else f"{sm:.0f}")
    out_console.print(table)
    for warning in manifest.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True)
    out_console.print(f"run directory: {result.run_dir}")
