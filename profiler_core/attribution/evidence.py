"""The evidence tiers: what each source says launched a kernel.

Each function returns, per timeline kernel (same indexing), a :class:`Claim` or None.
Tiers are recorded side by side and never averaged; the engine picks the strongest.

1. CUPTI correlation (Kineto): the kernel's ``External id`` is the launching ``cpu_op``'s.
2. ncu NVTX: the push/pop stack ncu recorded for that very launch (``--nvtx``).
3. nsys NVTX enclosure: the innermost operator range open on the launching host thread at
   the host-side launch time (runtime API record joined by correlation id), via per-thread
   interval trees. GPU time is useless here: the kernel runs after the range closed.
4. Inductor fusion map: kernel name -> constituent ATen ops (provenance, else comments).

A Triton kernel's launching cpu_op (and its NVTX range) is named after the kernel itself;
its operator identity comes from the fusion map, else from the fused ops spelled in its name.
"""

from __future__ import annotations

import bisect
import functools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from profiler_core.attribution.collective import collective_operator
from profiler_core.attribution.names import (
    NvtxOp,
    clean_op_name,
    is_generated_kernel_name,
    is_operator_name,
    parse_nvtx_op,
)
from profiler_core.attribution.operator_class import classify_operator, triton_ops
from profiler_core.records import (
    CounterRow,
    CpuOp,
    FusionRecord,
    InductorCall,
    NvtxRange,
    RuntimeCall,
    TimelineKernel,
)
from profiler_core.schema import OperatorClass, Tier

# Ops that only reinterpret a tensor's layout: they launch no kernel of their own, so a fused
# kernel is filed under one only when nothing else is in it (clone and contiguous do copy).
_VIEW_OPS = frozenset({
    "aten::view", "aten::reshape", "aten::_unsafe_view", "aten::t", "aten::transpose", "aten::permute",
    "aten::expand", "aten::squeeze", "aten::unsqueeze", "aten::slice", "aten::select",
    "aten::as_strided", "aten::alias", "aten::detach", "aten::split", "aten::split_with_sizes",
})
# Composite ops Inductor decomposes: when one is in a fusion it names the kernel better than
# its parts (amax/sub/exp/sum of a softmax, mean/rsqrt of a layer norm).
_COMPOSITE_OPS = frozenset({
    "aten::_softmax", "aten::softmax", "aten::_log_softmax", "aten::log_softmax", "aten::native_layer_norm",
    "aten::layer_norm", "aten::rms_norm", "aten::_fused_rms_norm", "aten::native_group_norm", "aten::gelu",
    "aten::silu", "aten::native_batch_norm", "aten::_native_batch_norm_legit_no_training",
})
_COMPILED_MARKERS = ("Torch-Compiled Region", "## Call CompiledFxGraph", "CompiledFunction")
# The compiled graph itself: ops inside one ran compiled. Dynamo's "Torch-Compiled Region" wraps the
# whole frame, including the eager code it resumes after a graph break, so where a capture shows
# graph calls, an op inside the region but outside every graph call ran eagerly.
_GRAPH_CALL_MARKERS = ("## Call CompiledFxGraph", "CompiledFunction")


def _compiled_markers(texts: Iterable[str]) -> tuple[str, ...]:
    """The range names that mean "compiled" in this capture (see _GRAPH_CALL_MARKERS)."""
    return _GRAPH_CALL_MARKERS if any(t.startswith(_GRAPH_CALL_MARKERS) for t in texts) else _COMPILED_MARKERS


@dataclass(frozen=True, slots=True)
class Claim:
    """One tier's statement about one kernel."""

    tier: Tier
    operator: str  # clean name
    instance: tuple  # identity of the operator invocation within this tier
    op_id: int | None = None
    input_shapes: tuple | None = None
    fused_with: tuple[str, ...] = ()
    compiled: bool | None = None  # ran inside a compiled region, if the tier can tell
    detail: str | None = None


_CLASS_RANK = {c: i for i, c in enumerate((
    OperatorClass.ATTENTION, OperatorClass.GEMM, OperatorClass.CONVOLUTION, OperatorClass.RNN,
    OperatorClass.NORMALIZATION, OperatorClass.REDUCTION, OperatorClass.COMMUNICATION,
    OperatorClass.ELEMENTWISE, OperatorClass.OTHER, OperatorClass.CAST_COPY,
))}


# Classes whose compute Inductor leaves to a library (cuBLAS, cuDNN, the SDPA kernels) unless it
# writes a template for it: a pointwise or reduction kernel naming such an op holds its epilogue.
EXTERN_CLASSES = frozenset({OperatorClass.GEMM, OperatorClass.CONVOLUTION, OperatorClass.ATTENTION,
                            OperatorClass.RNN})
_TEMPLATE_KINDS = frozenset({"tem", "mm", "bmm"})  # triton_tem_fused_addmm_0: the GEMM runs here


