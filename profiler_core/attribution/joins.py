"""The invocation-order joins on columns: launch order, timeline x Kineto, timeline x ncu rows.

Each join is a sort plus a ``(join key, nth launch of it)`` lookup (columns.pair_lookup), and
grid/block checks on dimension codes. The vectorised path takes the joins that hold exactly
(every launch pairs, every pair's dimensions agree, the counter run has one of its three
shapes with no hole); anything else is handed to the record-by-record join in timeline.py /
counter_join.py, which names the first divergence or keeps the holes ``--allow-partial`` asks
for. Both give identical results where both apply (tests/attribution/test_columnar_golden.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from profiler_core.attribution.columns import (
    NONE,
    Interner,
    column,
    dim_codes,
    encode_attr,
    nth_and_order,
    nth_within,
    pair_lookup,
    values,
)
from profiler_core.attribution.counter_join import CounterJoin, join_counters, key_warnings
from profiler_core.attribution.names import choose_name_key, template_arguments
from profiler_core.attribution.timeline import align_timelines
from profiler_core.records import CounterRow, TimelineKernel
from profiler_core.schema import CounterSource


def launch_order(kernels: Sequence[TimelineKernel]) -> np.ndarray:
    """Positions of ``kernels`` in host launch order (timeline.launch_order, as an index)."""
    start = column(kernels, "start_ns", 0)
    corr = column(kernels, "correlation_id")
    if len(kernels) and (corr != NONE).all():
        return np.lexsort((start, corr))
    return np.argsort(start, kind="stable")


@dataclass
class KeyedNames:
    """Join-key codes of two record lists, under the spelling both agree on."""

    left: np.ndarray
    right: np.ndarray
    label: str
    key: Callable[[str], str]


def keyed(left: Sequence[TimelineKernel | CounterRow], right: Sequence[TimelineKernel | CounterRow]) -> KeyedNames:
    """The join keys of two record lists' names."""
    lcodes, rcodes = Interner(), Interner()
    lc, rc = encode_attr(lcodes, left, "name"), encode_attr(rcodes, right, "name")
    key, label = choose_name_key(lcodes.values, rcodes.values)
    keys = Interner()
    lk = np.array([keys.code(key(v)) for v in lcodes.values] + [NONE], dtype=np.int64)[lc]
    rk = np.array([keys.code(key(v)) for v in rcodes.values] + [NONE], dtype=np.int64)[rc]
    return KeyedNames(lk, rk, label, key)


def _agree(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a == NONE) | (b == NONE) | (a == b)


def align(timeline: Sequence[TimelineKernel], other: Sequence[TimelineKernel], *, other_label: str,
          allow_partial: bool = False) -> tuple[np.ndarray, list[str]]:
    """timeline.align_timelines as an index array (-1: no match)."""
    names = keyed(timeline, other)
    dims = Interner()
    match = pair_lookup(names.left, nth_within(names.left), names.right, *nth_and_order(names.right))
    ok = match != NONE
    if ok.all() and len(timeline) == len(other):
        m = match
        if (_agree(dim_codes(timeline, "grid", dims), dim_codes(other, "grid", dims)[m]).all()
                and _agree(dim_codes(timeline, "block", dims), dim_codes(other, "block", dims)[m]).all()):
            warnings = [] if names.label == "join_key" else [
                f"{other_label} and timeline kernel names joined on their {names.label.replace('_', ' ')} "
                "(the tools' demanglers differ)"]
            return match, warnings
    out, warnings = align_timelines(timeline, other, other_label=other_label, allow_partial=allow_partial)
    return np.array([NONE if i is None else i for i in out], dtype=np.int64), warnings


@dataclass
class CounterColumns:
    """Per GPU kernel: its ncu row (-1: none), where its counters come from, whom it inherits from."""

    mode: str
    row: np.ndarray
    source: np.ndarray  # codes into SOURCES
    inherited_from: np.ndarray  # GPU-kernel position of the measured representative, -1
    warnings: list[str]


SOURCES = (CounterSource.MEASURED, CounterSource.INHERITED, CounterSource.MISSING)
MEASURED, INHERITED, MISSING = 0, 1, 2


def join_counter_columns(kernels: Sequence[TimelineKernel], rows: Sequence[CounterRow], *,
                         allow_partial: bool = False) -> CounterColumns:
    """counter_join.join_counters on columns; irregular runs go through it record by record."""
    if rows:
        fast = _fast_join(kernels, rows)
        if fast is not None:
            return fast
    join = join_counters(kernels, rows, allow_partial=allow_partial)
    return _from_join(join)


