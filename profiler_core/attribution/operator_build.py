"""Operators from the kernel table: one per invocation the winning tier names, in launch order.

    group = the winner's (tier, invocation)     key = "<name>#<nth invocation of that name>"
    counters aggregated per operator (aggregate.py); the class, execution context, library and
    confidence from its kernels; repeated layers marked as dedup.py does, on columns.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence

import numpy as np

from profiler_core.attribution.aggregate import aggregate_arrays, specs_with_flops
from profiler_core.attribution.columns import NONE, Interner, first_rows, group_first_seen, nth_within, sorted_unique
from profiler_core.attribution.dedup import MAX_SEARCH_OPS, best_tandem_repeat
from profiler_core.attribution.evidence import EXTERN_CLASSES
from profiler_core.attribution.joins import INHERITED, MISSING
from profiler_core.attribution.kernel_table import TIERS, KernelTable, padded_counters
from profiler_core.attribution.operator_class import classify_operator
from profiler_core.attribution.operator_table import OperatorTable
from profiler_core.attribution.profile_meta import CONF_RANK, TIER_CONFIDENCE
from profiler_core.attribution.tier_columns import ClaimColumns, Vocab
from profiler_core.schema import ExecutionContext, OperatorClass

_OPAQUE_OPS = frozenset({"aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu", "aten::_cudnn_rnn"})
_GENERATED_PREFIXES = ("triton_poi", "triton_per", "triton_red")


def build_operators(table: KernelTable, tiers: Sequence[ClaimColumns], vocab: Vocab, in_graph: np.ndarray,
                    phase_of: Sequence[str | None] | None, *, measured_iterations: int | None,
                    ) -> OperatorTable:
    """The operators of ``table`` (filling its ``operator`` column), counters aggregated, layers deduplicated."""
    n = len(table)
    s = vocab.strings.values
    copies = _copy_kinds(table)
    attributed = table.tier != TIERS.index(TIERS[-1])
    if tiers:
        has = np.stack([t.has for t in tiers])
        win = np.argmax(has, axis=0)
        cols = np.arange(n)

        def pick(attr: str) -> np.ndarray:
            return np.stack([getattr(t, attr) for t in tiers])[win, cols]

        w_tier = table.tier.astype(np.int64)
        w_op, w_op_id, w_shapes, w_compiled = pick("op"), pick("op_id"), pick("shapes"), pick("compiled")
        gid, n_groups = group_first_seen([w_tier, pick("kind"), pick("a"), pick("b"), pick("c")], attributed)
        gid, n_groups = _copies_join_their_call(table, copies, gid, n_groups, w_op, w_op_id)
    else:
        gid, n_groups = np.full(n, NONE, dtype=np.int64), 0
        w_op = w_op_id = w_shapes = w_compiled = np.full(n, NONE, dtype=np.int64)
    idx = np.flatnonzero(gid != NONE)
    members = idx[np.argsort(gid[idx], kind="stable")]
    sizes = np.bincount(gid[idx], minlength=n_groups)
    offsets = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    grp = np.repeat(np.arange(n_groups), sizes)
    first = _representatives(copies, members, offsets, grp, n_groups)
    name_code = w_op[first]
    call_index = nth_within(name_code)
    names = [s[c] for c in name_code.tolist()]
    keys = [f"{nm}#{ci}" for nm, ci in zip(names, call_index.tolist(), strict=True)]
    table.operator = gid
    table.operator_keys = keys
    dur = table.end_ns - table.start_ns
    duration = np.add.reduceat(dur[members], offsets[:-1]) if n_groups else np.zeros(0, dtype=np.int64)

    # fused ops and libraries of an operator: the union over its kernels
    fused_ops = Interner()
    fused_ops.code(())
    op_fused = _union_per_group(table.fused_with[members], grp, n_groups, table.fused, fused_ops)
    libs = Interner()
    lib_of_kernel = np.array([libs.code(() if v is None else (v,)) for v in s] + [0], dtype=np.int64)[table.library]
    lib_sets = Interner()
    op_lib = _union_per_group(lib_of_kernel[members], grp, n_groups, libs.values, lib_sets)
    lib_text = [", ".join(v) or None for v in lib_sets.values]

    graph_g = np.maximum.reduceat(in_graph[members].astype(np.int8), offsets[:-1]) if n_groups else np.zeros(0)
    compiled = w_compiled[first]
    ctx_key, n_ctx = group_first_seen([name_code, op_lib, compiled.astype(np.int64), graph_g.astype(np.int64)],
                                      np.ones(n_groups, dtype=bool))
    ctx_first = first_rows(ctx_key, n_ctx)
    contexts = [_context(s[name_code[g]], lib_sets.values[op_lib[g]], int(compiled[g]), bool(graph_g[g]))
                for g in ctx_first.tolist()]
    first_kname = table.name[first]
    generated = np.array([isinstance(v, str) and v.startswith(_GENERATED_PREFIXES) for v in s] + [False])[table.name]
    all_gen = np.minimum.reduceat(generated[members].astype(np.int8), offsets[:-1]) if n_groups else np.zeros(0)
    cls_key, n_cls = group_first_seen([name_code, first_kname, all_gen.astype(np.int64)], np.ones(n_groups, dtype=bool))
    classes = [_op_class(s[name_code[g]], s[first_kname[g]], bool(all_gen[g]))
               for g in first_rows(cls_key, n_cls).tolist()]
    conf_rank = np.array([CONF_RANK[TIER_CONFIDENCE[t]] for t in TIERS], dtype=np.int8)[table.tier]
    confidence = np.minimum.reduceat(conf_rank[members], offsets[:-1]) if n_groups else np.zeros(0, dtype=np.int8)
    phases: list[str | None] = [None] * n_groups
    if phase_of is not None:
        for g in range(n_groups):
            phases[g] = next((p for p in (phase_of[j] for j in members[offsets[g]:offsets[g + 1]].tolist())
                              if p is not None), None)
    specs = _specs(table)
    rows = np.where(table.counter_row != NONE, table.counter_row, len(table.counter_values))
    padded = padded_counters(table.counter_values)
    agg = aggregate_arrays(padded, dur, members, grp, n_groups, specs, matrix_rows=rows[members])
    ops = OperatorTable(
        keys=keys, names=names, call_index=call_index, op_id=w_op_id[first], input_shapes=vocab.shapes.values,
        shapes=w_shapes[first], op_class=[classes[c] for c in cls_key.tolist()],
        context=[contexts[c] for c in ctx_key.tolist()], fused=fused_ops.values, fused_with=op_fused,
        members=members, offsets=offsets, duration_ns=duration, agg=agg, specs=specs,
        confidence=confidence.astype(np.int8), library=[lib_text[c] for c in op_lib.tolist()], phase=phases)
    mark_repeated_layers(ops, table, padded, measured_iterations=measured_iterations)
    return ops


def _copy_kinds(table: KernelTable) -> np.ndarray:
    """Per kernel: True for a memset or memcpy activity, not a kernel."""
    s = table.strings.values
    copy_code = np.array([v in ("memset", "memcpy") for v in s] + [False])
    return copy_code[table.kind]


def _copies_join_their_call(table: KernelTable, copies: np.ndarray, gid: np.ndarray, n_groups: int,
                            w_op: np.ndarray, w_op_id: np.ndarray) -> tuple[np.ndarray, int]:
    """A memset or memcpy joins the operator of the kernel launched after it on its stream when both
    name the same call (operator name and op id): one call, one operator.

    With an nsys timeline the workspace zeroing that cuDNN or a split-K GEMM does before its kernel
    is filed by NVTX range while the kernel goes by its CUPTI correlation; the two claims name the
    same call, but by different tiers, and would make two operators of one ``aten::mm`` call.
    """
    n = len(gid)
    if n == 0 or not copies.any():
        return gid, n_groups
    order = np.lexsort((table.start_ns, table.stream))
    is_kernel = ~copies[order]
    pos = np.where(is_kernel, np.arange(n), n)
    following = np.minimum.accumulate(pos[::-1])[::-1]  # sorted position of the next kernel at or after
    moved = False
    for p in np.flatnonzero(~is_kernel).tolist():
        q = int(following[p])
        if q >= n:
            continue
        i, j = int(order[p]), int(order[q])
        if (table.stream[i] != table.stream[j] or gid[i] == NONE or gid[j] == NONE or gid[i] == gid[j]
                or w_op_id[i] == NONE or w_op_id[i] != w_op_id[j] or w_op[i] != w_op[j]):
            continue
        gid[i] = gid[j]
        moved = True
    if not moved:
        return gid, n_groups
    return group_first_seen([gid], gid != NONE)


def _representatives(copies: np.ndarray, members: np.ndarray, offsets: np.ndarray, grp: np.ndarray,
                     n_groups: int) -> np.ndarray:
    """Each operator's first kernel, a memset or memcpy only where it has no kernel: its claim names
    the call's shapes and context."""
    if n_groups == 0:
        return members[offsets[:-1]]
    not_kernel = copies[members].astype(np.int8)
    # within each group, the first member with the lowest "is a copy" flag
    pick = np.lexsort((np.arange(len(members)), not_kernel, grp))
    return members[pick[offsets[:-1]]]


