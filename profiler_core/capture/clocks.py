"""GPU clocks during a capture: observe them with NVML, or probe and lock them with nvidia-smi.

``observe`` (the default) samples SM and memory clocks in a background thread of the
parent while each phase runs, and stores median/min/max per phase: a comparison between
two captures whose clocks differ can then be flagged. Each sample also says whether the GPU
was busy (NVML utilization above 0 over its last sampling period); the statistics cover the
busy samples only, because a phase spends most of its time importing and compiling while the
GPU idles at a low clock that says nothing about the clock its kernels ran at. ``lock`` first finds the clock the
GPU sustains under load (a synthetic matmul loop, median SM clock, cached per GPU), locks
it with ``nvidia-smi -lgc F,F`` for the timeline phase and always resets it with
``nvidia-smi -rgc`` afterwards. Locking needs permission; a refusal raises
:class:`~profiler_core.errors.ToolFailedError` instead of silently measuring unlocked.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from profiler_core.capture import user_cache
from profiler_core.errors import ToolFailedError
from profiler_core.rundir.manifest import PhaseClocks
from profiler_core.schema import ClockBasis

SAMPLE_INTERVAL_S = 0.1
_REFUSAL = re.compile(
    r"insufficient permissions|does not have permission|not supported|requires root|"
    r"terminating early|not permitted",
    re.IGNORECASE,
)


class ClockReader(Protocol):
    """Something that reads the current (SM, memory) clocks in MHz and whether the GPU is busy;
    None where unknown."""

    def read_mhz(self) -> tuple[float | None, float | None]: ...

    def read_busy(self) -> bool | None: ...


class NvmlClockReader:
    """Clock reader over NVML (pynvml from nvidia-ml-py)."""

    def __init__(self, nvml_index: int, nvml: Any = None) -> None:
        if nvml is None:
            import pynvml

            nvml = pynvml
        nvml.nvmlInit()
        self._nvml = nvml
        self._handle = nvml.nvmlDeviceGetHandleByIndex(nvml_index)

    def read_mhz(self) -> tuple[float | None, float | None]:
        nvml = self._nvml
        try:
            sm = float(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_SM))
        except Exception:
            sm = None
        try:
            mem = float(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_MEM))
        except Exception:
            mem = None
        return sm, mem

    def read_busy(self) -> bool | None:
        try:
            return int(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu) > 0
        except Exception:
            return None


Sample = tuple[float, float | None, float | None, bool | None]  # unix time, SM MHz, memory MHz, busy


def open_clock_reader(nvml_index: int | None, nvml: Any = None) -> tuple[ClockReader | None, str | None]:
    """An NVML reader for GPU ``nvml_index``, or (None, why not)."""
    if nvml_index is None:
        return None, "NVML does not know this GPU's index, so its clocks were not observed"
    try:
        return NvmlClockReader(nvml_index, nvml), None
    except Exception as err:  # missing library, no driver: observing is best effort, and said so
        return None, f"NVML unavailable ({type(err).__name__}: {err}); clocks were not observed"


def summarize(samples: list[Sample]) -> PhaseClocks:
    """Median/min/max of the samples taken while the GPU was busy.

    Without utilization readings every sample counts (``basis="all"``); with them but no busy
    sample the figures are the idle clocks, marked ``basis="idle"`` so no comparison trusts them.
    """
    busy = [s for s in samples if s[3]]
    known = any(s[3] is not None for s in samples)
    basis: ClockBasis = "busy" if busy else ("idle" if known else "all")
    used = busy or samples
    sm = [s[1] for s in used if s[1] is not None]
    mem = [s[2] for s in used if s[2] is not None]
    return PhaseClocks(
        samples=len(samples),
        busy_samples=len(busy),
        basis=basis if samples else None,
        sm_mhz_median=statistics.median(sm) if sm else None,
        sm_mhz_min=min(sm) if sm else None,
        sm_mhz_max=max(sm) if sm else None,
        memory_mhz_median=statistics.median(mem) if mem else None,
        memory_mhz_min=min(mem) if mem else None,
        memory_mhz_max=max(mem) if mem else None,
    )


@dataclass
class ClockObserver:
    """Samples a ClockReader in a daemon thread between ``start()`` and ``stop()``."""

    reader: ClockReader
    interval_s: float = SAMPLE_INTERVAL_S
    now: Callable[[], float] = time.time
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _loop(self) -> None:
        while True:
            sm, mem = self.reader.read_mhz()
            self.samples.append((self.now(), sm, mem, self.reader.read_busy()))
            if self._stop.wait(self.interval_s):
                return

    def start(self) -> ClockObserver:
        self._thread = threading.Thread(target=self._loop, name="oprof-clock-observer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> PhaseClocks:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return summarize(self.samples)

    def window(self, start_unix: float, end_unix: float) -> PhaseClocks:
        """Statistics of the samples taken between two unix times (e.g. the probe's loaded part)."""
        return summarize([s for s in self.samples if start_unix <= s[0] <= end_unix])

    def __enter__(self) -> ClockObserver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ------------------------------------------------------------------ locking


def _lock_cache(env: Mapping[str, str] | None) -> Path:
    return user_cache.user_cache_dir(env) / "lock-clocks.json"


def cached_lock_mhz(gpu_key: str, env: Mapping[str, str] | None = None) -> int | None:
    """The probed lock clock of this GPU from an earlier capture, if any."""
    entry = user_cache.read_json(_lock_cache(env)).get(gpu_key)
    if isinstance(entry, dict) and isinstance(entry.get("sm_mhz"), int | float) and entry["sm_mhz"] > 0:
        return int(entry["sm_mhz"])
    return None


def store_lock_mhz(gpu_key: str, sm_mhz: int, env: Mapping[str, str] | None = None) -> None:
    """Remember a probed lock clock for this GPU."""
    path = _lock_cache(env)
    data = user_cache.read_json(path)
    data[gpu_key] = {"sm_mhz": int(sm_mhz), "probed_unix": int(time.time())}
    user_cache.write_json(path, data)


def lock_mhz_from_probe(stats: PhaseClocks) -> int:
    """The clock to lock: the median SM clock observed under the probe's load."""
    if not stats.samples or stats.sm_mhz_median is None:
        raise ToolFailedError(
            "the clock probe observed no SM clock samples under load (NVML gave none); "
            "use --clocks observe"
        )
    return int(round(stats.sm_mhz_median))


@dataclass
class LockRecord:
    """What locking did: the commands run, the clock, and whether the reset worked."""

    sm_mhz: int
    commands: list[list[str]] = field(default_factory=list)
    reset_ok: bool | None = None
    reset_message: str | None = None


def _smi(command: list[str], env: Mapping[str, str] | None) -> tuple[int, str]:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False,
                              env=None if env is None else dict(env))
    except (OSError, subprocess.TimeoutExpired) as err:
        return 1, str(err)
    return done.returncode, (done.stdout + "\n" + done.stderr).strip()