def primary_op(ops: Sequence[str], kernel_name: str | None = None,
               extern_classes: frozenset[OperatorClass] = EXTERN_CLASSES) -> str | None:
    """The op a fused kernel is filed under: the one doing the kernel's work.

    Ops whose compute ran in another kernel are left out first: a pointwise or reduction
    Triton kernel (not a template) that names ``aten::addmm`` holds the bias add of a GEMM
    that cuBLAS ran (``extern_classes``: the classes the graph ran as library calls). Of the
    rest, the most significant class wins (attention > GEMM > ... > elementwise > copies),
    ties go to composites and then Inductor's topological order, and views come last:
    ``[aten.mul, aten.amax, aten.sub, aten.exp, aten._softmax]`` -> ``aten::_softmax``;
    ``triton_poi_fused_addmm_gelu_view_6`` with ``[aten.addmm, aten.view, aten.gelu]`` -> ``aten::gelu``.
    """
    if not ops:
        return None
    triton = triton_ops(kernel_name) if kernel_name else None
    if triton is not None and triton[0] not in _TEMPLATE_KINDS:
        own = [op for op in ops if classify_operator(op) not in extern_classes]
        ops = own or ops  # a kernel made only of such ops computes it (a decomposed small GEMM)
    # a prims:: op is a piece of an aten op's decomposition: the aten op it came from names the work;
    # a backward kernel that recomputes its forward op (a layer norm's statistics) does the backward
    ranked = sorted(enumerate(ops), key=lambda io: (
        io[1] in _VIEW_OPS, io[1].startswith("prims::"), _CLASS_RANK[classify_operator(io[1])],
        "_backward" not in io[1], io[1] not in _COMPOSITE_OPS, io[0]))
    return ranked[0][1]


# Op names that span several "_"-separated tokens of a generated kernel name, longest first.
_MULTI_TOKEN_OPS = tuple(sorted((
    "native_layer_norm", "layer_norm", "native_batch_norm", "batch_norm", "native_group_norm", "group_norm",
    "rms_norm", "_fused_rms_norm", "_softmax", "_log_softmax", "log_softmax", "clamp_min", "clamp_max",
    "index_select", "_to_copy", "native_dropout", "scaled_dot_product_attention", "masked_fill",
    "embedding_dense_backward", "_unsafe_view", "constant_pad_nd", "new_zeros", "full_like", "zeros_like",
    "ones_like", "index_put", "scatter_add", "slice_scatter", "select_scatter", "as_strided", "bitwise_and",
    "bitwise_or", "bitwise_not", "logical_and", "logical_not", "leaky_relu", "hardtanh", "sigmoid_backward",
    "tanh_backward", "threshold_backward", "gelu_backward", "_native_batch_norm_legit_no_training",
), key=lambda op: -op.count("_")))


def ops_from_kernel_name(name: str) -> tuple[str, ...]:
    """``triton_per_fused_native_layer_norm_relu_6`` -> ("aten::native_layer_norm", "aten::relu").

    Inductor joins op names with "_", so multi-token names are matched greedily against a
    list of known ones; the evidence says the ops were read from the name.
    """
    if "_fused_" not in name:
        return ()
    body = name.split("_fused_", 1)[1]
    head, _, tail = body.rpartition("_")
    if tail.isdigit():
        body = head
    ops: list[str] = []
    pos = 0
    while pos < len(body):
        rest = body[pos:]
        match = next((op for op in _MULTI_TOKEN_OPS if rest == op or rest.startswith(op + "_")), None)
        if match is None:
            lead = "_" if rest.startswith("_") else ""
            match = lead + rest[len(lead):].split("_", 1)[0]
        if match.strip("_"):
            ops.append(f"aten::{match}")
        pos += len(match) + 1
    return tuple(ops)


_Resolver = Callable[[str], tuple[str, tuple[str, ...], str]]


def extern_classes_of(calls: Iterable[InductorCall]) -> frozenset[OperatorClass]:
    """The classes of work a compiled graph ran as library calls (all of them when unknown)."""
    seen = {classify_operator(c.name) for c in calls if c.kind == "extern"}
    return frozenset(seen & EXTERN_CLASSES) if seen else EXTERN_CLASSES


def make_resolver(fusions: Mapping[str, FusionRecord],
                  extern_classes: frozenset[OperatorClass] = EXTERN_CLASSES) -> _Resolver:
    """A cached ``kernel name -> (primary op, other fused ops, how we know)`` for one capture."""
    cache: dict[str, tuple[str, tuple[str, ...], str]] = {}

    def resolve(name: str) -> tuple[str, tuple[str, ...], str]:
        hit = cache.get(name)
        if hit is None:
            hit = cache[name] = _resolve_generated(name, fusions, extern_classes)
        return hit

    return resolve