def _specs(table: KernelTable) -> tuple:
    return specs_with_flops(table.counter_fields)


def _union_per_group(item_codes: np.ndarray, grp: np.ndarray, n_groups: int, item_values: Sequence[tuple],
                     out: Interner) -> np.ndarray:
    """Per group, the code in ``out`` of the sorted union of its items' tuples."""
    out.code(())
    result = np.zeros(n_groups, dtype=np.int64)
    if not n_groups:
        return result
    span = len(item_values) + 1
    pairs = sorted_unique(grp * span + item_codes)
    pg, pc = pairs // span, pairs % span
    counts = np.bincount(pg, minlength=n_groups)
    single = counts[pg] == 1
    single_code = np.array([out.code(tuple(sorted(set(v)))) for v in item_values] + [0], dtype=np.int64)
    result[pg[single]] = single_code[pc[single]]
    multi = np.flatnonzero(counts > 1)
    if len(multi):
        starts = np.searchsorted(pg, multi)
        for g, st in zip(multi.tolist(), starts.tolist(), strict=True):
            union: set[str] = set()
            for c in pc[st:st + counts[g]].tolist():
                union.update(item_values[c])
            result[g] = out.code(tuple(sorted(union)))
    return result


def _context(name: str, libraries: tuple[str, ...], compiled: int, in_graph: bool) -> ExecutionContext:
    if in_graph:
        return ExecutionContext.CUDA_GRAPH_REPLAY
    if name in _OPAQUE_OPS or {"cudnn", "nccl"} & set(libraries):
        return ExecutionContext.OPAQUE_LIBRARY
    if compiled == 1:
        return ExecutionContext.COMPILED_GRAPH
    if compiled == 0:
        return ExecutionContext.EAGER
    return ExecutionContext.UNKNOWN


