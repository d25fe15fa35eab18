"""The optimize loop as a job: ``optimize`` starts it, ``optimize_status`` follows it, ``optimize_result``
returns what the loop wrote (optimize.json) with its end-to-end verdict, ``cancel_optimize`` stops it.

The loop is ``profiler_core.api.optimize``: capture the workload, diagnose, try the passes the
findings license one at a time, keep what makes it faster, then time the baseline and the kept
plan end to end. It shares the GPU with captures, so it runs as a job of the same manager.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mcp_server.arguments import ID_CHARS, PATH_CHARS
from mcp_server.config import ToolContext
from mcp_server.errors import tool_errors
from mcp_server.jobs import JobSnapshot, JobState
from mcp_server.loop_models import EndToEndOut, OptimizeJobStatus, OptimizeResultOut
from mcp_server.tools import hints, workload_file
from mcp_server.tools.capture import WaitS, cancel_and_wait, follow, job_status
from profiler_core.compile_mode import CaptureCompileMode
from profiler_core.rundir.layout import OPTIMIZE_NAME

OptJobId = Annotated[str, Field(max_length=ID_CHARS, description="The job id optimize returned (opt-...).")]


def _next_step(snap: JobSnapshot) -> str:
    jid = snap.job_id
    return {
        JobState.RUNNING: f"call optimize_status('{jid}', wait_s=60) to follow it, "
                          f"or cancel_optimize('{jid}') to stop it",
        JobState.CANCELLING: f"the loop is stopping its processes; call optimize_status('{jid}')",
        JobState.SUCCEEDED: f"call optimize_result('{jid}'): claim a speedup only from end_to_end "
                            "(wall time per step)",
        JobState.FAILED: "read the error, fix the workload or the settings, then call optimize again",
        JobState.CANCELLED: "call optimize to start a new loop",
    }[snap.state]


def optimize_status_of(snap: JobSnapshot) -> OptimizeJobStatus:
    data = job_status(snap).model_dump()
    return OptimizeJobStatus(**{**data, "next_step": _next_step(snap)})


def loop_end_to_end(result: dict[str, Any]) -> EndToEndOut | None:
    """The loop's verdict: by the median wall time per step of baseline and kept plan, else kernel time."""
    from profiler_core.report.end_to_end import disagreement, speedup_verdict

    kernel_speedup = result.get("kernel_speedup")
    if not result.get("kept_passes") or not isinstance(kernel_speedup, int | float) or kernel_speedup <= 0:
        return None
    wall = result.get("wall_time") or {}
    base_ms = (wall.get("baseline") or {}).get("median_ms")
    opt_ms = (wall.get("optimized") or {}).get("median_ms")
    wall_speedup = result.get("wall_speedup")
    kernel_verdict = speedup_verdict(float(kernel_speedup))
    kernel = f"profiled kernel time {kernel_speedup:.2f}x"
    if isinstance(wall_speedup, int | float) and wall_speedup > 0 and base_ms and opt_ms:
        verdict, basis, speedup = speedup_verdict(float(wall_speedup)), "wall_time", float(wall_speedup)
        text = (f"{verdict.upper()} end to end: {base_ms:.3f} -> {opt_ms:.3f} ms wall time per step "
                f"({wall_speedup:.2f}x); {kernel}")
        if verdict != kernel_verdict:
            text += ": " + disagreement(kernel_verdict, verdict)
    else:
        verdict, basis, speedup = kernel_verdict, "kernel_time", float(kernel_speedup)
        text = f"{verdict.upper()} on {kernel}; no end-to-end wall time measured (wall_iters was 0?)"
    return EndToEndOut(verdict=verdict, verdict_basis=basis, speedup=speedup, headline=text + ".",
                       base_wall_ms=base_ms, opt_wall_ms=opt_ms,
                       wall_speedup=wall_speedup if basis == "wall_time" else None,
                       kernel_verdict=kernel_verdict, kernel_speedup=float(kernel_speedup),
                       agree=basis == "kernel_time" or verdict == kernel_verdict,
                       source=str(Path(result.get("run_dir") or ".") / OPTIMIZE_NAME))


def optimize_result_of(snap: JobSnapshot) -> OptimizeResultOut:
    jid = snap.job_id
    if snap.live:
        raise ToolError(f"optimize {jid} is still {snap.state.value}; "
                        f"call optimize_status('{jid}', wait_s=60) until its state is succeeded")
    where = f"; {snap.run_dir} keeps what it did so far" if snap.run_dir else ""
    if snap.state is JobState.FAILED:
        raise ToolError(f"optimize {jid} failed: {snap.error}{where}")
    if snap.state is JobState.CANCELLED:
        raise ToolError(f"optimize {jid} was cancelled ({snap.error}){where}; call optimize to start again")
    result = snap.result
    if result is None:
        raise ToolError(f"optimize {jid} returned no result; its run directory {snap.run_dir} has optimize.json")
    data: dict[str, Any] = result.model_dump(mode="json") if hasattr(result, "model_dump") else dict(result)
    return OptimizeResultOut(job_id=jid, run_dir=str(data.get("run_dir")), end_to_end=loop_end_to_end(data),
                             result=data)


