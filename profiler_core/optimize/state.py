"""What the loop knows between trials: the best capture so far, what it kept, what is left to try.

``LoopState`` is the one object a trial reads and updates (``run_trial(state, candidate, cfg)``);
nothing else carries state from one trial to the next.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from profiler_core.capture.config import CaptureConfig
from profiler_core.errors import CaptureCancelledError
from profiler_core.optimize import walltime
from profiler_core.optimize.result import OptimizeConfig, OptimizeResult, Trial
from profiler_core.optimize.walltime import WallTime
from profiler_core.rundir.layout import BASELINE_DIR, OPTIMIZED_WORKLOAD_NAME

if TYPE_CHECKING:
    from profiler_core.analysis.findings import FindingsReport
    from profiler_core.capture.pipeline import ProgressFn
    from profiler_core.schema import Profile


@dataclass(frozen=True)
class Candidate:
    """A pass to try, and what licensed it: a finding's rule, or ``kept:<pass>`` for a suggested combination."""

    transformation: str
    finding: str


@dataclass
class LoopState:
    """The loop between trials. ``cannot_apply``: pass name -> why it cannot apply to this model."""

    workload: Path
    out: Path
    cfg: OptimizeConfig
    cap: CaptureConfig
    result: OptimizeResult
    baseline: Profile
    baseline_dir: Path
    findings: FindingsReport  # the baseline's
    caches: Path
    progress: ProgressFn | None = None
    cancel: threading.Event | None = None
    cannot_apply: dict[str, str] = field(default_factory=dict)
    by_model: set[str] = field(default_factory=set)  # cannot_apply entries the model decided (asked again later)
    rechecked: dict[tuple[tuple[str, ...], str], str | None] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)
    tried: int = 0  # trials that spent budget
    number: int = 0  # trials numbered so far (trial-N-<pass>)
    considered: set[str] = field(default_factory=set)  # transformations a finding licensed, each once
    plans: set[tuple[str, ...]] = field(default_factory=set)  # pass lists already tried
    suggested: list[Candidate] = field(default_factory=list)  # combinations the kept passes suggest
    walls: dict[Path, tuple[WallTime, float]] = field(default_factory=dict)
    best: Profile | None = None
    best_dir: Path | None = None
    current: FindingsReport | None = None  # the best capture's findings (re-diagnosed after each kept pass)

    def __post_init__(self) -> None:
        self.best = self.best or self.baseline
        self.best_dir = self.best_dir or self.baseline_dir
        self.current = self.current or self.findings

    def note(self, step: int, message: str) -> None:
        """A progress line."""
        if self.progress is not None:
            self.progress("optimize", step, self.cfg.budget + 2, message)

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise CaptureCancelledError("the optimization loop was cancelled")

    def keep(self, trial: Trial, profile: Profile, run_dir: Path) -> None:
        """``trial``'s plan becomes the best so far."""
        trial.outcome = "kept"
        self.kept = list(trial.passes)
        self.best, self.best_dir = profile, run_dir
        self.result.validation = {"max_abs_err": trial.max_abs_err, "max_rel_err": trial.max_rel_err}

    def wall_of(self, run: Path) -> tuple[WallTime, float]:
        """End-to-end figures of the baseline or a trial's plan (each timed once), and the seconds it took."""
        if run not in self.walls:
            started = time.perf_counter()
            figures = self._measure_wall(run)
            self.walls[run] = (figures, time.perf_counter() - started)
        return self.walls[run]

    def wall_again(self, run: Path) -> WallTime:
        """The baseline or a trial's plan timed once more, in a fresh process (the first figures stay)."""
        return self._measure_wall(run)

    def _measure_wall(self, run: Path) -> WallTime:
        if run == self.baseline_dir:
            workload, cache = self.workload, self.caches / BASELINE_DIR
        else:
            workload, cache = run / OPTIMIZED_WORKLOAD_NAME, self.caches / run.name
        return walltime.measure(workload, iters=self.cfg.wall_iters, warmup=self.cfg.wall_warmup,
                                compile_mode=self.cap.compile_mode.value, device=self.cfg.device,
                                python=self.cap.python, inductor_cache=cache)
