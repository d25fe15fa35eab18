"""Combine several kernels' (or operators') counters into one set, by the catalog's rules.

A 2 us kernel at 90% occupancy and a 200 us kernel at 10% must not average to 50%: rates are
weighted by duration, additive counts are summed, per-launch constants take the maximum
(the highest-pressure constraint), and the two per-instruction ratios are weighted by
executed instructions (IPC by active cycles) when every sample carries that weight.

    aggregate_counters([({"achieved_occupancy_pct": 90.0}, 2_000),
                        ({"achieved_occupancy_pct": 10.0}, 200_000)])
    -> {"achieved_occupancy_pct": 10.79...}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from profiler_core.metrics.catalog import CATALOG, Aggregation

CounterSample = tuple[Mapping[str, float | None], int]

_WEIGHT_FIELD = {
    Aggregation.INSTRUCTION_WEIGHTED: "executed_instructions",
    Aggregation.ACTIVE_CYCLE_WEIGHTED: "sm_active_cycles",
}


def _weighted(values: list[tuple[float, float]]) -> float | None:
    """Weighted mean of (value, weight) pairs; the plain mean when all weights are zero."""
    if not values:
        return None
    total = sum(w for _, w in values)
    if total <= 0:
        return sum(v for v, _ in values) / len(values)
    return sum(v * w for v, w in values) / total


def aggregate_counters(samples: Iterable[CounterSample]) -> dict[str, float | None]:
    """One counter set for a group of (counters, duration_ns) samples; absent everywhere -> omitted."""
    rows = [(counters, max(int(duration_ns), 0)) for counters, duration_ns in samples]
    out: dict[str, float | None] = {}
    for spec in CATALOG:
        present = [(c[spec.field], d, c) for c, d in rows if c.get(spec.field) is not None]
        if not present:
            if any(spec.field in c for c, _ in rows):
                out[spec.field] = None  # known field, measured nowhere: keep the null
            continue
        values = [float(v) for v, _, _ in present]  # type: ignore[arg-type]
        if spec.aggregation is Aggregation.SUM:
            out[spec.field] = sum(values)
        elif spec.aggregation is Aggregation.MAX:
            out[spec.field] = max(values)
        else:
            weight_field = _WEIGHT_FIELD.get(spec.aggregation)
            use_weight = weight_field is not None and all(
                c.get(weight_field) is not None for _, _, c in present
            )
            pairs = [
                (float(v), float(c[weight_field]) if use_weight else float(d))  # type: ignore[arg-type]
                for v, d, c in present
            ]
            out[spec.field] = _weighted(pairs)
    return out