def _from_join(join: CounterJoin) -> CounterColumns:
    code = {s: i for i, s in enumerate(SOURCES)}
    return CounterColumns(
        join.mode, np.array([NONE if r is None else r for r in join.row_index], dtype=np.int64),
        np.array([code[s] for s in join.source], dtype=np.int8),
        np.array([NONE if r is None else r for r in join.inherited_from], dtype=np.int64), join.warnings)


def _fast_join(kernels: Sequence[TimelineKernel], rows: Sequence[CounterRow]) -> CounterColumns | None:
    n, m = len(kernels), len(rows)
    names = keyed(kernels, rows)
    kk, rk, warnings = names.left, names.right, key_warnings(names.label)
    dims = Interner()
    kg, kb = dim_codes(kernels, "grid", dims), dim_codes(kernels, "block", dims)
    rg, rb = dim_codes(rows, "grid", dims), dim_codes(rows, "block", dims)
    if m < n:
        # per-config: configurations (key, grid, block), exact codes (None is its own value)
        span_d = len(dims) + 1
        kcfg = (kk * span_d + (kg + 1)) * span_d + (kb + 1)
        rcfg = (rk * span_d + (rg + 1)) * span_d + (rb + 1)
        ucfg, kcount = np.unique(kcfg, return_counts=True)
        rcfg_u, rcount = np.unique(rcfg, return_counts=True)
        in_k = np.isin(rcfg_u, ucfg)
        if in_k.all() and len(rcfg_u):
            k_samples = rcount.max()
            launches = kcount[np.searchsorted(ucfg, rcfg_u)]
            if (rcount == np.minimum(k_samples, launches)).all():
                if len(rcfg_u) != len(ucfg):
                    return None  # configurations the run never measured: holes or an error, named there
                if names.label != "join_key" and _mixes_instantiations(kernels, kcfg):
                    return None  # a loose key joined two instantiations: paired per instantiation there
                return _per_config(kernels, rows, kcfg, rcfg, warnings)
    if m < n and n % m == 0:
        period = m
        if ((kk[:period] == rk).all() and _agree(kg[:period], rg).all() and _agree(kb[:period], rb).all()):
            rep = np.arange(n) % period
            # later launches repeat the first period's names and grids (None equals only None)
            if (kk == kk[rep]).all() and (kg == kg[rep]).all():
                source = np.where(np.arange(n) < period, MEASURED, INHERITED).astype(np.int8)
                inherited = np.where(np.arange(n) < period, NONE, rep)
                return CounterColumns("prefix", rep.astype(np.int64), source, inherited, warnings)
    if m != n:
        return None
    match = pair_lookup(kk, nth_within(kk), rk, *nth_and_order(rk))
    if (match == NONE).any():
        return None
    if not (_agree(kg, rg[match]).all() and _agree(kb, rb[match]).all()):
        return None
    return CounterColumns("full", match, np.zeros(n, dtype=np.int8), np.full(n, NONE, dtype=np.int64), warnings)


def _mixes_instantiations(kernels: Sequence[TimelineKernel], kcfg: np.ndarray) -> bool:
    """Does one configuration hold launches of two template instantiations?"""
    args_of: dict[int, tuple[str, ...]] = {}
    for cfg, name in set(zip(kcfg.tolist(), values(kernels, "name"), strict=True)):
        args = template_arguments(name)
        if args_of.setdefault(cfg, args) != args:
            return True
    return False


def _per_config(kernels: Sequence[TimelineKernel], rows: Sequence[CounterRow], kcfg: np.ndarray,
                rcfg: np.ndarray, warnings: list[str]) -> CounterColumns:
    n = len(kernels)
    (knth, korder), (rnth, rorder) = nth_and_order(kcfg), nth_and_order(rcfg)
    measured_row = pair_lookup(kcfg, knth, rcfg, rnth, rorder)
    first_row = pair_lookup(kcfg, np.zeros(n, dtype=np.int64), rcfg, rnth, rorder)
    first_kernel = pair_lookup(kcfg, np.zeros(n, dtype=np.int64), kcfg, knth, korder)
    measured = measured_row != NONE
    row = np.where(measured, measured_row, first_row)
    source = np.where(measured, MEASURED, INHERITED).astype(np.int8)
    inherited = np.where(measured, NONE, first_kernel)
    return CounterColumns("per-config", row, source, inherited, warnings)
