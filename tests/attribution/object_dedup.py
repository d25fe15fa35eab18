"""Layer deduplication on models: the reference the engine's columns are checked against.

The engine marks repeated layers on its columns (operator_build.mark_repeated_layers); this
is the same marking operator by operator, as the object engine (object_engine.py) runs it.
Both search with dedup.best_tandem_repeat.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from profiler_core.attribution.aggregate import aggregate_counters
from profiler_core.attribution.dedup import MAX_SEARCH_OPS, best_tandem_repeat
from profiler_core.schema import CounterSource, Kernel, Operator


def _signatures(operators: Sequence[Operator]) -> list[int]:
    ids: dict[tuple, int] = {}
    out = []
    for op in operators:
        sig = (op.name, json.dumps(op.input_shapes), op.kernel_count)
        out.append(ids.setdefault(sig, len(ids)))
    return out


def _iteration_period(sigs: Sequence[int], iterations: int | None) -> int:
    n = len(sigs)
    if iterations and iterations > 1 and n % iterations == 0:
        p = n // iterations
        if all(sigs[i] == sigs[i % p] for i in range(p, n)):
            return p
    return n


def mark_repeated_layers(operators: list[Operator], kernels: list[Kernel], *,
                         measured_iterations: int | None = None) -> None:
    """Set ``layer_role``/``inherited_from`` on repeated operators; fill skipped counters."""
    if len(operators) < 2:
        return
    sigs = _signatures(operators)
    period = _iteration_period(sigs, measured_iterations)
    rep_of: dict[int, int] = {}
    first = sigs[:period]
    if len(first) <= MAX_SEARCH_OPS:
        found = best_tandem_repeat(first)
        if found:
            start, length, copies = found
            for t in range(1, copies):
                for u in range(length):
                    rep_of[start + t * length + u] = start + u
    for i in range(period, len(operators)):
        base = i % period
        rep_of[i] = rep_of.get(base, base)
    reps = set(rep_of.values())
    for i, op in enumerate(operators):
        if i in rep_of:
            op.layer_role = "duplicate"
            op.inherited_from = operators[rep_of[i]].key
        elif i in reps:
            op.layer_role = "representative"
    for i, r in rep_of.items():
        _inherit_counters(operators[i], operators[r], kernels)


def _inherit_counters(dup: Operator, rep: Operator, kernels: list[Kernel]) -> None:
    if len(dup.kernel_ids) != len(rep.kernel_ids):
        return
    changed = False
    for kd, kr in zip(dup.kernel_ids, rep.kernel_ids, strict=True):
        k, src = kernels[kd], kernels[kr]
        if k.counter_source is CounterSource.MISSING and src.counter_source is not CounterSource.MISSING:
            k.counters = dict(src.counters)
            k.counter_source = CounterSource.INHERITED
            k.inherited_from = src.inherited_from if src.inherited_from is not None else src.id
            changed = True
    if changed:
        dup.metrics, reasons = aggregate_counters([kernels[i] for i in dup.kernel_ids])
        reasons["_inherited"] = f"counters inherited from the identical layer operator {rep.key}"
        dup.metric_null_reasons = reasons
