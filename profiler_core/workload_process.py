"""Run workload code in a child process, bounded: a timeout, a memory cap, capped output.

A workload is user code. Imported into the caller (the MCP server, the CLI) it can take the
caller down with it: ``os._exit`` ends the process, ``sys.exit`` at import unwinds it, a loop
never returns, a print of gigabytes fills a pipe or a log. :func:`run_in_child` runs one
library call that loads a workload in ``python -m profiler_core.workload_process`` instead:

    run_in_child("profiler_core.passes.planner:apply_pass_plan",
                 {"workload_path": "model.py", "pass_names": ["sdpa"], "device": "cpu"},
                 result_type=OptimizationPlan, workload="model.py", limits=ChildLimits(timeout_s=600))
    -> the OptimizationPlan the call returned in the child

The child starts a new session, so a timeout kills everything it spawned (Inductor's compile
workers too). It sets ``RLIMIT_AS`` on itself before importing torch. Its stdout and stderr
are read through pipes; only the first and last ``output_bytes / 2`` of each are kept. The
call's result (or the ``ProfilerError`` it raised, re-raised here as the same class) comes
back through a JSON file. Any other end is a :class:`WorkloadProcessError` naming the
workload and how the child ended: ``exit`` (its own exit code, ``sys.exit`` or ``os._exit``),
``signal``, ``timeout`` or ``memory``.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from profiler_core import errors
from profiler_core.errors import ProfilerError, WorkloadError, WorkloadProcessError

DEFAULT_TIMEOUT_S = 1800.0  # Inductor's cold compile of a large model fits; a hung workload does not
DEFAULT_OUTPUT_BYTES = 64 * 1024
TIMEOUT_ENV = "OPROF_WORKLOAD_TIMEOUT_S"
MEMORY_ENV = "OPROF_WORKLOAD_MEMORY_GB"
_GIB = 1 << 30
_TAIL_LINES = 3

T = TypeVar("T")


def physical_memory_bytes() -> int | None:
    """This machine's RAM (None where the platform does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