@contextmanager
def locked_clocks(nvidia_smi: Path, gpu_index: int, sm_mhz: int, *,
                  env: Mapping[str, str] | None = None) -> Iterator[LockRecord]:
    """Lock GPU ``gpu_index``'s SM clock at ``sm_mhz`` for the ``with`` body; reset it after, always."""
    record = LockRecord(sm_mhz=sm_mhz)
    lock = [str(nvidia_smi), "-i", str(gpu_index), "-lgc", f"{sm_mhz},{sm_mhz}"]
    record.commands.append(lock)
    code, output = _smi(lock, env)
    if code != 0 or _REFUSAL.search(output):
        first = next((line for line in output.splitlines() if line.strip()), "no output")
        if code == 0:  # it said no but exited 0: make sure nothing stays half-set
            _smi([str(nvidia_smi), "-i", str(gpu_index), "-rgc"], env)
        raise ToolFailedError(
            f"nvidia-smi refused to lock GPU {gpu_index}'s clocks at {sm_mhz} MHz (exit {code}: {first}); "
            "locking needs root or an administrator's permission; capture with --clocks observe instead"
        )
    try:
        yield record
    finally:
        reset = [str(nvidia_smi), "-i", str(gpu_index), "-rgc"]
        record.commands.append(reset)
        code, output = _smi(reset, env)
        record.reset_ok = code == 0
        if code != 0:
            record.reset_message = (
                f"nvidia-smi -rgc failed (exit {code}: {output.splitlines()[0] if output else 'no output'}); "
                f"reset GPU {gpu_index}'s clocks by hand: nvidia-smi -i {gpu_index} -rgc"
            )
