"""The capture job manager, driven by fake capture functions (no GPU, no subprocesses)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mcp_server.jobs import CaptureBusyError, JobManager, JobState, UnknownJobError
from profiler_core.errors import CaptureCancelledError, ToolFailedError


@dataclass
class FakeResult:
    run_dir: Path
    manifest: dict[str, Any] = field(default_factory=lambda: {"status": "complete"})


class SlowCapture:
    """Reports a phase, then blocks until cancelled (or released), like a long ncu phase."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.cancel_seen: threading.Event | None = None

    def __call__(self, workload: Path, config: Any, *, progress: Any, cancel: threading.Event) -> FakeResult:
        self.cancel_seen = cancel
        progress("kineto", 1, 3, "torch.profiler trace")
        self.started.set()
        while not cancel.wait(0.01):
            if self.release.is_set():
                progress("counters", 3, 3, "ncu done")
                return FakeResult(run_dir=Path(config["out_dir"]))
        raise CaptureCancelledError("capture cancelled during phase 'kineto'")


def test_success_records_progress_and_result(tmp_path: Path) -> None:
    fake = SlowCapture()
    jobs = JobManager(fake)
    snap = jobs.start(tmp_path / "w.py", {"out_dir": tmp_path / "run"}, run_dir=tmp_path / "run")
    assert fake.started.wait(5)
    running = jobs.snapshot(snap.job_id)
    assert running.state is JobState.RUNNING and running.last.phase == "kineto"
    fake.release.set()
    done = jobs.join(snap.job_id, 5)
    assert done.state is JobState.SUCCEEDED
    assert done.events == 2 and [e.phase for e in done.recent] == ["kineto", "counters"]
    assert done.result.run_dir == tmp_path / "run"


def test_cancel_sets_the_event_and_ends_cancelled(tmp_path: Path) -> None:
    fake = SlowCapture()
    jobs = JobManager(fake)
    snap = jobs.start(tmp_path / "w.py", {"out_dir": tmp_path / "run"})
    assert fake.started.wait(5)
    assert jobs.cancel(snap.job_id).state is JobState.CANCELLING
    done = jobs.join(snap.job_id, 5)
    assert fake.cancel_seen is not None and fake.cancel_seen.is_set()
    assert done.state is JobState.CANCELLED and "cancelled" in done.error


def test_second_capture_is_refused_while_one_runs(tmp_path: Path) -> None:
    fake = SlowCapture()
    jobs = JobManager(fake)
    first = jobs.start(tmp_path / "a.py", {"out_dir": tmp_path / "a"})
    assert fake.started.wait(5)
    with pytest.raises(CaptureBusyError, match=first.job_id) as err:
        jobs.start(tmp_path / "b.py", {"out_dir": tmp_path / "b"})
    assert "cancel_capture" in str(err.value) and "a.py" in str(err.value)
    jobs.cancel(first.job_id)
    jobs.join(first.job_id, 5)
    fake.release.set()  # the GPU is free again: a new capture starts
    second = jobs.start(tmp_path / "b.py", {"out_dir": tmp_path / "b"})
    assert jobs.join(second.job_id, 5).state is JobState.SUCCEEDED


@pytest.mark.parametrize(("error", "state", "text"), [
    (ToolFailedError("ncu exited with status 1: ERR_NVGPUCTRPERM"), JobState.FAILED, "ERR_NVGPUCTRPERM"),
    (RuntimeError("boom"), JobState.FAILED, "crashed (RuntimeError: boom)"),
], ids=["profiler-error", "crash"])
def test_failures_end_the_job(tmp_path: Path, error: Exception, state: JobState, text: str) -> None:
    def failing(*_: Any, **__: Any) -> None:
        raise error

    jobs = JobManager(failing)
    snap = jobs.start(tmp_path / "w.py", {})
    done = jobs.join(snap.job_id, 5)
    assert done.state is state and text in done.error
    jobs.start(tmp_path / "w.py", {})  # a failed job does not keep the GPU busy


def test_manifest_status_decides_a_returned_run(tmp_path: Path) -> None:
    jobs = JobManager(lambda *_, **__: FakeResult(tmp_path, {"status": "failed", "error": "nsys crashed"}))
    done = jobs.join(jobs.start(tmp_path / "w.py", {}).job_id, 5)
    assert done.state is JobState.FAILED and done.error == "nsys crashed"


def test_unknown_job_names_the_known_ones(tmp_path: Path) -> None:
    jobs = JobManager(lambda *_, **__: FakeResult(tmp_path))
    known = jobs.start(tmp_path / "w.py", {}).job_id
    with pytest.raises(UnknownJobError, match=known):
        jobs.snapshot("cap-nope")


def test_shutdown_cancels_live_jobs(tmp_path: Path) -> None:
    fake = SlowCapture()
    jobs = JobManager(fake)
    snap = jobs.start(tmp_path / "w.py", {})
    assert fake.started.wait(5)
    jobs.shutdown(timeout_s=5)
    assert jobs.snapshot(snap.job_id).state is JobState.CANCELLED
