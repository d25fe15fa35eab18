"""The figures every report shows, computed once: time by class, coverage by tier, top operators.

Renderers (terminal, markdown, HTML, compact summary) format these; none recomputes them.
Each top operator carries its key counters and a one-phrase bottleneck label read off them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from profiler_core.analysis.compare import CounterDelta, TimeRow
from profiler_core.analysis.counter_format import format_value
from profiler_core.analysis.profile_view import ProfileView, idle_inside_pct, pct
from profiler_core.analysis.thresholds import DEFAULT_THRESHOLDS, Thresholds
from profiler_core.attribution.columns import unique_ints
from profiler_core.metrics.catalog import HEADLINE_COUNTERS
from profiler_core.schema import Kernel, OperatorClass, Profile, Tier

_MANY_KERNELS = 8  # an operator launching this many kernels can be limited by their launches
KEY_COUNTERS = (*HEADLINE_COUNTERS, "local_memory_wavefronts")
SHORT_NAMES = {"tensor_core_active_pct": "TC %", "achieved_occupancy_pct": "occ %",
               "dram_throughput_pct": "DRAM %", "sm_throughput_pct": "SM %",
               "local_memory_wavefronts": "spills"}


def us(ns: float) -> str:
    """Nanoseconds as microseconds text, no unit: 158464 -> 158.5."""
    return f"{ns / 1000:,.1f}"


def delta_text(row: TimeRow) -> str:
    """A row's time change: ``+12.3%``, or ``new`` when the baseline spent no time there."""
    return "new" if row.delta_pct is None else f"{row.delta_pct:+.1f}%"


def shift_parts(counters: Iterable[CounterDelta], arrow: str,
                name: Callable[[str], str] = str) -> list[str]:
    """``TC % 0.01<arrow>61.3`` for each key counter that moved (or lacks a side); ``name`` escapes the label."""
    return [f"{name(SHORT_NAMES.get(d.field, d.field))} {format_value(d.base)}{arrow}{format_value(d.opt)}"
            for d in counters if d.field in KEY_COUNTERS and d.direction != "same"]


@dataclass(frozen=True, slots=True)
class OperatorLine:
    """One operator as reports list it."""

    key: str
    op_class: OperatorClass
    duration_ns: int
    share_pct: float
    kernel_count: int
    confidence: str
    tier: str
    counters: dict[str, float | None]
    bottleneck: str


@dataclass(frozen=True, slots=True)
class Share:
    """A named slice of profiled kernel time."""

    label: str
    duration_ns: int
    share_pct: float


def bottleneck_label(op_class: OperatorClass, counters: dict[str, float | None],
                     t: Thresholds = DEFAULT_THRESHOLDS, idle_inside_pct: float | None = None) -> str:
    """A short phrase for what limits this operator: launch latency when the GPU idles most of its
    span (``idle_inside_pct``, for an operator of many kernels), else what the counters say ("" when
    nothing was measured)."""
    if idle_inside_pct is not None and idle_inside_pct > t.launch_latency_idle_pct:
        return f"launch latency (GPU idle {idle_inside_pct:.0f}% of its span)"
    tc = counters.get("tensor_core_active_pct")
    occ = counters.get("achieved_occupancy_pct")
    dram = counters.get("dram_throughput_pct")
    sm = counters.get("sm_throughput_pct")
    spills = counters.get("local_memory_wavefronts")
    if all(v is None for v in (tc, occ, dram, sm)):
        return ""
    labels = []
    if spills is not None and spills > t.spill_wavefronts_min:
        labels.append("register spills")
    if op_class is OperatorClass.GEMM and tc is not None and tc <= t.tensor_core_idle_pct:
        labels.append("Tensor Cores idle")
    if dram is not None and dram >= t.memory_bound_dram_pct:
        labels.append("DRAM-bound")
    elif sm is not None and sm >= 60.0:
        labels.append("compute-bound")
    if occ is not None and occ < t.low_occupancy_pct:
        labels.append("low occupancy")
    if not labels and dram is not None and sm is not None and dram < 40.0 and sm < 40.0:
        labels.append("latency-bound")
    return ", ".join(labels)


def time_by_class(view: ProfileView) -> list[Share]:
    """Kernel time per operator class (unattributed kernels by their name), largest first."""
    # every kernel's class and time read at once; classes in the order their first kernel comes
    every = list(OperatorClass)
    by = _sums_first_seen(view.kernel_class_codes, view.kernel_durations)
    return sorted((Share(every[c].value, ns, view.share_pct(ns)) for c, ns in by), key=lambda s: -s.duration_ns)


def _sums_first_seen(codes: np.ndarray, durations: np.ndarray) -> list[tuple[int, int]]:
    """(code, summed duration) of each code present, in the order each first appears."""
    if not len(codes):
        return []
    present, first, inverse = unique_ints(codes, index=True, inverse=True)
    sums = np.zeros(len(present), dtype=np.int64)
    np.add.at(sums, inverse.reshape(-1), durations)
    order = np.argsort(first, kind="stable")
    return list(zip(present[order].tolist(), sums[order].tolist(), strict=True))