def _resolve_generated(name: str, fusions: Mapping[str, FusionRecord],
                       extern_classes: frozenset[OperatorClass]) -> tuple[str, tuple[str, ...], str]:
    rec = fusions.get(name)
    if rec and rec.aten_ops:
        ops = rec.aten_ops
        how = f"ATen ops from Inductor {rec.source}"
    else:
        ops = ops_from_kernel_name(name)
        how = "ATen ops read from the generated kernel's name (no Inductor artifacts)"
    prim = primary_op(ops, name, extern_classes) or name
    return prim, tuple(o for o in ops if o != prim), how


def correlation_claims(
    kernels: Sequence[TimelineKernel],
    kineto_index: Sequence[int | None],
    kineto_kernels: Sequence[TimelineKernel],
    cpu_ops: Sequence[CpuOp],
    resolve: _Resolver,
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
    compiled_spans = _compiled_spans(cpu_ops, _compiled_markers(op.name for op in cpu_ops))
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


def _innermost(stack: tuple[str, ...], parse: Callable[[str], NvtxOp | None],
               markers: tuple[str, ...] = _COMPILED_MARKERS) -> tuple[int, NvtxOp, bool] | None:
    """(depth, parsed range, inside a compiled graph) of a stack's innermost operator range."""
    compiled = any(t.startswith(markers) for t in stack)
    for depth in range(len(stack) - 1, -1, -1):
        parsed = parse(stack[depth])
        if parsed is not None:
            return depth, parsed, compiled
    return None


@functools.lru_cache(maxsize=65536)
def _innermost_op(stack: tuple[str, ...], markers: tuple[str, ...]) -> tuple[int, NvtxOp, bool] | None:
    return _innermost(stack, parse_nvtx_op, markers)


def _claim_from_stack(found: tuple[int, NvtxOp, bool] | None, tier: Tier, instance: tuple,
                      resolve: _Resolver, detail: str) -> Claim | None:
    """The innermost operator range of a stack (``found``, from :func:`_innermost`) as a claim.

    ``instance`` identifies the invocation; the operator's op_id replaces it when present.
    """
    if found is None:
        return None
    depth, parsed, compiled = found
    inst = (*instance, depth) if parsed.op_id is None else (instance[0], parsed.op_id)
    if is_generated_kernel_name(parsed.name):
        prim, fused, how = resolve(parsed.name)
        return Claim(tier, prim, inst, parsed.op_id, parsed.input_shapes, fused, True,
                     f"{detail} '{parsed.name}'; {how}")
    return Claim(tier, parsed.name, inst, parsed.op_id, parsed.input_shapes, (), compiled, detail)


def ncu_nvtx_claims(
    rows: Sequence[CounterRow], row_index: Sequence[int | None], measured: Sequence[bool], resolve: _Resolver,
) -> list[Claim | None]:
    """Tier 2: the NVTX stack ncu recorded for the measured launch itself (never inherited)."""
    out: list[Claim | None] = [None] * len(row_index)
    markers = _compiled_markers(t for r in rows for t in (r.nvtx_stack or ()))
    for j, ri in enumerate(row_index):
        if ri is None or not measured[j]:
            continue
        stack = rows[ri].nvtx_stack
        if stack:
            out[j] = _claim_from_stack(_innermost_op(tuple(stack), markers), Tier.NCU_NVTX, ("op", rows[ri].ncu_id),
                                       resolve, "ncu NVTX range")
    return out


def nsys_enclosure_claims(
    kernels: Sequence[TimelineKernel], runtime_calls: Sequence[RuntimeCall], ranges: Sequence[NvtxRange],
    resolve: _Resolver,
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
        if rng.end_ns > rng.start_ns and (rng.text.startswith(_COMPILED_MARKERS) or parse(rng.text) is not None):
            by_tid[rng.tid].append(rng)
    queries: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for j, k in enumerate(kernels):
        launch = launch_by_corr.get(k.correlation_id) if k.correlation_id is not None else None
        if launch is not None and launch.tid in by_tid:
            queries[launch.tid].append((launch.start_ns, j))
    out: list[Claim | None] = [None] * len(kernels)
    markers = _compiled_markers(r.text for rs in by_tid.values() for r in rs)
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
            out[j] = _claim_from_stack(_innermost(tuple(r.text for r in open_ranges), parse, markers), Tier.NSYS_NVTX,
                                       ("nvtx", tid, inner.start_ns), resolve,
                                       "nsys NVTX range enclosing the launch")
    return out


def fusion_claims(kernels: Sequence[TimelineKernel], fusions: Mapping[str, FusionRecord],
                  resolve: _Resolver) -> list[Claim | None]:
    """Tier 4: Inductor's own record of what a generated kernel computes."""
    out: list[Claim | None] = [None] * len(kernels)
    for j, k in enumerate(kernels):
        rec = fusions.get(k.name)
        if rec is None or not rec.aten_ops:
            continue
        prim, fused, _ = resolve(k.name)
        out[j] = Claim(Tier.INDUCTOR_FUSION, prim, ("kernel", j), None, None, fused, True, f"Inductor {rec.source}")
    return out
