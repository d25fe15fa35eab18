"""The kernel table from the tiers' claims: winner, evidence, agreement, counters; and the coverage.

    per kernel: the strongest tier that spoke wins (TIER_ORDER); every tier that spoke is
    evidence; two or more tiers agree when they name one operator; fused_with is the union of
    what they say was fused; no tier: unattributed, with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter

import numpy as np

from profiler_core.attribution.aggregate import specs_with_flops
from profiler_core.attribution.columns import (
    NONE,
    Interner,
    column,
    dim_codes,
    encode_attr,
    first_rows,
    full_codes,
    group_first_seen,
)
from profiler_core.attribution.kernel_table import SOURCES, TIERS, EvidenceColumns, KernelTable, counter_matrix
from profiler_core.attribution.library import kernel_library
from profiler_core.attribution.profile_meta import TIER_CONFIDENCE, TIER_ORDER, unattributed_reason
from profiler_core.attribution.tier_columns import ClaimColumns, Vocab
from profiler_core.metrics.catalog import CounterSpec, field_for_ncu_name
from profiler_core.record_columns import TableRecords
from profiler_core.records import CounterRow, NcuReport, TimelineKernel
from profiler_core.schema import Coverage, TierCoverage


@dataclass(frozen=True)
class CounterValues:
    """The ncu rows' counters by profile field (rows x fields, NaN: None)."""

    specs: tuple[CounterSpec, ...]
    values: np.ndarray
    given: bool  # a counter run was given
    ncu_id: np.ndarray  # per row


def counter_values(rows: Sequence[CounterRow], ncu: NcuReport | None) -> CounterValues:
    """Each row's counters by field: the 20, plus the FLOP counters when ncu returned any."""
    specs = specs_with_flops(f for name in (ncu.metrics_returned if ncu else ()) if (f := field_for_ncu_name(name)))
    fields = tuple(spec.field for spec in specs)
    out = counter_matrix(len(rows), len(fields))
    if not rows:
        return CounterValues(specs, out, ncu is not None, np.zeros(0, dtype=np.int64))
    col = {f: i for i, f in enumerate(fields)}
    if _from_table(rows, col, out):
        return CounterValues(specs, out, ncu is not None, column(rows, "ncu_id"))
    returned = ncu.metrics_returned if ncu else frozenset()
    by_field: dict[str, list[str]] = {}
    for name in returned:
        if (fld := field_for_ncu_name(name)) in col:
            by_field.setdefault(fld, []).append(name)
    # one name per field and rows holding exactly the returned names: read by name, order does not matter
    simple = all(len(v) == 1 for v in by_field.values())
    names = [v[0] for v in by_field.values()]
    cols = [col[f] for f in by_field]
    get = itemgetter(*names) if names else None
    seen: dict[int, int] = {}  # rows sharing one metrics mapping share one row of values
    for i, r in enumerate(rows):
        m = r.metrics
        first = seen.get(id(m))
        if first is not None:
            out[i] = out[first]
            continue
        seen[id(m)] = i
        if simple and get is not None and m.keys() == returned:
            vals = get(m)
            out[i, cols] = [np.nan if v is None else v for v in (vals if len(names) > 1 else (vals,))]
        else:
            for name, value in m.items():  # later names of one field win, as in a dict built in order
                fld = field_for_ncu_name(name)
                if fld in col:
                    out[i, col[fld]] = np.nan if value is None else value
    return CounterValues(specs, out, ncu is not None, column(rows, "ncu_id"))


def _from_table(rows: Sequence[CounterRow], col: dict[str, int], out: np.ndarray) -> bool:
    """Fill ``out`` from the metric columns beneath ``rows`` (a reader's TableRecords), as the rows'
    metrics dicts would (a later metric of one field wins); False where they are not numeric columns."""
    if not isinstance(rows, TableRecords):
        return False
    import pyarrow as pa

    from profiler_core.ingest.arrow_columns import filled
    from profiler_core.ingest.column_records import METRICS

    if METRICS not in rows.column_names:
        return True  # no metric at all: every counter is None
    packed = rows.column(METRICS)
    wanted = [(col[fld], array) for spec, array in zip(packed.type, packed.flatten(), strict=True)
              if (fld := field_for_ncu_name(spec.name)) in col]
    if not all(pa.types.is_floating(a.type) or pa.types.is_integer(a.type) for _, a in wanted):
        return False
    for j, array in wanted:
        out[:, j] = filled(array, np.nan)
    return True


