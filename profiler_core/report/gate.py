"""The CI gate of ``oprof compare --gate PCT``: faster, unchanged, slower or not comparable, as an exit status.

The gate judges end-to-end wall time per step where both runs were timed (``walltime.json`` or
``optimize.json`` beside ``baseline/``), profiled kernel time otherwise. A change within PCT
percent either way is "unchanged". Two runs that cannot be compared (different workloads,
chips or clocks; runs of different shapes) get their own outcome, never a speedup:

    g = judge(comparison, end_to_end, 5.0)
    g.outcome, g.exit_code  ->  ("unchanged", 3)     # sdpa_attention: kernels 8.7x, the step 1.01x

Exit status, one per outcome (2 stays the CLI's user error): see ``EXIT_CODES``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from profiler_core.analysis.compare import Comparison
from profiler_core.report.end_to_end import EndToEnd

Outcome = Literal["faster", "unchanged", "slower", "not_comparable"]
Basis = Literal["wall_time", "kernel_time", "none"]

EXIT_CODES: dict[Outcome, int] = {"faster": 0, "slower": 1, "unchanged": 3, "not_comparable": 4}


@dataclass(frozen=True, slots=True)
class GateResult:
    """The gate's outcome, on what it was judged, by how much, and why in one sentence."""

    outcome: Outcome
    basis: Basis
    limit_pct: float
    delta_pct: float | None  # optimized over baseline, percent: negative is faster
    reason: str

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]

    def as_dict(self) -> dict[str, object]:
        """The gate as data: what ``--json`` and the MCP ``compare`` tool return."""
        return {"outcome": self.outcome, "exit_code": self.exit_code, "basis": self.basis,
                "limit_pct": self.limit_pct,
                "delta_pct": None if self.delta_pct is None else round(self.delta_pct, 3), "reason": self.reason}


def not_comparable(limit_pct: float, why: str) -> GateResult:
    """The outcome for two runs whose times cannot be set against each other."""
    return GateResult("not_comparable", "none", limit_pct, None, f"NOT COMPARABLE: {why}")


def judge_delta(delta_pct: float, limit_pct: float, basis: Basis, what: str) -> GateResult:
    """faster / unchanged / slower for a change of ``delta_pct`` percent against a band of ``limit_pct``."""
    if abs(delta_pct) <= limit_pct:
        outcome: Outcome = "unchanged"
        text = f"within {limit_pct:g}% ({delta_pct:+.1f}%)"
    elif delta_pct < 0:
        outcome, text = "faster", f"{-delta_pct:.1f}% faster (gate {limit_pct:g}%)"
    else:
        outcome, text = "slower", f"{delta_pct:.1f}% slower than the baseline (gate {limit_pct:g}%)"
    return GateResult(outcome, basis, limit_pct, delta_pct, f"{outcome.upper()} on {what}: {text}")


def judge(c: Comparison, e: EndToEnd | None, limit_pct: float) -> GateResult:
    """The gate for one comparison: wall time per step when both sides were timed, else kernel time."""
    if not c.comparability.comparable:
        failed = [f"{k.name} differs ({k.base} vs {k.opt})" for k in c.comparability.checks
                  if k.status == "mismatch" and k.required]
        return not_comparable(limit_pct, "; ".join(failed) or "the comparability checks failed")
    if e is not None and e.base_wall_ms and e.opt_wall_ms:
        delta = (e.opt_wall_ms / e.base_wall_ms - 1.0) * 100.0
        return judge_delta(delta, limit_pct, "wall_time", "wall time per step")
    if c.base_total_ns <= 0 or c.opt_total_ns <= 0:
        return not_comparable(limit_pct, "a profile holds no kernel time; attribute a capture that ran the step")
    return judge_delta(c.delta_pct, limit_pct, "kernel_time", "profiled kernel time")


def judge_ranks(max_delta_pct: float, per_rank: dict[int, Comparison], limit_pct: float) -> GateResult:
    """The gate for a multi-rank comparison: the slowest rank's kernel time, every rank comparable."""
    for rank, c in sorted(per_rank.items()):
        if not c.comparability.comparable:
            return not_comparable(limit_pct, f"rank {rank}: " + "; ".join(
                k.name + " differs" for k in c.comparability.checks if k.status == "mismatch" and k.required))
    return judge_delta(max_delta_pct, limit_pct, "kernel_time", "the slowest rank's kernel time")
