"""Run one phase's child process: own process group, logs to files, timeout, cancellation.

The child starts a new session (``start_new_session=True``) so that a timeout, a set
cancel event or Ctrl-C in the parent can kill everything it spawned (ncu's target,
Inductor's compile workers) with ``os.killpg``: SIGTERM first, SIGKILL after a grace
period. A terminal's Ctrl-C does not reach the child's group, so the parent relays it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from profiler_core.errors import CaptureCancelledError, ToolFailedError

POLL_S = 0.05
KILL_GRACE_S = 5.0


@dataclass(frozen=True)
class ProcessResult:
    """How one child process ended."""

    command: tuple[str, ...]
    returncode: int
    duration_s: float
    stdout_path: Path
    stderr_path: Path

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def tail_lines(path: Path, n: int = 5) -> list[str]:
    """The last ``n`` non-empty lines of a log file (empty when it is missing)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    return lines[-n:]


def failure_summary(result: ProcessResult, n: int = 5) -> str:
    """The last lines of a failed child's stderr (or stdout), joined for a one-line error."""
    lines = tail_lines(result.stderr_path, n) or tail_lines(result.stdout_path, n)
    return " | ".join(lines) if lines else "no output"


def kill_process_group(proc: subprocess.Popen[bytes], grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM the child's whole process group, then SIGKILL what is left after ``grace_s``."""
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        pgid = proc.pid
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        # The leader is gone; members of its group may still live (e.g. a grandchild
        # that ignores SIGTERM), so still SIGKILL the group once.
        if sig is signal.SIGTERM:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        break
    if proc.poll() is None:
        proc.wait()


def _reap_leftovers(pgid: int) -> None:
    """Terminate members of a finished child's group that outlived it (e.g. stray workers)."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass


def run_process(command: Sequence[str], *, stdout_path: Path, stderr_path: Path,
                env: Mapping[str, str] | None = None, cwd: Path | None = None,
                timeout_s: float | None = None, cancel: threading.Event | None = None,
                label: str = "phase", kill_grace_s: float = KILL_GRACE_S) -> ProcessResult:
    """Run ``command`` to completion and return its exit status (a non-zero one is not raised).

    Raises ToolFailedError on timeout and CaptureCancelledError when ``cancel`` is set; in
    both cases, and on KeyboardInterrupt, the child's process group is killed first.
    """
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    stderr_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        try:
            proc = subprocess.Popen(list(command), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    env=None if env is None else dict(env), cwd=cwd,
                                    start_new_session=True)
        except OSError as exc:
            raise ToolFailedError(f"{label}: cannot start {command[0]}: {exc.strerror or exc}") from exc
        try:
            while True:
                try:
                    returncode = proc.wait(timeout=POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if cancel is not None and cancel.is_set():
                    kill_process_group(proc, kill_grace_s)
                    raise CaptureCancelledError(f"{label} cancelled; the run directory holds what was done")
                if timeout_s is not None and time.monotonic() - start > timeout_s:
                    kill_process_group(proc, kill_grace_s)
                    tail = " | ".join(tail_lines(stderr_path, 3)) or "no output"
                    raise ToolFailedError(
                        f"{label} timed out after {timeout_s:g} s and was killed (last output: {tail}; "
                        f"log {stderr_path}); raise --phase-timeout or shorten the workload"
                    )
        except BaseException:
            if proc.poll() is None:
                kill_process_group(proc, kill_grace_s)
            raise
    _reap_leftovers(proc.pid)
    return ProcessResult(command=tuple(command), returncode=returncode,
                         duration_s=time.monotonic() - start, stdout_path=stdout_path,
                         stderr_path=stderr_path)