def kernel_table(timeline: Sequence[TimelineKernel], knames: Interner, kname: np.ndarray, kinds: Interner,
                 kind_code: np.ndarray, tiers: Sequence[ClaimColumns], vocab: Vocab, counters: CounterValues,
                 row_of: np.ndarray, counter_source: np.ndarray, inherited_of: np.ndarray, graph_id: np.ndarray,
                 graph_known: np.ndarray, in_graph: np.ndarray, have: tuple[bool, bool, bool]) -> KernelTable:
    """Every kernel's columns; ``operator`` is filled by operator_build (the winner's group)."""
    n = len(timeline)
    strings = vocab.strings
    to_strings = np.array([strings.code(v) for v in knames.values] + [NONE], dtype=np.int64)
    name = to_strings[kname]
    kind = np.array([strings.code(v) for v in kinds.values] + [NONE], dtype=np.int64)[kind_code]
    by_tier = {t.tier: t for t in tiers}
    evidence = []
    for tier in TIER_ORDER:
        t = by_tier.get(tier)
        if t is None:
            evidence.append(EvidenceColumns(np.zeros(n, dtype=bool), full_codes(n, vocab.none), np.full(n, NONE),
                                            full_codes(n, vocab.none)))
        else:
            evidence.append(EvidenceColumns(t.has, t.op, t.op_id, t.detail))
    said = sum((t.has.astype(np.int8) for t in tiers), np.zeros(n, dtype=np.int8))
    attributed = said > 0
    tier_code = np.full(n, TIERS.index(TIERS[-1]), dtype=np.int8)
    reason = full_codes(n, vocab.none)
    agree = np.full(n, NONE, dtype=np.int8)
    fused_lists = Interner()
    fused_lists.code(())
    fused_with = np.zeros(n, dtype=np.int64)
    if tiers:
        has = np.stack([t.has for t in tiers])
        win = np.argmax(has, axis=0)
        rank = np.array([TIERS.index(t.tier) for t in tiers], dtype=np.int8)
        tier_code = np.where(attributed, rank[win], tier_code)
        ops = np.stack([np.where(t.has, t.op, NONE) for t in tiers])
        hi = ops.max(axis=0)
        lo = np.where(ops == NONE, np.iinfo(np.int64).max, ops).min(axis=0)
        multi = said >= 2
        agree[multi] = (hi[multi] == lo[multi]).astype(np.int8)
        s = strings.values
        for j in np.flatnonzero(agree == 0).tolist():
            reason[j] = strings.code("tiers disagree: " + "; ".join(
                f"{t.tier.value} says {s[t.op[j]]}" for t in tiers if t.has[j]))
        fused_cols = [np.where(t.has, t.fused, vocab.no_fused) for t in tiers]
        combo, n_combo = group_first_seen(fused_cols, np.ones(n, dtype=bool))
        firsts = first_rows(combo, n_combo)
        fv = vocab.fused.values
        table = np.array([fused_lists.code(tuple(sorted({op for c in fused_cols for op in fv[c[j]]})))
                          for j in firsts.tolist()], dtype=np.int64)
        fused_with = table[combo]
    have_kineto, have_ncu, have_nsys = have
    un = np.flatnonzero(~attributed)
    if len(un):
        pairs = {(int(k), bool(g)) for k, g in zip(kind[un].tolist(), in_graph[un].tolist(), strict=True)}
        codes = {p: strings.code(unattributed_reason(strings.values[p[0]], p[1], have_kineto, have_ncu, have_nsys))
                 for p in pairs}
        reason[un] = [codes[(int(k), bool(g))] for k, g in zip(kind[un].tolist(), in_graph[un].tolist(), strict=True)]
    library = np.array([strings.code(kernel_library(v)) for v in knames.values] + [NONE], dtype=np.int64)[kname]
    dims = Interner()
    return KernelTable(
        strings=strings, dims=dims.values, fused=fused_lists.values, operator_keys=[],
        counter_fields=tuple(s.field for s in counters.specs), have_counters=counters.given,
        name=name, short_name=encode_attr(strings, timeline, "short_name"), kind=kind,
        stream=column(timeline, "stream", 0), device=column(timeline, "device", 0),
        start_ns=column(timeline, "start_ns", 0), end_ns=column(timeline, "end_ns", 0),
        grid=dim_codes(timeline, "grid", dims), block=dim_codes(timeline, "block", dims),
        registers_per_thread=column(timeline, "registers_per_thread"),
        static_smem_bytes=column(timeline, "static_smem_bytes"),
        dynamic_smem_bytes=column(timeline, "dynamic_smem_bytes"),
        counter_values=counters.values, counter_row=row_of.copy(), counter_source=counter_source,
        ncu_id=np.where(row_of != NONE, counters.ncu_id[np.maximum(row_of, 0)] if len(counters.ncu_id) else NONE,
                        NONE),
        inherited_from=inherited_of, operator=np.full(n, NONE, dtype=np.int64), tier=tier_code,
        evidence=tuple(evidence), tiers_agree=agree, reason=reason, fused_with=fused_with,
        graph_id=graph_id, graph_id_known=graph_known, library=library,
        module_path=full_codes(n, vocab.none),
    )


def coverage(table: KernelTable) -> Coverage:
    """Kernel counts and time by tier, confidence and counter source (keys in order of first appearance)."""
    dur = table.end_ns - table.start_ns
    total = int(dur.sum())
    conf_of_tier = [TIER_CONFIDENCE[t].value for t in TIERS]

    def bucket(codes: np.ndarray, labels: Sequence[str]) -> dict[str, TierCoverage]:
        out: dict[str, TierCoverage] = {}
        if not len(codes):
            return out
        uniq, first = np.unique(codes, return_index=True)
        for c in uniq[np.argsort(first)].tolist():
            mask = codes == c
            label = labels[c]
            prev = out.get(label)
            count, d = int(mask.sum()), int(dur[mask].sum())
            out[label] = TierCoverage(kernel_count=count + (prev.kernel_count if prev else 0),
                                      duration_ns=d + (prev.duration_ns if prev else 0))
        return out

    by_tier = bucket(table.tier.astype(np.int64), [t.value for t in TIERS])
    by_conf = bucket(table.tier.astype(np.int64), conf_of_tier)
    counters = bucket(table.counter_source.astype(np.int64), [s.value for s in SOURCES])
    good = sum(by_conf[c].duration_ns for c in ("high", "medium") if c in by_conf)
    return Coverage(
        kernel_count=len(table), duration_ns=total, by_tier=by_tier, by_confidence=by_conf,
        counters_measured=counters.get("measured", TierCoverage()),
        counters_inherited=counters.get("inherited", TierCoverage()),
        counters_missing=counters.get("missing", TierCoverage()),
        attributed_time_pct=100.0 * good / total if total else 0.0,
        tier_overlaps=int((table.tiers_agree != NONE).sum()), tier_disagreements=int((table.tiers_agree == 0).sum()),
    )
