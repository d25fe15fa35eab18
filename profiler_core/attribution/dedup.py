"""Layer deduplication: find structurally identical repeated blocks, mark them, share counters.

Measured iterations repeat exactly, and transformer-style models repeat one block N times.
An operator's signature is (name, input shapes, kernel count); the measured region is split
into iterations, and inside the first iteration the longest tandem repeat of signatures
(at least ``MIN_BLOCK_OPS`` operators long) is taken as the layer:

    sigs: A B C  D E F  D E F  D E F  G      -> block "D E F" at 3, length 3, 3 copies
    roles: -  -  -  rep rep rep dup dup dup dup dup dup -

Duplicates point at their representative (``inherited_from``). A duplicate whose kernels
have no counters (the counter run skipped it) inherits its representative's, kernel by
kernel, marked ``inherited``; a duplicate that was measured keeps its own numbers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from profiler_core.attribution.aggregate import aggregate_counters
from profiler_core.schema import CounterSource, Kernel, Operator

MIN_BLOCK_OPS = 3
MAX_SEARCH_OPS = 3000  # the tandem-repeat search is quadratic; longer iterations skip it


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


def _best_tandem_repeat(sigs: Sequence[int]) -> tuple[int, int, int] | None:
    """(start, block length, copies) of the repeat that covers the most operators."""
    n = len(sigs)
    best: tuple[int, int, int] | None = None
    best_saved = 0
    for length in range(MIN_BLOCK_OPS, n // 2 + 1):
        run = 0
        for i in range(n - length):
            if sigs[i] == sigs[i + length]:
                run += 1
                copies = run // length + 1
                saved = (copies - 1) * length
                if copies >= 2 and saved > best_saved:
                    start = i - run + 1
                    best, best_saved = (start, length, copies), saved
            else:
                run = 0
    return best


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
        found = _best_tandem_repeat(first)
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
