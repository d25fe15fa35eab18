"""The evidence tiers record by record: the reference the columnar tiers are checked against.

Each function returns, per timeline kernel (same indexing), a :class:`Claim` or None, as the
engine did before it ran on columns (profiler_core/attribution/tier_columns.py and
enclosure.py are the production forms; object_engine.py calls these).

1. correlation_claims: the kernel's Kineto ``External id`` names its launching ``cpu_op``.
2. ncu_nvtx_claims: the push/pop stack ncu recorded for that very launch (``--nvtx``).
3. nsys_enclosure_claims: the innermost operator range open on the launching host thread at
   the host-side launch time (runtime API record joined by correlation id).
4. fusion_claims: Inductor's record of what a generated kernel computes.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Mapping, Sequence

from profiler_core.attribution.collective import collective_operator
from profiler_core.attribution.evidence import (
    COMPILED_MARKERS,
    Claim,
    Resolver,
    claim_from_stack,
    compiled_markers,
    innermost,
    innermost_op,
)
from profiler_core.attribution.names import (
    NvtxOp,
    clean_op_name,
    is_generated_kernel_name,
    is_operator_name,
    parse_nvtx_op,
)
from profiler_core.records import CounterRow, CpuOp, FusionRecord, NvtxRange, RuntimeCall, TimelineKernel
from profiler_core.schema import Tier


def correlation_claims(
    kernels: Sequence[TimelineKernel],
    kineto_index: Sequence[int | None],
    kineto_kernels: Sequence[TimelineKernel],
    cpu_ops: Sequence[CpuOp],
    resolve: Resolver,
    graph_launch_correlations: frozenset[int],
) -> list[Claim | None]:
    """Tier 1: Kineto External id -> launching cpu_op."""
    by_ext: dict[int, CpuOp] = {}
    for cpu_op in cpu_ops:
        if cpu_op.external_id is None:
            continue
        if cpu_op.category == "cpu_op" or collective_operator(cpu_op.name) is not None:
            # DDP's reducer launches its allreduce inside ProcessGroupNCCL's own
            # "nccl:all_reduce" range only, which Kineto may file as a user annotation
            by_ext.setdefault(cpu_op.external_id, cpu_op)
    compiled_spans = _compiled_spans(cpu_ops, compiled_markers(op.name for op in cpu_ops))
    out: list[Claim | None] = [None] * len(kernels)
    for j, ki in enumerate(kineto_index):
        if ki is None:
            continue
        kk = kineto_kernels[ki]
        if kk.correlation_id in graph_launch_correlations:
            continue  # the External id names the replay call, not an operator
        op = by_ext.get(kk.external_id) if kk.external_id is not None else None
        if op is None:
            continue
        compiled = _inside(compiled_spans, op.tid, op.start_ns)
        if is_generated_kernel_name(op.name):
            prim, fused, how = resolve(op.name)
            out[j] = Claim(Tier.CUPTI_CORRELATION, prim, ("ext", op.external_id), op.external_id,
                           op.input_shapes, fused, True, f"launched by '{op.name}'; {how}")
        elif (collective := collective_operator(op.name)) is not None:
            out[j] = Claim(Tier.CUPTI_CORRELATION, collective, ("ext", op.external_id), op.external_id,
                           op.input_shapes, (), compiled, f"inside the collective range '{op.name}'")
        elif is_operator_name(op.name):
            out[j] = Claim(Tier.CUPTI_CORRELATION, clean_op_name(op.name), ("ext", op.external_id),
                           op.external_id, op.input_shapes, (), compiled)
    return out


def _compiled_spans(cpu_ops: Sequence[CpuOp], markers: tuple[str, ...]) -> dict[int, tuple[list[int], list[int]]]:
    spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for op in cpu_ops:
        if op.name.startswith(markers):
            spans[op.tid].append((op.start_ns, op.end_ns))
    out = {}
    for tid, items in spans.items():
        items.sort()
        out[tid] = ([s for s, _ in items], [e for _, e in items])
    return out


def _inside(spans: dict[int, tuple[list[int], list[int]]], tid: int, t_ns: int) -> bool:
    if tid not in spans:
        return False
    starts, ends = spans[tid]
    i = bisect.bisect_right(starts, t_ns) - 1
    # compiled regions nest at most a few deep (a region calling another): look back a few
    return any(ends[k] >= t_ns for k in range(i, max(i - 4, -1), -1))


def ncu_nvtx_claims(
    rows: Sequence[CounterRow], row_index: Sequence[int | None], measured: Sequence[bool], resolve: Resolver,
) -> list[Claim | None]:
    """Tier 2: the NVTX stack ncu recorded for the measured launch itself (never inherited)."""
    out: list[Claim | None] = [None] * len(row_index)
    markers = compiled_markers(t for r in rows for t in (r.nvtx_stack or ()))
    for j, ri in enumerate(row_index):
        if ri is None or not measured[j]:
            continue
        stack = rows[ri].nvtx_stack
        if stack:
            out[j] = claim_from_stack(innermost_op(tuple(stack), markers), Tier.NCU_NVTX, ("op", rows[ri].ncu_id),
                                       resolve, "ncu NVTX range")
    return out


def nsys_enclosure_claims(
    kernels: Sequence[TimelineKernel], runtime_calls: Sequence[RuntimeCall], ranges: Sequence[NvtxRange],
    resolve: Resolver,
) -> list[Claim | None]:
    """Tier 3: innermost operator range open on the launching thread at launch time.

    A sweep per thread over ranges sorted by start and launches sorted by time keeps the
    set of open ranges (O(n log n) overall; the open set is only as deep as the nesting).
    The invocation is identified by its range (thread, start), unique even without op_id.
    """
    launch_by_corr = {r.correlation_id: r for r in runtime_calls if r.correlation_id is not None}
    # Each range text is parsed once (emit_nvtx texts carry unique op_ids: no cache would hit)
    # and the result reused by the claims below.
    parsed_of: dict[str, NvtxOp | None] = {}

    def parse(text: str) -> NvtxOp | None:
        if text not in parsed_of:
            parsed_of[text] = parse_nvtx_op(text)
        return parsed_of[text]

    by_tid: dict[int, list[NvtxRange]] = defaultdict(list)
    for rng in ranges:
        if rng.end_ns > rng.start_ns and (rng.text.startswith(COMPILED_MARKERS) or parse(rng.text) is not None):
            by_tid[rng.tid].append(rng)
    queries: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for j, k in enumerate(kernels):
        launch = launch_by_corr.get(k.correlation_id) if k.correlation_id is not None else None
        if launch is not None and launch.tid in by_tid:
            queries[launch.tid].append((launch.start_ns, j))
    out: list[Claim | None] = [None] * len(kernels)
    markers = compiled_markers(r.text for rs in by_tid.values() for r in rs)
    for tid, qs in queries.items():
        rs = sorted(by_tid[tid], key=lambda r: (r.start_ns, -r.end_ns))
        qs.sort()
        open_ranges: list[NvtxRange] = []
        i = 0
        for t, j in qs:
            while i < len(rs) and rs[i].start_ns <= t:
                open_ranges.append(rs[i])
                i += 1
            open_ranges = [r for r in open_ranges if r.end_ns > t]  # launches come in time order
            if not open_ranges:
                continue
            inner = open_ranges[-1]
            out[j] = claim_from_stack(innermost(tuple(r.text for r in open_ranges), parse, markers), Tier.NSYS_NVTX,
                                       ("nvtx", tid, inner.start_ns), resolve,
                                       "nsys NVTX range enclosing the launch")
    return out


def fusion_claims(kernels: Sequence[TimelineKernel], fusions: Mapping[str, FusionRecord],
                  resolve: Resolver) -> list[Claim | None]:
    """Tier 4: Inductor's own record of what a generated kernel computes."""
    out: list[Claim | None] = [None] * len(kernels)
    for j, k in enumerate(kernels):
        rec = fusions.get(k.name)
        if rec is None or not rec.aten_ops:
            continue
        prim, fused, _ = resolve(k.name)
        out[j] = Claim(Tier.INDUCTOR_FUSION, prim, ("kernel", j), None, None, fused, True, f"Inductor {rec.source}")
    return out
