"""Tier 3 on columns: the innermost operator range open on the launching thread at launch time.

The reference (object_evidence.nsys_enclosure_claims in the tests) sweeps each thread's ranges;
here the ranges of a thread that nest properly (any two are disjoint or one holds the other, as
push/pop ranges do) become a tree, sorted by (start, -end), with a depth and a parent pointer each:

    depth[i]  = ranges before i still open at its start = i - #(ends <= start[i])
    parent[i] = the last range before i one level up

A launch at t then starts from the last range opened at or before t and walks up the parent
pointers until one is still open (vectorised, one step per level). Each range knows its
nearest operator range and whether a compiled-region marker is open around it, so the stack
evidence.py would build is never built. A thread whose ranges do not nest properly keeps the
exact sweep.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from profiler_core.attribution.columns import NONE, Interner, column, encode_attr, last_index_of, sorted_unique
from profiler_core.attribution.evidence import (
    COMPILED_MARKERS,
    Resolver,
    claim_from_stack,
    compiled_markers,
    innermost,
)
from profiler_core.attribution.names import NvtxOp, is_generated_kernel_name, parse_nvtx_op
from profiler_core.attribution.tier_columns import ClaimColumns, Vocab
from profiler_core.records import NvtxRange, RuntimeCall
from profiler_core.schema import Tier

DETAIL = "nsys NVTX range enclosing the launch"


def nsys_enclosure_columns(kernel_corr: np.ndarray, runtime_calls: Sequence[RuntimeCall],
                           ranges: Sequence[NvtxRange], resolve: Resolver, vocab: Vocab) -> ClaimColumns:
    """The reference's nsys_enclosure_claims over ``kernel_corr`` (each timeline kernel's correlation id, -1)."""
    n = len(kernel_corr)
    out = ClaimColumns.empty(Tier.NSYS_NVTX, n, vocab)
    if not ranges or not runtime_calls:
        return out
    texts = Interner()
    text_code = encode_attr(texts, ranges, "text")
    parsed: list[NvtxOp | None] = [parse_nvtx_op(t) for t in texts.values]
    kept_text = np.array([t.startswith(COMPILED_MARKERS) or p is not None for t, p in zip(texts.values, parsed,
                                                                                       strict=True)], dtype=bool)
    r_start, r_end, r_tid = column(ranges, "start_ns", 0), column(ranges, "end_ns", 0), column(ranges, "tid", 0)
    kept = np.flatnonzero(kept_text[text_code] & (r_end > r_start))
    if not len(kept):
        return out
    kept_codes = sorted_unique(text_code[kept])
    markers = compiled_markers(texts.values[c] for c in kept_codes.tolist())
    is_marker = np.array([t.startswith(markers) for t in texts.values], dtype=bool)
    is_op = np.array([p is not None for p in parsed], dtype=bool)
    # the launch of each kernel (the last runtime call of its correlation id, as a dict keeps it)
    rc_corr = column(runtime_calls, "correlation_id")
    rc_valid = np.flatnonzero(rc_corr != NONE)
    li = last_index_of(rc_corr[rc_valid], kernel_corr)
    launch = np.where((kernel_corr != NONE) & (li != NONE), rc_valid[np.maximum(li, 0)] if len(rc_valid) else NONE,
                      NONE)
    has_launch = np.flatnonzero(launch != NONE)
    q_tid = column(runtime_calls, "tid", 0)[launch[has_launch]]
    q_t = column(runtime_calls, "start_ns", 0)[launch[has_launch]]
    op_table = _op_table(texts.values, parsed, resolve, vocab)
    for tid in sorted_unique(r_tid[kept]).tolist():
        qi = np.flatnonzero(q_tid == tid)
        if not len(qi):
            continue
        rs = kept[r_tid[kept] == tid]
        rs = rs[np.lexsort((-r_end[rs], r_start[rs]))]  # stable: equal ranges keep their order
        tree = _tree(r_start[rs], r_end[rs])
        js, ts = has_launch[qi], q_t[qi]
        if tree is None:
            _sweep(out, [ranges[i] for i in rs.tolist()], js, ts, int(tid), markers, resolve, vocab)
            continue
        depth, parent = tree
        codes = text_code[rs]
        op_anc, comp_anc = _ancestors(depth, parent, is_op[codes], is_marker[codes])
        inner = _innermost_open(r_start[rs], r_end[rs], parent, ts)
        hit = inner != NONE
        anc = np.where(hit, op_anc[np.maximum(inner, 0)], NONE)
        hit &= anc != NONE
        sel, inner_s, anc_s = js[hit], inner[hit], anc[hit]
        code = codes[anc_s]
        generated = op_table["generated"][code]
        out.has[sel] = True
        out.op[sel], out.op_id[sel] = op_table["op"][code], op_table["op_id"][code]
        out.shapes[sel], out.fused[sel] = op_table["shapes"][code], op_table["fused"][code]
        out.detail[sel] = op_table["detail"][code]
        out.compiled[sel] = np.where(generated, 1, comp_anc[inner_s]).astype(np.int8)
        with_id = op_table["op_id"][code] != NONE
        out.kind[sel] = np.where(with_id, 2, 4)
        out.a[sel] = np.where(with_id, op_table["op_id"][code], tid)
        out.b[sel] = np.where(with_id, 0, r_start[rs][inner_s])
        out.c[sel] = np.where(with_id, 0, depth[anc_s])
    return out


def _op_table(texts: Sequence[str], parsed: Sequence[NvtxOp | None], resolve: Resolver,
              vocab: Vocab) -> dict[str, np.ndarray]:
    """What a claim from each operator range says (evidence.claim_from_stack), per unique text."""
    rows = []
    for p in parsed:
        if p is None:
            rows.append((vocab.none, NONE, vocab.no_shapes, vocab.no_fused, vocab.none, 0))
        elif is_generated_kernel_name(p.name):
            prim, fused, how = resolve(p.name)
            rows.append((vocab.strings.code(prim), NONE if p.op_id is None else p.op_id,
                         vocab.shapes.code(p.input_shapes), vocab.fused.code(fused),
                         vocab.strings.code(f"{DETAIL} '{p.name}'; {how}"), 1))
        else:
            rows.append((vocab.strings.code(p.name), NONE if p.op_id is None else p.op_id,
                         vocab.shapes.code(p.input_shapes), vocab.no_fused, vocab.strings.code(DETAIL), 0))
    cols = [np.array(c, dtype=np.int64) for c in zip(*rows, strict=True)]
    return {"op": cols[0], "op_id": cols[1], "shapes": cols[2], "fused": cols[3], "detail": cols[4],
            "generated": cols[5].astype(bool)}


def _tree(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(depth, parent) of ranges sorted by (start, -end), or None when they do not nest properly."""
    m = len(start)
    pos = np.arange(m)
    depth = pos - np.searchsorted(np.sort(end), start, side="right")
    parent = np.full(m, NONE, dtype=np.int64)
    child = np.flatnonzero(depth > 0)
    if len(child):
        key = depth * m + pos
        order = np.argsort(key, kind="stable")
        k = np.searchsorted(key[order], (depth[child] - 1) * m + child) - 1
        cand = order[np.maximum(k, 0)]
        if (k < 0).any() or (depth[cand] != depth[child] - 1).any() or (end[child] > end[cand]).any():
            return None
        parent[child] = cand
    return depth, parent


