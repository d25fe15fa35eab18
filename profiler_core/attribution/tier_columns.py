"""The evidence tiers as columns: what each source says launched each kernel.

The same statements as evidence.py (which documents the tiers), held per tier as arrays over
the timeline's kernels instead of one ``Claim`` object per kernel. What a claim says depends
on a few values (the launching op's name, an NVTX stack, a kernel name), so it is worked out
once per unique value with evidence.py's own functions and broadcast:

    has[j]      the tier spoke for kernel j
    op[j]       operator name (code into Vocab.strings)
    inst_*[j]   the invocation it names: (kind, a, b, c), kind = length of evidence.py's
                instance tuple, e.g. ("ext", 42) -> (2, 42, 0, 0)
    op_id, shapes, fused, compiled, detail   the rest of the claim (codes; -1 for None)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from profiler_core.attribution.collective import collective_operator
from profiler_core.attribution.columns import (
    NONE,
    Interner,
    column,
    encode_attr,
    first_index_of,
    full_codes,
    sorted_unique,
    taken,
)
from profiler_core.attribution.evidence import Claim, Resolver, compiled_markers, innermost_op
from profiler_core.attribution.names import clean_op_name, is_generated_kernel_name, is_operator_name
from profiler_core.ingest.kineto_events import shapes_from_text
from profiler_core.records import CounterRow, CpuOp, FusionRecord, TimelineKernel
from profiler_core.schema import Tier


@dataclass
class Vocab:
    """The values claims share, dictionary-encoded (None is a value like any other)."""

    strings: Interner = field(default_factory=Interner)  # operator names and details
    shapes: Interner = field(default_factory=Interner)
    fused: Interner = field(default_factory=Interner)  # tuples of fused ops

    def __post_init__(self) -> None:
        self.none = self.strings.code(None)
        self.no_fused = self.fused.code(())
        self.no_shapes = self.shapes.code(None)


@dataclass
class ClaimColumns:
    """One tier's claims over n kernels (see the module docstring)."""

    tier: Tier
    has: np.ndarray
    op: np.ndarray
    kind: np.ndarray
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    op_id: np.ndarray
    shapes: np.ndarray
    fused: np.ndarray
    compiled: np.ndarray  # -1 unknown, 0, 1
    detail: np.ndarray

    @classmethod
    def empty(cls, tier: Tier, n: int, vocab: Vocab) -> ClaimColumns:
        # columns of zeros (the vocabulary's codes for None are 0 when it is made before any other
        # value) are mapped when first written: a tier that claims few kernels does not fill them
        return cls(tier, np.zeros(n, dtype=bool), full_codes(n, vocab.none), full_codes(n, 0), full_codes(n, 0),
                   full_codes(n, 0), full_codes(n, 0), full_codes(n, NONE), full_codes(n, vocab.no_shapes),
                   full_codes(n, vocab.no_fused), np.full(n, NONE, dtype=np.int8), full_codes(n, vocab.none))

    def put(self, j: int, claim: Claim, vocab: Vocab) -> None:
        """Store one evidence.py claim at kernel ``j``."""
        inst = claim.instance
        self.has[j] = True
        self.op[j] = vocab.strings.code(claim.operator)
        self.kind[j] = len(inst)
        parts = [*inst[1:], 0, 0, 0]
        self.a[j], self.b[j], self.c[j] = parts[0], parts[1], parts[2]
        self.op_id[j] = NONE if claim.op_id is None else claim.op_id
        self.shapes[j] = vocab.shapes.code(claim.input_shapes)
        self.fused[j] = vocab.fused.code(claim.fused_with)
        self.compiled[j] = NONE if claim.compiled is None else int(claim.compiled)
        self.detail[j] = vocab.strings.code(claim.detail)

    @classmethod
    def from_claims(cls, tier: Tier, claims: Sequence[Claim | None], vocab: Vocab) -> ClaimColumns:
        out = cls.empty(tier, len(claims), vocab)
        for j, claim in enumerate(claims):
            if claim is not None:
                out.put(j, claim, vocab)
        return out


def _table(rows: list[tuple[Any, ...]], width: int) -> list[np.ndarray]:
    """Per-unique-value claim parts as arrays, a last row of sentinels for code -1."""
    cols = list(zip(*rows, strict=True)) if rows else [()] * width
    return [np.array([*c, NONE], dtype=np.int64) for c in cols]