def _run_loop(workload: Path, config: Any, *, progress: Any, cancel: Any) -> Any:
    from profiler_core import api

    return api.optimize(workload, config, progress=progress, cancel=cancel)


def register(mcp: MCPServer, ctx: ToolContext) -> None:
    ws, jobs = ctx.workspace, ctx.jobs

    @mcp.tool(title="Optimize a workload",
              annotations=hints("Optimize a workload", read_only=False, idempotent=False))
    async def optimize(
        workload: Annotated[str, Field(max_length=PATH_CHARS,
            description="Workload .py file defining get_model_and_inputs(device) (and optionally step).")],
        context: Context,
        device: Annotated[Literal["cuda", "cpu"], Field(
            description="Where captures, passes and wall times run.")] = "cuda",
        budget: Annotated[int, Field(ge=1, le=16, description="Passes tried at most.")] = 4,
        compile_mode: Annotated[CaptureCompileMode | None, Field(
            description="eager, or torch.compile with this Inductor mode, for every capture; default "
                        "'default'.")] = None,
        wall_iters: Annotated[int, Field(ge=0, le=1000, description=(
            "Iterations timed end to end (CUDA events) for the baseline and the kept plan; 0 skips the "
            "timing, and the verdict falls back to kernel time."))] = 30,
        min_speedup: Annotated[float, Field(ge=1.0, le=10.0, description=(
            "A pass must make the step at least this much faster to be kept."))] = 1.01,
        yardstick: Annotated[bool, Field(description=(
            "Also time the recipe a user would write instead (torch.compile, autocast bf16 + compile, ...) "
            "beside the kept plan; needs wall_iters > 0."))] = True,
        baseline_run: Annotated[str | None, Field(max_length=PATH_CHARS,
            description="Reuse this capture's run directory as the baseline (no new baseline capture).")] = None,
        out_dir: Annotated[str | None, Field(max_length=PATH_CHARS,
            description="The loop's run directory; default oprof-runs/<workload>-optimize-<UTC time>.")] = None,
        wait_s: WaitS = 0,
    ) -> OptimizeJobStatus:
        """Run the closed loop on a workload as a background job: capture, diagnose, try passes, keep what helps.

        Returns the job id at once (or after wait_s). optimize_status follows it, optimize_result
        returns optimize.json with the end-to-end verdict, cancel_optimize stops it. One GPU job
        (capture or optimize) runs at a time.
        """
        from datetime import UTC, datetime

        from profiler_core.capture.config import CaptureConfig, CompileMode
        from profiler_core.optimize import OptimizeConfig

        with tool_errors(ws):
            path = workload_file(ws, workload)
            if out_dir:
                out = ws.output_dir(out_dir)
            else:
                out = ctx.runs_dir / f"{path.stem}-optimize-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"
            if out.exists() and (not out.is_dir() or any(out.iterdir())):
                raise ToolError(f"{out} already exists and is not empty; pass another out_dir")
            baseline = ws.existing_dir(baseline_run, what="capture run directory") if baseline_run else None
            capture = CaptureConfig(compile_mode=CompileMode(compile_mode) if compile_mode
                                    else CaptureConfig().compile_mode)
            config = OptimizeConfig(out_dir=out, baseline_run=baseline, budget=budget, device=device,
                                    capture=capture, min_speedup=min_speedup, wall_iters=wall_iters,
                                    yardstick=yardstick)
            snap = jobs.start(path, config, run_dir=out, kind="optimize", fn=_run_loop)
        return optimize_status_of(await follow(context, jobs, snap.job_id, wait_s))

    @mcp.tool(title="Optimize status", annotations=hints("Optimize status", read_only=True))
    async def optimize_status(job_id: OptJobId, context: Context, wait_s: WaitS = 30) -> OptimizeJobStatus:
        """An optimize job's state and latest progress; waits up to wait_s for it to end."""
        with tool_errors(ws):
            jobs.snapshot(job_id)
        return optimize_status_of(await follow(context, jobs, job_id, wait_s))

    @mcp.tool(title="Optimize result", annotations=hints("Optimize result", read_only=True))
    def optimize_result(job_id: OptJobId) -> OptimizeResultOut:
        """The finished loop: optimize.json (trials, kept passes, kernel and wall times) and its end-to-end
        verdict, wall time per step first."""
        with tool_errors(ws):
            return optimize_result_of(jobs.snapshot(job_id))

    @mcp.tool(title="Cancel an optimize loop",
              annotations=hints("Cancel an optimize loop", read_only=False, destructive=True))
    async def cancel_optimize(
        job_id: OptJobId,
        wait_s: Annotated[float, Field(ge=0, le=60, description="Seconds to wait for the loop to stop.")] = 15,
    ) -> OptimizeJobStatus:
        """Stop a running optimize loop: its capture processes are killed; the trials before stay on disk."""
        with tool_errors(ws):
            snap = await cancel_and_wait(jobs, job_id, wait_s)
        return optimize_status_of(snap)
