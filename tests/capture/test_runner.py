"""The phase runner: exit status, logs, timeout and cancellation kill the whole process group."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from profiler_core.capture.runner import failure_summary, run_process, tail_lines
from profiler_core.errors import CaptureCancelledError, ToolFailedError


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """True once ``pid`` no longer runs (a zombie awaiting its reaper counts as gone)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def _wait_for(path: Path, within_s: float = 5.0) -> str:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


def _family_script(tmp_path: Path) -> list[str]:
    """A shell that starts a sleeping grandchild, records both pids, and waits."""
    script = (
        f"sleep 60 & echo $! > {tmp_path}/grandchild.pid; echo $$ > {tmp_path}/child.pid; "
        "echo started >&2; wait"
    )
    return ["/bin/sh", "-c", script]


def test_exit_status_and_logs_are_kept(tmp_path: Path) -> None:
    result = run_process(
        [sys.executable, "-c", "import sys; print('out'); print('bad', file=sys.stderr); sys.exit(4)"],
        stdout_path=tmp_path / "o.log",
        stderr_path=tmp_path / "e.log",
    )
    assert result.returncode == 4 and not result.ok
    assert (tmp_path / "o.log").read_text() == "out\n"
    assert tail_lines(tmp_path / "e.log") == ["bad"]
    assert failure_summary(result) == "bad"
    assert result.duration_s > 0


def test_child_gets_the_environment_given(tmp_path: Path) -> None:
    env = {**os.environ, "OPROF_TEST_VALUE": "42"}
    run_process(
        [sys.executable, "-c", "import os; print(os.environ['OPROF_TEST_VALUE'])"],
        env=env,
        stdout_path=tmp_path / "o.log",
        stderr_path=tmp_path / "e.log",
    )
    assert (tmp_path / "o.log").read_text().strip() == "42"


def test_timeout_kills_child_and_grandchild(tmp_path: Path) -> None:
    start = time.monotonic()
    with pytest.raises(ToolFailedError) as err:
        run_process(
            _family_script(tmp_path),
            stdout_path=tmp_path / "o.log",
            stderr_path=tmp_path / "e.log",
            timeout_s=0.5,
            label="counters phase",
            kill_grace_s=2.0,
        )
    assert time.monotonic() - start < 5
    message = str(err.value)
    assert "counters phase timed out after 0.5 s" in message and "started" in message
    assert "--phase-timeout" in message
    child, grandchild = (int(_wait_for(tmp_path / f"{n}.pid")) for n in ("child", "grandchild"))
    assert _gone(child) and _gone(grandchild)


def test_cancel_event_kills_the_group(tmp_path: Path) -> None:
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    with pytest.raises(CaptureCancelledError, match="kineto phase cancelled"):
        run_process(
            _family_script(tmp_path),
            stdout_path=tmp_path / "o.log",
            stderr_path=tmp_path / "e.log",
            cancel=cancel,
            label="kineto phase",
            kill_grace_s=2.0,
        )
    grandchild = int(_wait_for(tmp_path / "grandchild.pid"))
    assert _gone(grandchild)


def test_sigterm_ignoring_grandchild_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    script = (
        f"sh -c 'trap \"\" TERM; echo $$ > {tmp_path}/grandchild.pid; sleep 60' & "
        f"echo $$ > {tmp_path}/child.pid; wait"
    )
    with pytest.raises(ToolFailedError):
        run_process(
            ["/bin/sh", "-c", script],
            stdout_path=tmp_path / "o.log",
            stderr_path=tmp_path / "e.log",
            timeout_s=0.5,
            kill_grace_s=0.5,
        )
    assert _gone(int(_wait_for(tmp_path / "grandchild.pid")))


def test_missing_program_is_a_tool_failure(tmp_path: Path) -> None:
    with pytest.raises(ToolFailedError, match="cannot start"):
        run_process([str(tmp_path / "nope")], stdout_path=tmp_path / "o.log", stderr_path=tmp_path / "e.log")


class _CtrlC:
    """Stands in for the cancel event; raises KeyboardInterrupt (Ctrl-C) on its third check."""

    def __init__(self) -> None:
        self.checks = 0

    def is_set(self) -> bool:
        self.checks += 1
        if self.checks >= 3:
            raise KeyboardInterrupt
        return False


def test_ctrl_c_kills_the_group_and_propagates(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        run_process(
            _family_script(tmp_path),
            stdout_path=tmp_path / "o.log",
            stderr_path=tmp_path / "e.log",
            cancel=_CtrlC(),  # type: ignore[arg-type]
            kill_grace_s=2.0,
        )
    child, grandchild = (int(_wait_for(tmp_path / f"{n}.pid")) for n in ("child", "grandchild"))
    assert _gone(child) and _gone(grandchild)