def correlation_columns(n: int, kineto_index: np.ndarray, kineto_kernels: Sequence[TimelineKernel],
                        cpu_ops: Sequence[CpuOp], resolve: Resolver, graph_corr: frozenset[int],
                        vocab: Vocab) -> ClaimColumns:
    """Tier 1 (reference: object_evidence.correlation_claims in the tests): the kernel's External id
    names its launching cpu_op."""
    out = ClaimColumns.empty(Tier.CUPTI_CORRELATION, n, vocab)
    if not kineto_kernels or not cpu_ops:
        return out
    has_twin = kineto_index != NONE
    ki = np.where(has_twin, kineto_index, 0)
    corr = column(kineto_kernels, "correlation_id")[ki]
    ext = np.where(has_twin, column(kineto_kernels, "external_id")[ki], NONE)
    if graph_corr:
        ext = np.where(np.isin(corr, np.fromiter(graph_corr, dtype=np.int64)), NONE, ext)
    names, cats = Interner(), Interner()
    name_code = encode_attr(names, cpu_ops, "name")
    cat_code = encode_attr(cats, cpu_ops, "category")
    op_ext = column(cpu_ops, "external_id")
    collective = [collective_operator(nm) for nm in names.values]
    eligible = (op_ext != NONE) & (np.array([c == "cpu_op" for c in cats.values])[cat_code]
                                   | np.array([c is not None for c in collective])[name_code])
    elig_idx = np.flatnonzero(eligible)
    hit = first_index_of(op_ext[elig_idx], ext)
    opi = np.where((ext != NONE) & (hit != NONE), elig_idx[np.maximum(hit, 0)] if len(elig_idx) else NONE, NONE)
    # per unique op name: (speaks, operator, fused, detail, compiled forced True)
    per_name = []
    for nm, coll in zip(names.values, collective, strict=True):
        if is_generated_kernel_name(nm):
            prim, fused, how = resolve(nm)
            per_name.append((1, vocab.strings.code(prim), vocab.fused.code(fused),
                             vocab.strings.code(f"launched by '{nm}'; {how}"), 1))
        elif coll is not None:
            per_name.append((1, vocab.strings.code(coll), vocab.no_fused,
                             vocab.strings.code(f"inside the collective range '{nm}'"), 0))
        elif is_operator_name(nm):
            per_name.append((1, vocab.strings.code(clean_op_name(nm)), vocab.no_fused, vocab.none, 0))
        else:
            per_name.append((0, vocab.none, vocab.no_fused, vocab.none, 0))
    t_speaks, t_op, t_fused, t_detail, forced = _table(per_name, 5)
    nc = np.where(opi != NONE, name_code[np.maximum(opi, 0)], NONE)
    out.has = (opi != NONE) & (t_speaks[nc] == 1)
    sel = np.flatnonzero(out.has)
    ops_sel = opi[sel]
    out.op[sel], out.fused[sel], out.detail[sel] = t_op[nc[sel]], t_fused[nc[sel]], t_detail[nc[sel]]
    out.kind[sel], out.a[sel], out.op_id[sel] = 2, ext[sel], ext[sel]
    out.shapes[sel] = encode_attr(vocab.shapes, taken(cpu_ops, ops_sel), "input_shapes", decode=shapes_from_text)
    inside = _inside_compiled(cpu_ops, names, name_code, ops_sel)
    out.compiled[sel] = np.where(forced[nc[sel]] == 1, 1, inside).astype(np.int8)
    return out


def _inside_compiled(cpu_ops: Sequence[CpuOp], names: Interner, name_code: np.ndarray,
                     ops_sel: np.ndarray) -> np.ndarray:
    """For the launching ops: inside a compiled region on the op's thread, at its start (reference:
    object_evidence._inside in the tests)."""
    markers = compiled_markers(names.values)
    is_marker = np.array([nm.startswith(markers) for nm in names.values], dtype=bool)[name_code]
    out = np.zeros(len(ops_sel), dtype=bool)
    if not is_marker.any() or not len(ops_sel):
        return out
    tid = column(cpu_ops, "tid", 0)
    start = column(cpu_ops, "start_ns", 0)
    end = column(cpu_ops, "end_ns", 0)
    spans = np.flatnonzero(is_marker)
    q_tid, q_t = tid[ops_sel], start[ops_sel]
    for t in sorted_unique(tid[spans]).tolist():
        s = spans[tid[spans] == t]
        order = np.lexsort((end[s], start[s]))
        starts, ends = start[s][order], end[s][order]
        qi = np.flatnonzero(q_tid == t)
        i = np.searchsorted(starts, q_t[qi], side="right") - 1
        hit = np.zeros(len(qi), dtype=bool)
        for back in range(4):  # compiled regions nest at most a few deep: look back a few
            k = i - back
            ok = k >= 0
            hit |= ok & (ends[np.maximum(k, 0)] >= q_t[qi])
        out[qi] = hit
    return out