@dataclass(frozen=True)
class ChildLimits:
    """Bounds of one child run; ``memory_bytes`` None: no address-space cap."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    memory_bytes: int | None = None
    output_bytes: int = DEFAULT_OUTPUT_BYTES

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ProfilerError(f"workload timeout {self.timeout_s}: pass a positive number of seconds")
        if self.memory_bytes is not None and self.memory_bytes <= 0:
            raise ProfilerError(f"workload memory limit {self.memory_bytes}: pass a positive size")

    @classmethod
    def for_device(cls, device: str, *, timeout_s: float | None = None, memory_gb: float | None = None,
                   output_bytes: int = DEFAULT_OUTPUT_BYTES) -> ChildLimits:
        """Limits from arguments, else the environment, else the defaults.

        The memory cap defaults to the machine's RAM on the CPU and to none on a GPU: the CUDA
        driver reserves address space far beyond any RAM cap, so ``RLIMIT_AS`` would stop it
        starting. ``memory_gb`` 0 means no cap.
        """
        timeout = timeout_s if timeout_s is not None else _env_float(TIMEOUT_ENV)
        gb = memory_gb if memory_gb is not None else _env_float(MEMORY_ENV)
        if gb is None:
            memory = None if device.startswith("cuda") else physical_memory_bytes()
        else:
            memory = None if gb == 0 else int(gb * _GIB)
        return cls(timeout_s=DEFAULT_TIMEOUT_S if timeout is None else timeout, memory_bytes=memory,
                   output_bytes=output_bytes)


def _env_float(name: str) -> float | None:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return None
    try:
        return float(raw)
    except ValueError as err:
        raise ProfilerError(f"{name}={raw!r} is not a number; set it to a number or unset it") from err


class _CappedStream:
    """Drain one pipe on a thread, keeping its first and last ``cap / 2`` bytes."""

    def __init__(self, pipe: Any, cap: int) -> None:
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._thread = threading.Thread(target=self._drain, args=(pipe,), daemon=True)
        self._thread.start()

    def _drain(self, pipe: Any) -> None:
        with pipe:
            while chunk := pipe.read(1 << 16):
                self.total += len(chunk)
                room = self.half - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail += chunk
                    del self.tail[:-self.half]

    def text(self, timeout_s: float = 5.0) -> str:
        self._thread.join(timeout_s)
        dropped = self.total - len(self.head) - len(self.tail)
        mid = f"\n[... {dropped} bytes not kept ...]\n" if dropped > 0 else ""
        return (bytes(self.head).decode(errors="replace") + mid + bytes(self.tail).decode(errors="replace"))


@dataclass(frozen=True)
class ChildOutput:
    """What the child printed, capped (see :class:`ChildLimits`)."""

    stdout: str
    stderr: str

    def last_lines(self, n: int = _TAIL_LINES) -> str:
        lines = [ln.strip() for ln in (self.stderr or self.stdout).splitlines() if ln.strip()]
        text = " | ".join(ln[:200] for ln in lines[-n:])
        return text or "no output"


def run_in_child(target: str, kwargs: dict[str, Any], *, result_type: type[T] | None = None,
                 workload: str | os.PathLike[str], limits: ChildLimits, label: str = "workload") -> T:
    """Call ``target`` ("module:function") with ``kwargs`` (JSON) in a bounded child; its result.

    ``result_type`` (a pydantic model) rebuilds the result from its JSON form. A ProfilerError
    the call raised is raised again here (same class, same message); any other way the child
    ends raises WorkloadProcessError.
    """
    name = Path(workload).name
    with tempfile.TemporaryDirectory(prefix="oprof-child-") as tmp:
        request, result_path = Path(tmp) / "request.json", Path(tmp) / "result.json"
        request.write_text(json.dumps({"target": target, "kwargs": kwargs, "result": str(result_path),
                                       "memory_bytes": limits.memory_bytes}))
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        proc = subprocess.Popen(
            [sys.executable, "-m", "profiler_core.workload_process", str(request)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            start_new_session=True)
        out, err = _CappedStream(proc.stdout, limits.output_bytes), _CappedStream(proc.stderr, limits.output_bytes)
        timed_out = _wait(proc, limits.timeout_s)
        output = ChildOutput(out.text(), err.text())
        if timed_out:
            raise WorkloadProcessError(
                f"{label}: {name} ran past the {limits.timeout_s:g} s limit and was killed (last output: "
                f"{output.last_lines()}); raise the limit (--timeout, or {TIMEOUT_ENV}) or make the "
                "workload smaller", how="timeout", output=output)
        answer = _read_answer(result_path)
    return _outcome(answer, proc.returncode, output, result_type=result_type, name=name, label=label,
                    limits=limits)


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float = 2.0) -> None:
    """SIGTERM the child's process group, SIGKILL it after ``grace_s``, and reap the child."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            continue
        if sig is signal.SIGTERM:
            continue  # the leader is gone; SIGKILL what is left of its group once
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _wait(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Wait for the child; True when it ran past ``timeout_s`` (its whole group is then killed)."""
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return True
    except BaseException:  # Ctrl-C in the caller: the child goes with it
        _kill_group(proc)
        raise
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # workers the child left behind
    except (ProcessLookupError, PermissionError):
        pass
    return False


def _read_answer(path: Path) -> dict[str, Any] | None:
    try:
        answer = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return answer if isinstance(answer, dict) else None


def _outcome(answer: dict[str, Any] | None, code: int, output: ChildOutput, *, result_type: Any,
             name: str, label: str, limits: ChildLimits) -> Any:
    if answer is not None and "value" in answer:
        value = answer["value"]
        return result_type.model_validate(value) if result_type is not None else value
    if answer is not None and "error" in answer:
        err = answer["error"]
        kind = err.get("kind")
        if kind == "memory":
            cap = f"the {limits.memory_bytes / _GIB:.3g} GiB cap" if limits.memory_bytes else "the machine's memory"
            why = f" ({err['message']})" if err.get("message") else ""
            raise WorkloadProcessError(
                f"{label}: {name} ran out of memory under {cap}{why}; raise the cap "
                f"(--memory-limit-gb, or {MEMORY_ENV}; 0 for none) or make the workload smaller",
                how="memory", output=output)
        if kind == "exit":
            raise WorkloadProcessError(
                f"{label}: {name} called sys.exit({err.get('message')}) {err.get('where', '')}; a workload "
                "must return from get_model_and_inputs, not exit the process", how="exit", output=output)
        cls = getattr(errors, str(err.get("type")), None)
        if isinstance(cls, type) and issubclass(cls, ProfilerError):
            raise cls(str(err.get("message")))
        raise WorkloadError(f"{label}: {name}: {err.get('message')}")
    if code < 0:
        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = f"signal {-code}"
        hint = (" (the kernel's out-of-memory killer sends this: make the workload smaller)"
                if -code == signal.SIGKILL else "")
        raise WorkloadProcessError(
            f"{label}: {name} was killed by {sig}{hint} (last output: {output.last_lines()})",
            how="signal", output=output)
    raise WorkloadProcessError(
        f"{label}: {name} ended the process with exit code {code} before the call returned (os._exit or a "
        f"crash in native code; last output: {output.last_lines()}); a workload must not end the process",
        how="exit", output=output)


# ---- the child -----------------------------------------------------------------------------


def _child(request_path: str) -> int:
    request = json.loads(Path(request_path).read_text())
    result = Path(request["result"])
    memory = request.get("memory_bytes")
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    def answer(payload: dict[str, Any]) -> None:
        tmp = result.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload, default=str))
        tmp.replace(result)

    try:
        module, _, func = request["target"].partition(":")
        value = getattr(importlib.import_module(module), func)(**request["kwargs"])
        answer({"value": value.model_dump(mode="json") if hasattr(value, "model_dump") else value})
    except SystemExit as err:
        answer({"error": {"kind": "exit", "message": repr(err.code), "where": _where(err)}})
    except MemoryError as err:
        answer({"error": {"kind": "memory", "message": str(err)[:300]}})
    except ProfilerError as err:
        cause = err.__cause__
        if isinstance(cause, MemoryError) or _is_allocation_failure(cause):
            answer({"error": {"kind": "memory", "message": str(cause)[:300]}})
        else:
            answer({"error": {"type": type(err).__name__, "message": str(err)}})
    except Exception as err:
        if _is_allocation_failure(err):
            answer({"error": {"kind": "memory", "message": str(err)[:300]}})
        else:
            from profiler_core.workload import last_frame

            answer({"error": {"type": "WorkloadError",
                              "message": f"raised {type(err).__name__}: {err}{last_frame(err)}"}})
    return 0


def _is_allocation_failure(err: BaseException | None) -> bool:
    """torch's CPU allocator reports a refused allocation as a RuntimeError, not MemoryError."""
    return isinstance(err, RuntimeError) and "can't allocate memory" in str(err)


def _where(err: BaseException) -> str:
    from profiler_core.workload import last_frame

    return last_frame(err).strip()


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
