"""Can two profiles be compared at all? Same workload, GPU and chip, iterations, clocks and sources.

Kernel durations move with the SM clock, so two captures whose clocks differ by more than
``clock_tolerance_pct`` (unless both were locked to one value) do not support a speedup
claim; neither do two different workloads (the identity the manifests record, and the input
shapes the operators saw), different GPUs, different iteration counts or different sources. Each
check is ``ok``, ``mismatch`` or ``unknown`` (not recorded); every mismatch and every unknown
required check becomes a warning that each output of ``oprof compare`` repeats.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from profiler_core.analysis.thresholds import DEFAULT_THRESHOLDS, Thresholds
from profiler_core.schema import CaptureMeta, ClockSample, Profile

Status = Literal["ok", "mismatch", "unknown"]
# The checks that say the two profiles measure different workloads (``oprof compare`` refuses them).
WORKLOAD_CHECKS = ("workload", "operator_shapes")
# Conditions whose absence alone is worth a warning (the rest only warn on a mismatch).
_MUST_KNOW = frozenset({"gpu_name", "sm_clock", "measured_iterations"})


class ComparabilityCheck(BaseModel):
    """One condition both captures must share."""

    model_config = ConfigDict(extra="forbid")
    name: str
    status: Status
    required: bool = True
    base: str | None = None
    opt: str | None = None
    detail: str = ""


class Comparability(BaseModel):
    """The verdict on whether durations of two profiles can be compared, with the reasons."""

    model_config = ConfigDict(extra="forbid")
    comparable: bool = True
    checks: list[ComparabilityCheck] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    def workload_mismatches(self) -> list[ComparabilityCheck]:
        """The failed checks that say the two profiles measure different workloads."""
        return [c for c in self.checks if c.name in WORKLOAD_CHECKS and c.status == "mismatch"]


def _equal_check(name: str, base: object, opt: object, why: str, required: bool = True) -> ComparabilityCheck:
    b = None if base is None else str(base)
    o = None if opt is None else str(opt)
    if b is None or o is None:
        return ComparabilityCheck(name=name, status="unknown", required=required, base=b, opt=o,
                                  detail=f"not recorded in {'both' if b is None and o is None else 'one'} "
                                         f"profile(s); {why}")
    status: Status = "ok" if b == o else "mismatch"
    return ComparabilityCheck(name=name, status=status, required=required, base=b, opt=o,
                              detail="" if status == "ok" else why)


def _clock_for(capture: CaptureMeta, phase: str | None) -> ClockSample | None:
    samples = [c for c in capture.clocks if c.sm_mhz_median is not None]
    for c in samples:
        if phase is not None and c.phase == phase:
            return c
    return samples[0] if samples else None


def _clock_check(base: CaptureMeta, opt: CaptureMeta, tolerance_pct: float) -> ComparabilityCheck:
    common = {c.phase for c in base.clocks} & {c.phase for c in opt.clocks}
    phase = base.timeline_source if base.timeline_source in common else min(common, default=None)
    b, o = _clock_for(base, phase), _clock_for(opt, phase)
    if b is None or o is None or b.sm_mhz_median is None or o.sm_mhz_median is None:
        return ComparabilityCheck(
            name="sm_clock", status="unknown", base=None if b is None else f"{b.sm_mhz_median} MHz",
            opt=None if o is None else f"{o.sm_mhz_median} MHz",
            detail="SM clocks not recorded: a duration ratio may carry a clock difference")
    idle = [c for c in (b, o) if c.basis == "idle"]
    if idle:
        return ComparabilityCheck(
            name="sm_clock", status="unknown", base=f"{b.sm_mhz_median:g} MHz ({b.phase}, {b.basis or 'all'})",
            opt=f"{o.sm_mhz_median:g} MHz ({o.phase}, {o.basis or 'all'})",
            detail=f"no clock sample found the GPU busy during the {idle[0].phase} phase, so the clock its "
                   "kernels ran at is not known: a duration ratio may carry a clock difference")
    locked = base.clock_policy == "lock" and opt.clock_policy == "lock"
    diff_pct = abs(o.sm_mhz_median - b.sm_mhz_median) / b.sm_mhz_median * 100 if b.sm_mhz_median else 100.0
    ok = diff_pct == 0.0 if locked else diff_pct <= tolerance_pct
    detail = "" if ok else (
        f"SM clocks differ by {diff_pct:.1f}% ({'locked to different values' if locked else 'observed'}; "
        f"tolerance {tolerance_pct:g}%): durations scale with the clock")
    return ComparabilityCheck(name="sm_clock", status="ok" if ok else "mismatch",
                              base=f"{b.sm_mhz_median:g} MHz ({b.phase})",
                              opt=f"{o.sm_mhz_median:g} MHz ({o.phase})", detail=detail)


# Artifacts that name kernels but time none: a plan that runs no Inductor (a whole step captured as
# a CUDA graph, a compiler-free rewrite) has none, and its durations compare all the same.
_NAMING_ONLY = frozenset({"inductor"})


def _sources(capture: CaptureMeta, *, naming: bool = False) -> str | None:
    kinds = sorted({s.kind for s in capture.sources if s.used and (s.kind in _NAMING_ONLY) is naming})
    return "+".join(kinds) if kinds else ("none" if naming else None)


def shape_signature(profile: Profile) -> frozenset[tuple[int, ...]]:
    """The input shapes the profile's operators saw: what a workload's tensors look like.

    Passes change how a model computes, rarely the shapes it computes on: a baseline and its
    optimized plan share most of these, two different models share few.
    """
    return frozenset(tuple(shape) for shapes in _input_shape_lists(profile) for shape in (shapes or [])
                     if isinstance(shape, list) and shape and all(isinstance(d, int) for d in shape))


def _input_shape_lists(profile: Profile) -> list[Any]:
    """Each operator's ``input_shapes``; a columnar profile's distinct ones only (a dictionary
    column holds each once), without building an operator model."""
    column = getattr(profile.operators, "shapes", None)
    if column is not None and hasattr(column, "codes") and hasattr(column, "values"):
        from profiler_core.attribution.columns import sorted_unique

        codes = column.codes
        return [column.values[c] for c in sorted_unique(codes[codes >= 0]).tolist()]
    return [op.input_shapes for op in profile.operators]


def shape_check(base: Profile, opt: Profile, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> ComparabilityCheck:
    """Whether two profiles' operators ran on the same tensor shapes (overlap over the smaller set)."""
    a, b = shape_signature(base), shape_signature(opt)
    if not a or not b:
        return ComparabilityCheck(name="operator_shapes", status="unknown", detail=(
            "no operator input shapes recorded in " + ("both profiles" if not a and not b else "one profile")))
    overlap = len(a & b) / min(len(a), len(b))
    ok = overlap >= thresholds.workload_shape_overlap_min
    return ComparabilityCheck(
        name="operator_shapes", status="ok" if ok else "mismatch", base=f"{len(a)} shapes", opt=f"{len(b)} shapes",
        detail=f"{overlap:.0%} of the operators' input shapes are shared" + (
            "" if ok else f" (at least {thresholds.workload_shape_overlap_min:.0%} for one workload): "
                          "the profiles measure different models or inputs"))