def _stack(stack: Sequence[str] | None) -> tuple[str, ...]:
    """An NVTX stack as a tuple (none recorded: empty)."""
    return tuple(stack or ())


def ncu_nvtx_columns(n: int, rows: Sequence[CounterRow], row_of: np.ndarray, measured: np.ndarray,
                     resolve: Resolver, vocab: Vocab) -> ClaimColumns:
    """Tier 2 (reference: object_evidence.ncu_nvtx_claims in the tests): the NVTX stack ncu recorded
    for the measured launch itself."""
    out = ClaimColumns.empty(Tier.NCU_NVTX, n, vocab)
    if not rows:
        return out
    stacks = Interner()
    stack_code = encode_attr(stacks, rows, "nvtx_stack", _stack)
    markers = compiled_markers(t for s in stacks.values for t in s)
    per_stack = []
    for stack in stacks.values:
        found = innermost_op(stack, markers) if stack else None
        if found is None:
            per_stack.append((0, vocab.none, 0, 0, NONE, vocab.no_shapes, vocab.no_fused, NONE, vocab.none))
            continue
        depth, parsed, compiled = found
        kind = 3 if parsed.op_id is None else 2
        op_id = NONE if parsed.op_id is None else parsed.op_id
        shapes = vocab.shapes.code(parsed.input_shapes)
        if is_generated_kernel_name(parsed.name):
            prim, fused, how = resolve(parsed.name)
            per_stack.append((1, vocab.strings.code(prim), kind, depth, op_id, shapes, vocab.fused.code(fused), 1,
                              vocab.strings.code(f"ncu NVTX range '{parsed.name}'; {how}")))
        else:
            per_stack.append((1, vocab.strings.code(parsed.name), kind, depth, op_id, shapes, vocab.no_fused,
                              NONE if compiled is None else int(compiled), vocab.strings.code("ncu NVTX range")))
    t_speaks, t_op, t_kind, t_depth, t_op_id, t_shapes, t_fused, t_compiled, t_detail = _table(per_stack, 9)
    ri = np.where(measured & (row_of != NONE), row_of, NONE)
    sc = np.where(ri != NONE, stack_code[np.maximum(ri, 0)], NONE)
    out.has = t_speaks[sc] == 1
    sel = np.flatnonzero(out.has)
    s = sc[sel]
    ncu_id = column(rows, "ncu_id")[ri[sel]]
    out.op[sel], out.kind[sel], out.op_id[sel] = t_op[s], t_kind[s], t_op_id[s]
    out.a[sel] = np.where(t_kind[s] == 3, ncu_id, t_op_id[s])
    out.b[sel] = np.where(t_kind[s] == 3, t_depth[s], 0)
    out.shapes[sel], out.fused[sel], out.detail[sel] = t_shapes[s], t_fused[s], t_detail[s]
    out.compiled[sel] = t_compiled[s].astype(np.int8)
    return out


def fusion_columns(name_code: np.ndarray, names: Sequence[str], fusions: Mapping[str, FusionRecord],
                   resolve: Resolver, vocab: Vocab) -> ClaimColumns:
    """Tier 4 (reference: object_evidence.fusion_claims in the tests): Inductor's own record of what
    a generated kernel computes."""
    n = len(name_code)
    out = ClaimColumns.empty(Tier.INDUCTOR_FUSION, n, vocab)
    per_name = []
    for nm in names:
        rec = fusions.get(nm)
        if rec is None or not rec.aten_ops:
            per_name.append((0, vocab.none, vocab.no_fused, vocab.none))
            continue
        prim, fused, _ = resolve(nm)
        per_name.append((1, vocab.strings.code(prim), vocab.fused.code(fused),
                         vocab.strings.code(f"Inductor {rec.source}")))
    t_speaks, t_op, t_fused, t_detail = _table(per_name, 4)
    out.has = t_speaks[name_code] == 1
    sel = np.flatnonzero(out.has)
    nc = name_code[sel]
    out.op[sel], out.fused[sel], out.detail[sel] = t_op[nc], t_fused[nc], t_detail[nc]
    out.kind[sel], out.a[sel], out.compiled[sel] = 2, sel, 1
    return out
