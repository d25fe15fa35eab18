"""Capture tools: start a capture job, follow it (with progress notifications), fetch, cancel.

``capture`` returns a job id at once (or after ``wait_s``); ``capture_status`` waits up to
``wait_s`` for the job to end while forwarding each progress report as an MCP progress
notification, so no call outlives the client's patience; ``capture_result`` summarises the
finished run; ``cancel_capture`` sets the job's cancel Event, which kills the pipeline's
child process group.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mcp_server.arguments import ID_CHARS, PATH_CHARS
from mcp_server.config import ToolContext
from mcp_server.errors import tool_errors
from mcp_server.jobs import JobManager, JobSnapshot, JobState, ProgressEvent
from mcp_server.models import CaptureJobStatus, CaptureResultOut, PhaseSummary, ProgressLine
from mcp_server.runs import MANIFEST_NAME, read_run, summarize_manifest
from mcp_server.tools import hints, workload_file
from mcp_server.views import capped_warnings
from profiler_core.capture.config import CaptureConfig, CounterMode
from profiler_core.compile_mode import CaptureCompileMode, CompileMode
from profiler_core.rundir.create import default_run_dir

POLL_S = 0.1  # how often a waiting call looks for new progress
MAX_WAIT_S = 110  # below Claude Code's 2-minute auto-background threshold

JobId = Annotated[str, Field(max_length=ID_CHARS, description="The job id capture returned (cap-...).")]
WaitS = Annotated[float, Field(ge=0, le=MAX_WAIT_S, description=(
    "Seconds to wait for the job to end while streaming progress notifications; "
    "the call returns as soon as the job ends."))]


def _line(event: ProgressEvent) -> ProgressLine:
    return ProgressLine(phase=event.phase, step=event.step, total=event.total, message=event.message,
                        elapsed_s=event.elapsed_s)


def _next_step(snap: JobSnapshot) -> str:
    jid = snap.job_id
    return {
        JobState.RUNNING: f"call capture_status('{jid}', wait_s=60) to follow it, "
                          f"or cancel_capture('{jid}') to stop it",
        JobState.CANCELLING: f"the pipeline is stopping its processes; call capture_status('{jid}')",
        JobState.SUCCEEDED: f"call capture_result('{jid}'), then attribute(run_dir='{snap.run_dir}')",
        JobState.FAILED: "read the error, fix the workload or the settings, then call capture again",
        JobState.CANCELLED: "call capture to start a new one",
    }[snap.state]


def job_status(snap: JobSnapshot) -> CaptureJobStatus:
    """The wire form of a job snapshot."""
    return CaptureJobStatus(
        job_id=snap.job_id, state=snap.state.value, workload=str(snap.workload),
        run_dir=str(snap.run_dir) if snap.run_dir else None, started_at=snap.started_at,
        elapsed_s=snap.elapsed_s, progress=_line(snap.last) if snap.last else None,
        recent=[_line(e) for e in snap.recent], cancel_requested=snap.cancel_requested, error=snap.error,
        next_step=_next_step(snap),
    )


async def follow(context: Context, jobs: JobManager, job_id: str, wait_s: float) -> JobSnapshot:
    """Wait up to ``wait_s`` for the job to end, sending each new progress event to the client."""
    deadline = anyio.current_time() + wait_s
    reported = -1  # number of the last event sent; 0 is the "started" line
    while True:
        snap = jobs.snapshot(job_id)
        if reported < 0:  # a first line, however far the job got before this call looked
            await context.report_progress(0, None, f"{snap.kind} {job_id} started" if snap.events == 0 else
                                          f"{snap.kind} {job_id}: following, {snap.events} event(s) so far")
            reported = 0
        first = snap.events - len(snap.recent) + 1  # the event number of recent[0]
        for number, event in enumerate(snap.recent, start=first):
            if number > reported:
                await context.report_progress(
                    number, None, f"{event.phase} {event.step}/{event.total}: {event.message}")
                reported = number
        remaining = deadline - anyio.current_time()
        if not snap.live or remaining <= 0:
            return snap
        await anyio.sleep(min(POLL_S, remaining))


async def cancel_and_wait(jobs: JobManager, job_id: str, wait_s: float) -> JobSnapshot:
    """Ask the job to stop, then wait up to ``wait_s`` for it to end; its last snapshot."""
    jobs.cancel(job_id)
    deadline = anyio.current_time() + wait_s
    snap = jobs.snapshot(job_id)
    while snap.live and anyio.current_time() < deadline:
        await anyio.sleep(POLL_S)
        snap = jobs.snapshot(job_id)
    return snap


def _manifest_dict(snap: JobSnapshot) -> dict[str, Any] | None:
    manifest = getattr(snap.result, "manifest", None)
    if manifest is None:
        return None
    if hasattr(manifest, "model_dump"):
        return manifest.model_dump(mode="json")
    return manifest if isinstance(manifest, dict) else None


def capture_result_of(snap: JobSnapshot) -> CaptureResultOut:
    """The summary of a finished capture (a ``ToolError`` unless it succeeded)."""
    jid = snap.job_id
    if snap.live:
        phase = f" (phase {snap.last.phase})" if snap.last else ""
        raise ToolError(f"capture {jid} is still {snap.state.value}{phase}; "
                        f"call capture_status('{jid}', wait_s=60) until its state is succeeded")
    where = f"; the run directory {snap.run_dir} keeps the phase logs" if snap.run_dir else ""
    if snap.state is JobState.FAILED:
        raise ToolError(f"capture {jid} failed: {snap.error}{where}")
    if snap.state is JobState.CANCELLED:
        raise ToolError(f"capture {jid} was cancelled ({snap.error}){where}; call capture to start again")
    run_dir = snap.run_dir
    if run_dir is None:
        raise ToolError(f"capture {jid} returned no run directory; call list_runs to find it")
    manifest = _manifest_dict(snap)
    run = summarize_manifest(run_dir, manifest) if manifest is not None else read_run(run_dir)
    data = manifest or {}
    phases = [PhaseSummary(name=str(p.get("name")), status=str(p.get("status")),
                           duration_s=p.get("duration_s"), note=p.get("note"))
              for p in data.get("phases") or [] if isinstance(p, dict)]
    warnings, warnings_showing = capped_warnings([str(w) for w in data.get("warnings") or []],
                                                 f"all of them are in {run_dir / MANIFEST_NAME}")
    return CaptureResultOut(job_id=jid, run=run, manifest=str(run_dir / MANIFEST_NAME), phases=phases,
                            warnings=warnings, warnings_showing=warnings_showing)


def register(mcp: MCPServer, ctx: ToolContext) -> None:
    ws, jobs = ctx.workspace, ctx.jobs

    @mcp.tool(title="Capture a workload",
              annotations=hints("Capture a workload", read_only=False, idempotent=False))
    async def capture(
        workload: Annotated[str, Field(max_length=PATH_CHARS,
            description="Workload .py file defining get_model_and_inputs(device) (and optionally step).")],
        context: Context,
        compile_mode: Annotated[CaptureCompileMode | None, Field(
            description="eager, or torch.compile with this Inductor mode; default 'default'.")] = None,
        warmup: Annotated[int | None, Field(ge=0, le=1000, description="Warmup iterations (default 2).")
                          ] = None,
        iters: Annotated[int | None, Field(ge=1, le=1000, description="Measured iterations (default 2).")
                         ] = None,
        counters: Annotated[Literal["per-config", "full", "none"] | None, Field(
            description="Nsight Compute coverage: one launch per configuration (default), every launch, "
                        "or no counter phase.")] = None,
        out_dir: Annotated[str | None, Field(max_length=PATH_CHARS,
            description="Run directory to create; default oprof-runs/<workload>-<UTC time> in the workspace.")
        ] = None,
        ranks: Annotated[int | None, Field(ge=1, le=64, description=(
            "Processes under torchrun (one per GPU), each rank captured into <run>/rank<N>/; attribute then "
            "takes the run directory as a whole. Default: one process."))] = None,
        wait_s: WaitS = 0,
    ) -> CaptureJobStatus:
        """Start capturing a workload (Kineto trace, nsys timeline, ncu counters) as a background job.

        Returns the job id and its state; one capture runs at a time. The job runs each
        phase in its own process; capture_status follows it, capture_result summarises it,
        cancel_capture stops it.
        """
        with tool_errors(ws):
            path = workload_file(ws, workload)
            if out_dir:
                run_dir = ws.resolve(out_dir)
            else:
                run_dir = default_run_dir(path, ctx.runs_dir)
            if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
                raise ToolError(f"{run_dir} already exists and is not empty; pass another out_dir")
            defaults = CaptureConfig()
            config = CaptureConfig(
                out_dir=run_dir, ranks=ranks,
                compile_mode=CompileMode(compile_mode) if compile_mode else defaults.compile_mode,
                warmup=defaults.warmup if warmup is None else warmup,
                iters=defaults.iters if iters is None else iters,
                counters=CounterMode(counters) if counters else defaults.counters)
            snap = jobs.start(path, config, run_dir=run_dir)
        return job_status(await follow(context, jobs, snap.job_id, wait_s))

    @mcp.tool(title="Capture status", annotations=hints("Capture status", read_only=True))
    async def capture_status(job_id: JobId, context: Context, wait_s: WaitS = 30) -> CaptureJobStatus:
        """A capture job's state and latest progress; waits up to wait_s for it to end."""
        with tool_errors(ws):
            jobs.snapshot(job_id)
        return job_status(await follow(context, jobs, job_id, wait_s))

    @mcp.tool(title="Capture result", annotations=hints("Capture result", read_only=True))
    def capture_result(job_id: JobId) -> CaptureResultOut:
        """The finished capture's run directory, measurement settings, phases and warnings."""
        with tool_errors(ws):
            return capture_result_of(jobs.snapshot(job_id))

    @mcp.tool(title="Cancel a capture",
              annotations=hints("Cancel a capture", read_only=False, destructive=True))
    async def cancel_capture(
        job_id: JobId,
        wait_s: Annotated[float, Field(ge=0, le=60, description="Seconds to wait for the job to stop.")] = 15,
    ) -> CaptureJobStatus:
        """Stop a running capture: its profiler and workload processes are killed; the run ends cancelled."""
        with tool_errors(ws):
            snap = await cancel_and_wait(jobs, job_id, wait_s)
        return job_status(snap)