def check_comparability(base: CaptureMeta, opt: CaptureMeta,
                        thresholds: Thresholds = DEFAULT_THRESHOLDS,
                        extra: tuple[ComparabilityCheck, ...] = ()) -> Comparability:
    """Compare the measurement conditions of two captures (``extra``: checks made on the profiles)."""
    checks = [
        _equal_check("workload", base.workload_identity, opt.workload_identity,
                     "the profiles measure different workloads: a ratio of their times is no speedup",
                     required=True),
        *extra,
        _equal_check("gpu_name", base.gpu_name, opt.gpu_name, "kernel times differ across GPU models"),
        _equal_check("chip", base.chip, opt.chip, "kernel times differ across chips"),
        _equal_check("warmup_iterations", base.warmup_iterations, opt.warmup_iterations,
                     "a different warmup changes caches, autotuning and clocks"),
        _equal_check("measured_iterations", base.measured_iterations, opt.measured_iterations,
                     "totals are only comparable per iteration"),
        _clock_check(base, opt, thresholds.clock_tolerance_pct),
        _equal_check("sources", _sources(base), _sources(opt),
                     "the profiles were built from different artifacts"),
        _equal_check("naming_sources", _sources(base, naming=True), _sources(opt, naming=True),
                     "Inductor's artifacts name fused kernels and time none: durations compare, kernel names "
                     "may not", required=False),
        _equal_check("timeline_source", base.timeline_source, opt.timeline_source,
                     "durations from nsys and Kineto are not interchangeable"),
        _equal_check("counter_mode", base.counter_mode, opt.counter_mode,
                     "measured and inherited counters are not equally precise", required=False),
        _equal_check("torch", base.versions.torch, opt.versions.torch,
                     "a different torch may change the kernels chosen", required=False),
        _equal_check("driver", base.versions.driver, opt.versions.driver,
                     "a different driver may change kernel performance", required=False),
    ]
    warnings: list[str] = []
    for c in checks:
        if c.status == "mismatch":
            prefix = "NOT COMPARABLE" if c.required else "note"
            warnings.append(f"{prefix}: {c.name} differs ({c.base} vs {c.opt}); {c.detail}")
        elif c.status == "unknown" and c.required and c.name in _MUST_KNOW:
            warnings.append(f"unverified: {c.name} {c.detail}")
    comparable = not any(c.status == "mismatch" and c.required for c in checks)
    return Comparability(comparable=comparable, checks=checks, warnings=warnings)


def workload_mismatch_text(base: str, opt: str, mismatches: list[ComparabilityCheck]) -> str:
    """``A and B measure different workloads (...)``: the start of the refusal, naming what differs."""
    return (f"{base} and {opt} measure different workloads ("
            + "; ".join(f"workload {c.base} vs {c.opt}" if c.name == "workload" else
                        f"operator input shapes: {c.detail.split(' (', 1)[0]}" for c in mismatches) + ")")