def coverage_by_tier(view: ProfileView) -> list[Share]:
    """Kernel time per attribution tier, in the tiers' order of trust."""
    tiers = list(Tier)
    codes = np.where(view.unattributed_mask, tiers.index(Tier.UNATTRIBUTED), view.kernel_columns.tier)
    by: dict[str, int] = defaultdict(int, {tiers[c].value: ns
                                           for c, ns in _sums_first_seen(codes, view.kernel_durations)})
    if not view.profile.kernels:
        by.update({t: c.duration_ns for t, c in view.profile.coverage.by_tier.items()})
    return [Share(t.value, by[t.value], view.share_pct(by[t.value])) for t in Tier if by.get(t.value)]


def tiers_and_idle(view: ProfileView, kernels: Sequence[Kernel]) -> tuple[set[str], float | None]:
    """The attribution tiers of ``kernels`` and, for many kernels, how much of their span the GPU is
    idle (:func:`idle_inside_pct`), read off the view's columns where the kernels are its own."""
    at = view.positions(kernels)
    if at is None:
        return ({kern.attribution.tier.value for kern in kernels},
                idle_inside_pct(kernels) if len(kernels) >= _MANY_KERNELS else None)
    cols = view.kernel_columns
    tiers = {cols.tiers[c] for c in unique_ints(cols.tier[at])[0].tolist()}
    if len(kernels) < _MANY_KERNELS:
        return tiers, None
    busy, span = view.busy_and_span_at(at)
    return tiers, pct(span - busy, span)


def top_operators(view: ProfileView, k: int = 10, t: Thresholds = DEFAULT_THRESHOLDS) -> list[OperatorLine]:
    """The ``k`` operators with the most kernel time, with their key counters."""
    every = view.operators
    ops = [every[g] for g in np.argsort(-view.op_durations, kind="stable")[:k].tolist()]  # as a stable sort
    lines = []
    for op in ops:
        counters = view.op_counters(op)
        cls = view.op_class(op)
        kernels = view.kernels_of(op)
        tiers, idle = tiers_and_idle(view, kernels)
        duration = view.op_duration_ns(op)
        lines.append(OperatorLine(
            key=op.key, op_class=cls, duration_ns=duration, share_pct=view.share_pct(duration),
            kernel_count=len(view.kernels_of(op)) or op.kernel_count, confidence=op.confidence.value,
            tier="+".join(sorted(tiers)) or "-",
            counters={f: counters.get(f) for f in KEY_COUNTERS},
            bottleneck=bottleneck_label(cls, counters, t, idle)))
    return lines


# Warnings that can change a conclusion drawn from the numbers (the rest are notes).
_SERIOUS_PREFIXES = ("NOT COMPARABLE", "unverified", "totals are per measured iteration", "a profile holds no kernels")
_SERIOUS_WORDS = ("partial", "mismatch", "diverge", "disagree", "could not", "not joined")


def split_warnings(items: Iterable[str], profile: Profile | None = None) -> tuple[list[str], list[str]]:
    """(warnings that can change a conclusion, harmless notes).

    Serious: a comparison that does not hold, a partial join, disagreeing tiers, and for a
    profile whose attribution is incomplete, everything it warns about.
    """
    incomplete = profile is not None and (profile.coverage.attributed_time_pct < 99.0
                                          or profile.coverage.tier_disagreements > 0)
    serious: list[str] = []
    notes: list[str] = []
    for w in items:
        grave = incomplete or w.startswith(_SERIOUS_PREFIXES) or any(s in w.lower() for s in _SERIOUS_WORDS)
        (serious if grave else notes).append(w)
    return serious, notes


def counter_provenance(profile: Profile) -> str:
    """``counters: 18 of 508 launches measured, 490 inherited ...``: how many counters are first-hand."""
    cov = profile.coverage
    total = cov.kernel_count or len(profile.kernels)
    measured, inherited, missing = (cov.counters_measured.kernel_count, cov.counters_inherited.kernel_count,
                                    cov.counters_missing.kernel_count)
    text = f"counters: {measured} of {total} launches measured"
    if inherited:
        text += (f", {inherited} inherited from a measured launch of the same kernel and launch "
                 "configuration")
    if missing:
        text += f", {missing} without counters"
    return text


def findings_owner(findings: object, *profiles: Profile | None) -> Profile | None:
    """Which of ``profiles`` a findings report was diagnosed from (by kernel count and kernel time)."""
    for p in profiles:
        if p is not None and getattr(findings, "kernel_count", None) == len(p.kernels) and getattr(
                findings, "total_kernel_ns", None) == ProfileView.of(p).total_ns:
            return p
    return None


def not_shown(shown: int, total: int, what: str) -> str:
    """``"12 more operators not shown"`` when a list was cut, else ""."""
    return f"{total - shown} more {what} not shown" if total > shown else ""


def headline(profile: Profile) -> dict[str, str | int | float | None]:
    """Workload, GPU, iterations and totals, as reports print them at the top."""
    view = ProfileView.of(profile)
    cap = profile.capture
    return {
        "workload": cap.workload, "gpu": cap.gpu_name, "chip": cap.chip,
        "compile_mode": cap.compile_mode, "warmup_iterations": cap.warmup_iterations,
        "measured_iterations": cap.measured_iterations, "kernels": len(profile.kernels),
        "operators": len(profile.operators), "total_kernel_ns": view.total_ns,
        "unattributed_pct": round(view.share_pct(view.unattributed_ns), 2),
    }
