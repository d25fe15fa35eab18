"""GPU jobs (a capture, an optimize loop, a wall-time run): one background thread each, a cancel Event,
and the progress seen so far.

A capture takes minutes (several profiled processes), longer than an MCP client waits for
one call, so the ``capture`` tool starts a job and returns its id; ``capture_status`` and
``capture_result`` read a snapshot; ``cancel_capture`` sets the Event, which the capture
pipeline watches to kill its child process group. One GPU runs one capture at a time, so a
second start while one is live is refused with :class:`CaptureBusyError`; an optimize loop or a
wall-time run is a job of another ``kind`` on the same manager, so it waits for the GPU the same way.

The capture function is injected (tests pass a fake one); it is called as
``capture_fn(workload, config, progress=callback, cancel=event)``, with
``callback(phase, step, total, message)``, and returns an object with ``run_dir`` and
``manifest``. Another kind's function is passed to :meth:`JobManager.start` with the same signature.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from profiler_core.errors import CaptureCancelledError, ProfilerError

logger = logging.getLogger(__name__)

CaptureFn = Callable[..., Any]
_RECENT_EVENTS = 8  # progress lines kept per job for capture_status
_FINISHED_KEPT = 50  # finished jobs remembered, oldest dropped first
CANCELLABLE = frozenset({"capture", "optimize"})  # kinds with a cancel_<kind> tool
ID_PREFIX = {"capture": "cap", "optimize": "opt", "walltime": "wall"}  # job ids read cap-..., opt-..., wall-...


class JobState(StrEnum):
    RUNNING = "running"
    CANCELLING = "cancelling"  # cancel requested; the pipeline is stopping its processes
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


LIVE_STATES = frozenset({JobState.RUNNING, JobState.CANCELLING})


class CaptureBusyError(ProfilerError):
    """A capture is already running on this GPU."""


class UnknownJobError(ProfilerError):
    """No capture job has this id."""


@dataclass(frozen=True)
class ProgressEvent:
    """One progress report from the pipeline."""

    phase: str
    step: int
    total: int
    message: str
    elapsed_s: float


@dataclass(frozen=True)
class JobSnapshot:
    """A consistent copy of one job's state (what the status tools render)."""

    job_id: str
    workload: Path
    run_dir: Path | None
    state: JobState
    started_at: str
    elapsed_s: float
    events: int  # progress reports so far; increases monotonically
    last: ProgressEvent | None
    recent: tuple[ProgressEvent, ...]
    cancel_requested: bool
    error: str | None
    result: Any | None
    kind: str = "capture"

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES


@dataclass
class _Job:
    """Mutable job state; only touched under the manager's lock."""

    job_id: str
    workload: Path
    config: Any
    run_dir: Path | None
    started_monotonic: float
    started_at: str
    cancel: threading.Event = field(default_factory=threading.Event)
    state: JobState = JobState.RUNNING
    events: int = 0
    recent: deque[ProgressEvent] = field(default_factory=lambda: deque(maxlen=_RECENT_EVENTS))
    error: str | None = None
    result: Any | None = None
    finished_monotonic: float | None = None
    thread: threading.Thread | None = None
    kind: str = "capture"


