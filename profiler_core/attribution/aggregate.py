"""Per-operator counter aggregation, one rule per counter (see metrics/catalog.py).

A 2 us kernel at 90% occupancy and a 200 us kernel at 10% must not average to 50%: rates
are weighted by timeline duration, additive counts are summed, per-launch constants take
the maximum, latency ratios are weighted by executed instructions and IPC by active cycles.

    kernels: (d=200ns, occ=10), (d=2ns, occ=90)  ->  occ = (200*10 + 2*90) / 202 = 10.8

A counter missing on some kernels: sums and maxima become null (a partial sum is a wrong
number); weighted means are taken over the kernels that have it, and the reason says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from profiler_core.metrics.catalog import CATALOG, Aggregation
from profiler_core.schema import Kernel


def aggregate_counters(kernels: Sequence[Kernel]) -> tuple[dict[str, float | None], dict[str, str]]:
    """Aggregate the kernels' counters; returns (metrics, reasons for nulls or partial values)."""
    metrics: dict[str, float | None] = {}
    reasons: dict[str, str] = {}
    n = len(kernels)
    for spec in CATALOG:
        f = spec.field
        have = [k for k in kernels if k.counters.get(f) is not None]
        if not have:
            metrics[f] = None
            reasons[f] = "no kernel of this operator has this counter" if n else "operator has no kernels"
            continue
        if len(have) < n and spec.aggregation in (Aggregation.SUM, Aggregation.MAX):
            metrics[f] = None
            reasons[f] = (f"only {len(have)} of {n} kernels have this counter; "
                          f"a partial {spec.aggregation} would mislead")
            continue
        values = [k.counters[f] for k in have]
        if spec.aggregation is Aggregation.SUM:
            metrics[f] = float(sum(values))  # type: ignore[arg-type]
        elif spec.aggregation is Aggregation.MAX:
            metrics[f] = float(max(values))  # type: ignore[type-var]
        else:
            weights = [_weight(k, spec.aggregation) for k in have]
            total = sum(w or 0.0 for w in weights)
            if any(w is None for w in weights) or total <= 0:  # never mix weight kinds
                weights = [float(max(k.duration_ns, 1)) for k in have]
                total = sum(weights)
            metrics[f] = sum(w * v for w, v in zip(weights, values, strict=True)) / total  # type: ignore[operator,misc]
        if len(have) < n:
            reasons[f] = f"weighted over the {len(have)} of {n} kernels that have this counter"
    return metrics, reasons


def _weight(k: Kernel, rule: Aggregation) -> float | None:
    """The kernel's weight under ``rule``; None when the weighting counter is missing."""
    if rule is Aggregation.INSTRUCTION_WEIGHTED:
        w = k.counters.get("executed_instructions")
    elif rule is Aggregation.ACTIVE_CYCLE_WEIGHTED:
        w = k.counters.get("sm_active_cycles")
    else:
        return float(max(k.duration_ns, 0))
    return float(w) if w is not None else None
