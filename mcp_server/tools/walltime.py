"""``walltime``: time a workload's step end to end (CUDA events on CUDA), and its baseline beside it.

Profiled kernel time says what the GPU did; wall time per step is what the user waits for, and
the only figure a speedup may be claimed on. Each workload is timed in its own process, as
``oprof optimize`` does (profiler_core.optimize.walltime), ``rounds`` times, in alternating order
(baseline, optimized, then optimized, baseline): a host-bound step's wall time moves between
processes more than within one (a GPT-2 forward on an H200: 4.41 ms in one process, 5.61 ms in
the next), so each side's figures pool its processes' iterations and walltime.json keeps each
process's median beside them. The figures are written to a
walltime.json that ``compare`` and ``report`` read (their ``walltime`` argument). The timing
shares the GPU with captures, so it runs as a job: ``walltime`` waits up to ``wait_s`` for it,
``walltime_status`` afterwards.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.arguments import ID_CHARS, PATH_CHARS
from mcp_server.config import ToolContext
from mcp_server.errors import tool_errors
from mcp_server.jobs import JobSnapshot, JobState
from mcp_server.loop_models import WallTimeFigures, WallTimeOut
from mcp_server.tools import hints, workload_file
from mcp_server.tools.capture import WaitS, follow
from profiler_core.compile_mode import CaptureCompileMode
from profiler_core.rundir.layout import WALLTIME_NAME


@dataclass(frozen=True)
class WallTimeRequest:
    """What one wall-time job times, and where its figures go."""

    workload: Path
    baseline: Path | None
    out: Path
    iters: int
    warmup: int
    compile_mode: str
    device: str
    rounds: int = 2


@dataclass
class WallTimeRun:
    """What a wall-time job returns: the walltime.json it wrote and its figures."""

    run_dir: Path
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)


def measure_pair(_workload: Path, req: WallTimeRequest, *, progress: Any, cancel: Any) -> WallTimeRun:
    """Time the baseline (when given), then the workload; write walltime.json (write, then rename)."""
    from profiler_core.atomic_write import write_text_atomic
    from profiler_core.errors import CaptureCancelledError
    from profiler_core.optimize import walltime

    sides = [("baseline", req.baseline)] if req.baseline is not None else []
    sides.append(("optimized" if req.baseline is not None else "workload", req.workload))
    order = [pair for r in range(req.rounds) for pair in (sides if r % 2 == 0 else sides[::-1])]
    timed: dict[str, list[walltime.WallTime]] = {side: [] for side, _ in sides}
    for step, (side, path) in enumerate(order, start=1):
        if cancel.is_set():
            raise CaptureCancelledError(f"wall-time run cancelled before timing the {side}")
        progress("walltime", step, len(order), f"timing {path.name} ({req.iters} iterations on {req.device}, "
                                               f"process {len(timed[side]) + 1} of {req.rounds})")
        timed[side].append(walltime.measure(path, iters=req.iters, warmup=req.warmup,
                                            compile_mode=req.compile_mode, device=req.device))
    figures: dict[str, dict[str, Any]] = {}
    for side, runs in timed.items():
        pooled = walltime.WallTime(tuple(ms for run in runs for ms in run.iterations_ms))
        figures[side] = {**pooled.as_dict(), "process_medians_ms": [run.median_ms for run in runs]}
    write_text_atomic(req.out, json.dumps(figures, indent=1))
    return WallTimeRun(run_dir=req.out.parent, figures=figures)


def walltime_out(snap: JobSnapshot) -> WallTimeOut:
    jid = snap.job_id
    result: WallTimeRun | None = snap.result if isinstance(snap.result, WallTimeRun) else None
    figures = result.figures if result is not None else {}
    base = figures.get("baseline")
    opt = figures.get("optimized") or figures.get("workload")
    speedup = base["median_ms"] / opt["median_ms"] if base and opt and opt["median_ms"] else None
    out_file = str(result.run_dir / WALLTIME_NAME) if result is not None else None
    next_step = {
        JobState.RUNNING: f"call walltime_status('{jid}', wait_s=60)",
        JobState.CANCELLING: f"call walltime_status('{jid}')",
        JobState.SUCCEEDED: (f"pass walltime='{out_file}' to compare or report: their verdict then follows wall "
                             "time per step" if base else
                             "time the baseline too (baseline_workload) to compare end to end"),
        JobState.FAILED: "read the error: the workload must run outside the profiler (check device and "
                         "compile_mode), then call walltime again",
        JobState.CANCELLED: "call walltime to start again",
    }[snap.state]
    return WallTimeOut(job_id=jid, state=snap.state.value, walltime_file=out_file,
                       baseline=WallTimeFigures(**base) if base else None,
                       optimized=WallTimeFigures(**opt) if opt else None, wall_speedup=speedup,
                       elapsed_s=snap.elapsed_s, error=snap.error, next_step=next_step)


def register(mcp: MCPServer, ctx: ToolContext) -> None:
    ws, jobs = ctx.workspace, ctx.jobs

    @mcp.tool(title="Time a workload end to end",
              annotations=hints("Time a workload end to end", read_only=False, idempotent=False))
    async def walltime(
        workload: Annotated[str, Field(max_length=PATH_CHARS, description=(
            "The workload .py file to time (the optimized one, e.g. apply_pass's optimized_workload)."))],
        context: Context,
        baseline_workload: Annotated[str | None, Field(max_length=PATH_CHARS, description=(
            "The baseline workload .py, timed first with the same settings: the pair gives the end-to-end "
            "speedup."))] = None,
        device: Annotated[Literal["cuda", "cpu"], Field(description="Where the step runs.")] = "cuda",
        compile_mode: Annotated[CaptureCompileMode, Field(description=(
            "The capture's compile mode (eager, or the torch.compile mode), so the times match it."))
        ] = "default",
        iters: Annotated[int, Field(ge=1, le=1000, description="Steps timed.")] = 30,
        warmup: Annotated[int, Field(ge=0, le=1000, description="Steps run first, untimed (compilation).")] = 5,
        rounds: Annotated[int, Field(ge=1, le=5, description=(
            "Processes per side, in alternating order; each side's figures pool them (a step's wall time "
            "moves between processes)."))] = 2,
        output: Annotated[str | None, Field(max_length=PATH_CHARS, description=(
            "Where to write walltime.json; default a new folder under oprof-runs/."))] = None,
        wait_s: WaitS = 100,
    ) -> WallTimeOut:
        """Median wall time per step (CUDA events on CUDA, from the first launch to the last kernel's end).

        With baseline_workload, both are timed and the speedup returned; walltime.json is written
        for compare and report, whose verdict then leads with wall time.
        """
        with tool_errors(ws):
            path = workload_file(ws, workload)
            base = workload_file(ws, baseline_workload) if baseline_workload else None
            if output:
                out = ws.output_file(output, kind="walltime")
            else:
                stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
                out = ws.output_file(ctx.runs_dir / f"{path.stem}-walltime-{stamp}" / WALLTIME_NAME,
                                     kind="walltime")
            req = WallTimeRequest(workload=path, baseline=base, out=out, iters=iters, warmup=warmup,
                                  compile_mode=str(compile_mode), device=device, rounds=rounds)
            snap = jobs.start(path, req, run_dir=out.parent, kind="walltime", fn=measure_pair)
        return walltime_out(await follow(context, jobs, snap.job_id, wait_s))

    @mcp.tool(title="Wall-time status", annotations=hints("Wall-time status", read_only=True))
    async def walltime_status(
        job_id: Annotated[str, Field(max_length=ID_CHARS, description="The job id walltime returned (wall-...).")],
        context: Context, wait_s: WaitS = 30,
    ) -> WallTimeOut:
        """A wall-time job's state; its figures once it succeeded."""
        with tool_errors(ws):
            jobs.snapshot(job_id)
        return walltime_out(await follow(context, jobs, job_id, wait_s))
