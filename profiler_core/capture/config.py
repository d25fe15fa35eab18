"""What a capture is asked to do: one frozen :class:`CaptureConfig` plus its closed vocabularies.

The harness owns every measurement condition (compile mode, warmup and measured
iterations, seed, device), so every phase runs the workload the same way; the counter,
replay and clock policies say what each phase is allowed to cost and change.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from profiler_core.compile_mode import CompileMode
from profiler_core.errors import ProfilerError


class CounterMode(StrEnum):
    """Which launches Nsight Compute measures."""

    PER_CONFIG = "per-config"  # K launches per (kernel, grid, block, ...) configuration
    FULL = "full"  # every launch in the measured region
    NONE = "none"  # no counter phase


class ReplayMode(StrEnum):
    """ncu's replay mode; ``auto`` tries kernel replay and falls back to application replay."""

    AUTO = "auto"
    KERNEL = "kernel"
    APPLICATION = "application"


class ClockPolicy(StrEnum):
    """``observe`` samples clocks with NVML; ``lock`` probes and locks them for the timeline phase."""

    OBSERVE = "observe"
    LOCK = "lock"
    OFF = "off"


class HarnessPhase(StrEnum):
    """What one harness process does around the measured iterations."""

    KINETO = "kineto"  # torch.profiler trace of the measured region
    REGION = "region"  # cudaProfilerStart/Stop + NVTX around the measured region (nsys, ncu)
    PLAIN = "plain"  # no profiler: the floor a capture phase is compared with
    PROBE = "probe"  # synthetic matmul load, to find the sustained SM clock


DEFAULT_PHASE_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class CaptureConfig:
    """Settings of one capture; change one with ``dataclasses.replace``."""

    out_dir: Path | None = None  # default: oprof-runs/<workload stem>-<UTC timestamp>/
    compile_mode: CompileMode = CompileMode.DEFAULT
    warmup: int = 2
    iters: int = 2
    device: str = "cuda"
    seed: int = 0
    counters: CounterMode = CounterMode.PER_CONFIG
    spot_check: int = 1  # launches sampled per configuration in per-config mode
    dedup_iterations: bool = False  # full mode: measure only the first measured iteration
    replay_mode: ReplayMode = ReplayMode.AUTO
    flop_counters: bool = True  # ncu's FLOP counters (SASS instruction + tensor-op counts) for the roofline
    nsys: bool = True
    clocks: ClockPolicy = ClockPolicy.OBSERVE
    ncu_clock_control: str = "none"  # ncu --clock-control: "none" leaves the GPU's clocks alone
    # One phase past this is killed: an hour holds ncu's full-mode replay of a large model with
    # room to spare, and a hung workload never holds the GPU for longer. None: no limit.
    phase_timeout_s: float | None = DEFAULT_PHASE_TIMEOUT_S
    attribute: bool = False
    python: str = sys.executable  # interpreter that runs the workload
    harness: tuple[str, ...] | None = None  # replaces "<python> -m profiler_core.capture.harness"
    # Use (and keep) this Inductor cache directory instead of a fresh temporary one. It must be
    # empty or new: the first phase writes Inductor's artifacts only when it compiles cold.
    inductor_cache_dir: Path | None = None
    probe_s: float = 5.0  # seconds of synthetic load when probing the clock to lock
    # Processes per node under torchrun, each rank captured into <run>/rank<N>/; None: one process.
    ranks: int | None = None

    def __post_init__(self) -> None:
        for name, enum in (("compile_mode", CompileMode), ("counters", CounterMode),
                           ("replay_mode", ReplayMode), ("clocks", ClockPolicy)):
            value = getattr(self, name)
            try:
                object.__setattr__(self, name, enum(value))
            except ValueError as err:
                choices = ", ".join(m.value for m in enum)
                raise ProfilerError(f"{name}={value!r} is not one of: {choices}") from err
        if self.ranks is not None and self.ranks < 1:
            raise ProfilerError(f"--nproc-per-node {self.ranks}: pass 1 or more processes")
        if self.warmup < 0:
            raise ProfilerError(f"warmup={self.warmup}: pass 0 or more warmup iterations")
        if self.iters < 1:
            raise ProfilerError(f"iters={self.iters}: pass at least 1 measured iteration")
        if self.spot_check < 1:
            raise ProfilerError(f"spot_check={self.spot_check}: sample at least 1 launch per configuration")
        if self.spot_check > 1 and self.counters is not CounterMode.PER_CONFIG:
            raise ProfilerError(
                f"--spot-check {self.spot_check} samples launches per configuration, which only "
                f"--counters per-config does (got --counters {self.counters.value})"
            )
        if self.dedup_iterations and self.counters is not CounterMode.FULL:
            raise ProfilerError(
                "--dedup-iterations applies to --counters full (per-config mode already measures "
                f"each configuration once); got --counters {self.counters.value}"
            )
        if self.ncu_clock_control not in ("none", "base"):
            raise ProfilerError(
                f"ncu clock control {self.ncu_clock_control!r} is not one of: none, base"
            )
        if self.phase_timeout_s is not None and self.phase_timeout_s <= 0:
            raise ProfilerError(f"phase timeout {self.phase_timeout_s}: pass a positive number of seconds")
        if self.harness is not None and not self.harness:
            raise ProfilerError("harness command is empty; leave it unset to use the built-in harness")

    def harness_argv(self) -> list[str]:
        """The command that starts one harness process (before its phase arguments)."""
        if self.harness is not None:
            return list(self.harness)
        return [self.python, "-m", "profiler_core.capture.harness"]