def _field(obj: Any, name: str) -> Any:
    """``obj.name`` or ``obj[name]``: a manifest may be a pydantic model or a plain dict."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _default_capture_fn() -> CaptureFn:
    from profiler_core import api

    return api.capture


class JobManager:
    """Starts, tracks and cancels capture jobs; at most one live at a time."""

    def __init__(self, capture_fn: CaptureFn | None = None) -> None:
        self._capture_fn = capture_fn
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()

    def start(self, workload: Path, config: Any, *, run_dir: Path | None = None, kind: str = "capture",
              fn: CaptureFn | None = None) -> JobSnapshot:
        """Start a job in a background thread (a capture unless ``kind`` and ``fn`` say otherwise);
        refuse while another job of any kind is live, since they share the GPU."""
        run_fn = fn or self._capture_fn or _default_capture_fn()
        with self._lock:
            for job in self._jobs.values():
                if job.state in LIVE_STATES:
                    phase = f", phase {job.recent[-1].phase!r}" if job.recent else ""
                    raise CaptureBusyError(
                        f"{job.kind} {job.job_id} of {job.workload.name} is still {job.state.value}{phase}; "
                        f"one GPU runs one capture at a time (an optimize loop or a wall-time run counts as one): "
                        f"call {job.kind}_status('{job.job_id}') to follow it"
                        + (f", or cancel_{job.kind}('{job.job_id}') to stop it" if job.kind in CANCELLABLE else "")
                    )
            job = _Job(job_id=f"{ID_PREFIX.get(kind, kind)}-{uuid.uuid4().hex[:10]}", workload=workload,
                       config=config, run_dir=run_dir, started_monotonic=time.monotonic(),
                       started_at=datetime.now(UTC).isoformat(timespec="seconds"), kind=kind)
            self._jobs[job.job_id] = job
            self._forget_old()
            thread = threading.Thread(target=self._run, args=(job, run_fn), name=f"oprof-{job.job_id}",
                                      daemon=True)
            job.thread = thread
            thread.start()
            logger.info("%s %s started: %s", kind, job.job_id, workload)
            return self._snapshot(job)

    def _forget_old(self) -> None:
        finished = [j for j in self._jobs.values() if j.state not in LIVE_STATES]
        for job in finished[: max(0, len(finished) - _FINISHED_KEPT)]:
            del self._jobs[job.job_id]

    def _progress_callback(self, job: _Job) -> Callable[[str, int, int, str], None]:
        def progress(phase: str, step: int, total: int, message: str = "") -> None:
            event = ProgressEvent(phase=str(phase), step=int(step), total=int(total), message=str(message),
                                  elapsed_s=round(time.monotonic() - job.started_monotonic, 3))
            with self._lock:
                job.events += 1
                job.recent.append(event)

        return progress

    def _run(self, job: _Job, capture_fn: CaptureFn) -> None:
        state, error, result = JobState.SUCCEEDED, None, None
        try:
            result = capture_fn(job.workload, job.config, progress=self._progress_callback(job),
                                cancel=job.cancel)
        except CaptureCancelledError as err:
            state, error = JobState.CANCELLED, str(err)
        except ProfilerError as err:
            state, error = (JobState.CANCELLED if job.cancel.is_set() else JobState.FAILED), str(err)
        except BaseException as err:  # a crash must still end the job, or the GPU stays "busy"
            logger.exception("%s %s crashed", job.kind, job.job_id)
            state = JobState.CANCELLED if job.cancel.is_set() else JobState.FAILED
            error = f"the {job.kind} crashed ({type(err).__name__}: {err}); the server log has the traceback"
        else:
            manifest = getattr(result, "manifest", None)
            status = str(_field(manifest, "status") or "")
            if status == "failed":
                state = JobState.FAILED
                error = str(_field(manifest, "error") or "the capture reported failure")
            elif status == "cancelled" or (job.cancel.is_set() and status != "complete"):
                state, error = JobState.CANCELLED, f"cancelled before the {job.kind} completed"
        with self._lock:
            job.state, job.error, job.result = state, error, result
            run_dir = getattr(result, "run_dir", None)
            if run_dir is not None:
                job.run_dir = Path(run_dir)
            job.finished_monotonic = time.monotonic()
        logger.info("%s %s %s%s", job.kind, job.job_id, state.value, f": {error}" if error else "")

    def _get(self, job_id: str) -> _Job:
        job = self._jobs.get(job_id)
        if job is None:
            known = ", ".join(sorted(self._jobs)) or "none yet"
            kind = next((k for k, p in ID_PREFIX.items() if job_id.startswith(f"{p}-")), "capture")
            raise UnknownJobError(
                f"no {kind} job {job_id!r} (jobs this server knows: {known}); "
                f"call {kind} to start one, or list_runs to find finished runs on disk"
            )
        return job

    def _snapshot(self, job: _Job) -> JobSnapshot:
        end = job.finished_monotonic if job.finished_monotonic is not None else time.monotonic()
        return JobSnapshot(
            job_id=job.job_id, workload=job.workload, run_dir=job.run_dir, state=job.state,
            started_at=job.started_at, elapsed_s=round(end - job.started_monotonic, 3), events=job.events,
            last=job.recent[-1] if job.recent else None, recent=tuple(job.recent),
            cancel_requested=job.cancel.is_set(), error=job.error, result=job.result, kind=job.kind,
        )

    def snapshot(self, job_id: str) -> JobSnapshot:
        """The job's current state."""
        with self._lock:
            return self._snapshot(self._get(job_id))

    def snapshots(self) -> list[JobSnapshot]:
        """Every job this manager remembers, oldest first."""
        with self._lock:
            return [self._snapshot(j) for j in self._jobs.values()]

    def cancel(self, job_id: str) -> JobSnapshot:
        """Ask a live job to stop (sets its cancel Event); a finished job is returned unchanged."""
        with self._lock:
            job = self._get(job_id)
            if job.state is JobState.RUNNING:
                job.cancel.set()
                job.state = JobState.CANCELLING
                logger.info("%s %s: cancel requested", job.kind, job_id)
            return self._snapshot(job)

    def join(self, job_id: str, timeout_s: float) -> JobSnapshot:
        """Block until the job's thread ends or ``timeout_s`` passes; return the snapshot."""
        with self._lock:
            thread = self._get(job_id).thread
        if thread is not None:
            thread.join(timeout=max(0.0, timeout_s))
        return self.snapshot(job_id)

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Cancel every live job and give their threads ``timeout_s`` in all to stop."""
        with self._lock:
            live = [j for j in self._jobs.values() if j.state in LIVE_STATES]
            for job in live:
                job.cancel.set()
                job.state = JobState.CANCELLING
        deadline = time.monotonic() + timeout_s
        for job in live:
            if job.thread is not None:
                job.thread.join(timeout=max(0.0, deadline - time.monotonic()))