def _ancestors(depth: np.ndarray, parent: np.ndarray, is_op: np.ndarray,
               is_marker: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per range: its nearest operator range (itself included; -1), and whether a marker encloses it."""
    pos = np.arange(len(depth))
    op_anc = np.where(is_op, pos, NONE)
    comp = is_marker.copy()
    for d in range(1, int(depth.max(initial=0)) + 1):  # parents first, one level at a time
        lvl = np.flatnonzero(depth == d)
        p = parent[lvl]
        op_anc[lvl] = np.where(is_op[lvl], lvl, op_anc[p])
        comp[lvl] |= comp[p]
    return op_anc, comp


def _innermost_open(start: np.ndarray, end: np.ndarray, parent: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each launch time, the innermost range open at it (start <= t < end), or -1."""
    cur = np.searchsorted(start, t, side="right") - 1
    while True:
        closed = np.flatnonzero((cur != NONE) & (end[np.maximum(cur, 0)] <= t))
        if not len(closed):
            return cur
        cur[closed] = parent[cur[closed]]


def _sweep(out: ClaimColumns, rs: Sequence[NvtxRange], js: np.ndarray, ts: np.ndarray, tid: int,
           markers: tuple[str, ...], resolve: Resolver, vocab: Vocab) -> None:
    """The reference's exact sweep (nsys_enclosure_claims), for a thread whose ranges overlap without nesting."""
    qs = sorted(zip(ts.tolist(), js.tolist(), strict=True))
    open_ranges: list[NvtxRange] = []
    i = 0
    for t, j in qs:
        while i < len(rs) and rs[i].start_ns <= t:
            open_ranges.append(rs[i])
            i += 1
        open_ranges = [r for r in open_ranges if r.end_ns > t]
        if not open_ranges:
            continue
        claim = claim_from_stack(innermost(tuple(r.text for r in open_ranges), parse_nvtx_op, markers),
                                  Tier.NSYS_NVTX, ("nvtx", tid, open_ranges[-1].start_ns), resolve, DETAIL)
        if claim is not None:
            out.put(j, claim, vocab)
