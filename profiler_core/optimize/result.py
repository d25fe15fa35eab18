"""What an optimize run records: its settings, each trial, and optimize.json.

``OptimizeConfig`` is what callers (the CLI, the MCP server, the plugin) hand the loop;
``OptimizeResult`` is optimize.json, written after every trial so a killed loop keeps what it
learned. Fields are only ever added, with defaults, so older files still read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from profiler_core.capture.config import CaptureConfig
from profiler_core.optimize.yardstick import Yardstick

if TYPE_CHECKING:
    from profiler_core.passes.policy import ValidationPolicy


@dataclass(frozen=True)
class OptimizeConfig:
    """Settings of one loop; ``capture`` is used for every capture (baseline and trials), on ``device``."""

    out_dir: Path | None = None
    baseline_run: Path | None = None  # reuse this capture directory as the baseline (no new capture)
    budget: int = 4  # passes tried at most (a pass that cannot apply, or none implementing it, costs nothing)
    device: str = "cuda"  # for captures, passes and wall times alike (it replaces capture.device)
    capture: CaptureConfig = field(default_factory=CaptureConfig)
    min_speedup: float = 1.01  # a pass must make profiled kernel time at least 1% faster
    wall_iters: int = 30  # end-to-end timing (CUDA events); 0 skips it (and the yardstick, which needs it)
    wall_warmup: int = 5
    yardstick: bool = True  # time the recipe a user would write instead (compile, autocast bf16 + compile, ...)
    yardstick_backend: str = "inductor"  # torch.compile backend of the recipes ("eager": their plumbing only)
    validation: ValidationPolicy | None = None  # how every trial's outputs are judged (None: DEFAULT_POLICY)


Outcome = Literal["kept", "rejected_validation", "not_applied", "not_faster", "not_comparable", "no_pass",
                  "failed", "skipped"]


class Trial(BaseModel):
    """One pass tried on top of the passes already kept (or skipped before any cost: ``skipped``)."""

    model_config = ConfigDict(extra="forbid")
    transformation: str
    # the rule whose finding licensed it ("kept:<pass>" when a kept pass suggested it, "host_bound:<pass>"
    # for the graph pass tried after <pass> was faster on the GPU but slower end to end)
    finding: str = ""
    passes: list[str]
    outcome: Outcome
    reason: str = ""
    run_dir: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    # the plan's verdict (passes.verdict.VerdictRecord): reference, rule, the line, per-output numbers
    validation: dict[str, Any] | None = None
    kernel_ns: int | None = None
    speedup_vs_best: float | None = None
    wall_s: float | None = None  # what the trial cost: apply, validate, capture (seconds)
    # what decided "faster": profiled kernel time, or (for a finding about the timeline, such as
    # host-bound steps that CUDA graphs address) the end-to-end median of the best so far and of this plan
    judged_on: Literal["kernel_time", "wall_time"] = "kernel_time"
    best_wall_ms: float | None = None
    wall_ms: float | None = None


class OptimizeResult(BaseModel):
    """optimize.json: what the loop tried, what it kept, and the before/after figures."""

    model_config = ConfigDict(extra="forbid")
    schema_version: Literal[1] = 1
    workload: str
    created_at: str
    run_dir: str
    kept_passes: list[str] = Field(default_factory=list)
    trials: list[Trial] = Field(default_factory=list)
    baseline_kernel_ns: int = 0
    optimized_kernel_ns: int = 0
    kernel_speedup: float = 1.0
    baseline_attributed_pct: float = 0.0
    optimized_attributed_pct: float = 0.0
    wall_time: dict[str, dict[str, float | int]] = Field(default_factory=dict)  # "baseline"/"optimized"
    wall_speedup: float | None = None
    validation: dict[str, float | None] = Field(default_factory=dict)
    final_run_dir: str | None = None
    validation_failures: int = 0
    notes: list[str] = Field(default_factory=list)
    training: bool = False  # the workload's model is in train mode: inference-only passes are not tried
    baseline_capture_s: float | None = None  # the loop's own cost, beside ...
    plain_run_s: float | None = None  # ... one plain run of the workload (the baseline's wall-time process)
    yardstick: Yardstick | None = None  # the recipe a user would write instead, timed beside the plan

    @property
    def plan_wall_ms(self) -> float | None:
        """The end-to-end median of what the loop ends with (the kept plan, else the baseline)."""
        side = self.wall_time.get("optimized") or self.wall_time.get("baseline")
        value = side.get("median_ms") if side else None
        return float(value) if value is not None else None
