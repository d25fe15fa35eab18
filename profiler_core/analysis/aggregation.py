"""Combine several kernels' (or operators') counters into one set, by the catalog's rules.

A 2 us kernel at 90% occupancy and a 200 us kernel at 10% must not average to 50%: rates are
weighted by duration, additive counts are summed, per-launch constants take the maximum
(the highest-pressure constraint), and the two per-instruction ratios are weighted by
executed instructions (IPC by active cycles) when every sample carries that weight.
A sum or maximum over samples of which some lack the counter is null, as in the
attribution engine: a partial sum would be a wrong number.

    aggregate_counters([({"achieved_occupancy_pct": 90.0}, 2_000),
                        ({"achieved_occupancy_pct": 10.0}, 200_000)])
    -> {"achieved_occupancy_pct": 10.79...}
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from profiler_core.metrics.catalog import CATALOG, Aggregation

CounterSample = tuple[Mapping[str, float | None], int]

_WEIGHT_FIELD = {
    Aggregation.INSTRUCTION_WEIGHTED: "executed_instructions",
    Aggregation.ACTIVE_CYCLE_WEIGHTED: "sm_active_cycles",
}
_SPECS = {spec.field: spec for spec in CATALOG}


# A rate's running sums: [count, plain sum, sum v*d, sum d, sum v*w, sum w, every row had w].
_COUNT, _PLAIN, _DNUM, _DDEN, _WNUM, _WDEN, _WOK = range(7)


def aggregate_counters(samples: Iterable[CounterSample], fields: Collection[str] | None = None,
                       ) -> dict[str, float | None]:
    """One counter set for a group of (counters, duration_ns) samples; absent everywhere -> omitted.

    ``fields`` limits the work to those counters (the others are left out of the result).
    """
    totals: dict[str, float] = {}
    means: dict[str, list] = {}
    nulls: set[str] = set()
    wanted = None if fields is None else [f for f in fields if f in _SPECS]
    for counters, duration_ns in samples:
        d = duration_ns if duration_ns > 0 else 0
        items = counters.items() if wanted is None else ((f, counters[f]) for f in wanted if f in counters)
        for name, value in items:
            spec = _SPECS.get(name)
            if spec is None:
                continue
            if value is None:
                nulls.add(name)  # known field, not measured here: kept as null if measured nowhere
                continue
            agg = spec.aggregation
            if agg is Aggregation.SUM:
                totals[name] = totals.get(name, 0.0) + value
            elif agg is Aggregation.MAX:
                totals[name] = max(totals.get(name, value), value)
            else:
                m = means.get(name)
                if m is None:
                    m = means[name] = [0, 0.0, 0.0, 0, 0.0, 0.0, True]
                m[_COUNT] += 1
                m[_PLAIN] += value
                m[_DNUM] += value * d
                m[_DDEN] += d
                weight_field = _WEIGHT_FIELD.get(agg)
                if weight_field is not None:
                    w = counters.get(weight_field)
                    if w is None:
                        m[_WOK] = False
                    else:
                        m[_WNUM] += value * w
                        m[_WDEN] += w
    out: dict[str, float | None] = {}
    for spec in CATALOG:
        name = spec.field
        if name in totals and name in nulls:
            out[name] = None  # a sum or maximum over part of the kernels would be a wrong number
        elif name in totals:
            out[name] = float(totals[name])
        elif name in means:
            m = means[name]
            by_counter = spec.aggregation in _WEIGHT_FIELD and m[_WOK]
            num, den = (m[_WNUM], m[_WDEN]) if by_counter else (m[_DNUM], m[_DDEN])
            out[name] = float(num / den if den > 0 else m[_PLAIN] / m[_COUNT])
        elif name in nulls:
            out[name] = None
    return out
