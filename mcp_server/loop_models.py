"""Output models of the end-to-end tools: the verdict by wall time, ``walltime`` and ``optimize`` jobs.

Kept apart from ``mcp_server.models`` (the profile and capture outputs), which holds
:class:`EndToEndOut`, the verdict ``compare`` and ``report`` carry beside their kernel-time figures.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.models import CaptureJobStatus, EndToEndOut


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WallTimeFigures(_Out):
    iterations: int
    median_ms: float
    p10_ms: float
    p90_ms: float
    min_ms: float
    max_ms: float
    process_medians_ms: list[float] | None = Field(default=None, description=(
        "Each timing process's median, in round order: the figures above pool them; where the rounds "
        "(the two sides' processes of one round, compared) disagree, the verdict is within between-process noise."))


class WallTimeOut(_Out):
    """End-to-end step times (CUDA events on CUDA) of a workload, and of its baseline when given."""

    job_id: str
    state: str = Field(description="running | succeeded | failed (a wall-time job is not cancellable)")
    walltime_file: str | None = Field(description="walltime.json written when the job succeeded; pass it "
                                                  "to compare / report as walltime.")
    baseline: WallTimeFigures | None = None
    optimized: WallTimeFigures | None = None
    wall_speedup: float | None = Field(default=None, description="Baseline median over optimized median.")
    elapsed_s: float
    error: str | None = None
    next_step: str


class OptimizeJobStatus(CaptureJobStatus):
    """An optimize job's state: the same fields as a capture job's."""


class OptimizeResultOut(_Out):
    job_id: str
    run_dir: str = Field(description="The loop's run directory: baseline/, trial-N-<pass>/, optimize.json, "
                                     "walltime.json, comparison.json, report.html.")
    end_to_end: EndToEndOut | None = Field(description="The loop's verdict, wall time per step first; None "
                                                       "when no pass was kept.")
    result: dict[str, Any] = Field(description="optimize.json as the loop wrote it (trials, kept passes, "
                                               "kernel and wall times).")

__all__ = ["EndToEndOut", "OptimizeJobStatus", "OptimizeResultOut", "WallTimeFigures", "WallTimeOut"]