@functools.lru_cache(maxsize=65536)
def _classify(name: str, first_kernel: str) -> OperatorClass:
    op_class = classify_operator(name)
    return classify_operator(first_kernel) if op_class is OperatorClass.OTHER else op_class


def _op_class(name: str, first_kernel: str, all_generated: bool) -> OperatorClass:
    op_class = _classify(name, first_kernel)
    if op_class in EXTERN_CLASSES and all_generated:
        # a generated pointwise/reduction kernel filed under a library op (a GEMM or convolution
        # that cuBLAS/cuDNN ran) holds the layout copy of its operand: classed by what it computes
        op_class = OperatorClass.CAST_COPY if first_kernel.startswith("triton_poi") else OperatorClass.REDUCTION
    return op_class


def mark_repeated_layers(ops: OperatorTable, table: KernelTable, padded: np.ndarray, *,
                         measured_iterations: int | None) -> None:
    """dedup.mark_repeated_layers on columns: roles, representatives, counters for skipped duplicates."""
    n_ops = len(ops)
    if n_ops < 2:
        return
    sig_text = Interner()
    shape_code = np.array([sig_text.code(_shapes_json(v)) for v in ops.input_shapes] + [0],
                          dtype=np.int64)[ops.shapes]
    name_codes = Interner().encode(ops.names)
    counts = np.diff(ops.offsets)
    sigs, _ = group_first_seen([name_codes, shape_code, counts], np.ones(n_ops, dtype=bool))
    period = n_ops
    if measured_iterations and measured_iterations > 1 and n_ops % measured_iterations == 0:
        p = n_ops // measured_iterations
        if (sigs == sigs[np.arange(n_ops) % p]).all():
            period = p
    rep = np.full(n_ops, NONE, dtype=np.int64)
    if period <= MAX_SEARCH_OPS:
        found = best_tandem_repeat(sigs[:period].tolist())
        if found:
            start, length, copies = found
            for t in range(1, copies):
                rep[start + t * length:start + (t + 1) * length] = np.arange(start, start + length)
    later = np.arange(period, n_ops)
    base = later % period if period else later
    rep[later] = np.where(rep[base] != NONE, rep[base], base)
    dups = np.flatnonzero(rep != NONE)
    if not len(dups):
        return
    ops.layer_role[sorted_unique(rep[dups])] = 1
    ops.layer_role[dups] = 2
    ops.inherited_from[dups] = rep[dups]
    # counters: a duplicate's kernel the counter run skipped takes its representative's, kernel by kernel
    size = counts[dups]
    pos = np.repeat(ops.offsets[dups], size) + (np.arange(size.sum()) - np.repeat(np.cumsum(size) - size, size))
    rpos = np.repeat(ops.offsets[rep[dups]], size) + (np.arange(size.sum()) - np.repeat(np.cumsum(size) - size, size))
    kd, kr = ops.members[pos], ops.members[rpos]
    take = (table.counter_source[kd] == MISSING) & (table.counter_source[kr] != MISSING)
    if not take.any():
        return
    kd, kr = kd[take], kr[take]
    table.counter_row[kd] = table.counter_row[kr]
    table.counter_source[kd] = INHERITED
    table.inherited_from[kd] = np.where(table.inherited_from[kr] != NONE, table.inherited_from[kr], kr)
    changed = sorted_unique(table.operator[kd])
    members = np.concatenate([ops.members[ops.offsets[g]:ops.offsets[g + 1]] for g in changed.tolist()])
    grp = np.repeat(np.arange(len(changed)), counts[changed])
    rows = np.where(table.counter_row != NONE, table.counter_row, len(padded) - 1)
    redo = aggregate_arrays(padded, table.end_ns - table.start_ns, members, grp, len(changed), ops.specs,
                            matrix_rows=rows[members])
    ops.agg.values[changed] = redo.values
    ops.agg.missing[changed] = redo.missing
    ops.agg.partial[changed] = redo.partial
    ops.agg.invalidate()
    for g in changed.tolist():
        ops.inherited_note[g] = f"counters inherited from the identical layer operator {ops.keys[rep[g]]}"


def _shapes_json(value: object) -> str:
    """dedup._signatures' spelling of an operator's input shapes."""
    return json.dumps(value) if isinstance(value, tuple | list) else "null"
