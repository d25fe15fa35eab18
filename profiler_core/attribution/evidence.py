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
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from intervaltree import IntervalTree

from profiler_core.attribution.names import (
    clean_op_name,
    is_generated_kernel_name,
    is_operator_name,
    parse_nvtx_op,
)
from profiler_core.attribution.op_class import classify_operator
from profiler_core.records import CounterRow, CpuOp, FusionRecord, NvtxRange, RuntimeCall, TimelineKernel
from profiler_core.schema import OperatorClass, Tier

_VIEW_OPS = frozenset({
    "aten::view", "aten::reshape", "aten::_unsafe_view", "aten::t", "aten::transpose", "aten::permute",
    "aten::expand", "aten::clone", "aten::squeeze", "aten::unsqueeze", "aten::slice", "aten::select",
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


def primary_op(ops: Sequence[str]) -> str | None:
    """The op a fused kernel is filed under.

    The most significant class wins (attention > GEMM > ... > elementwise > copies), ties go
    to Inductor's topological order, and views come last:
    ``[aten.mul, aten.amax, aten.sub, aten.exp, aten._softmax]`` -> ``aten::_softmax``.
    """
    if not ops:
        return None
    ranked = sorted(enumerate(ops), key=lambda io: (
        io[1] in _VIEW_OPS, _CLASS_RANK[classify_operator(io[1])], io[1] not in _COMPOSITE_OPS, io[0]))
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


def _resolve_generated(name: str, fusions: Mapping[str, FusionRecord]) -> tuple[str, tuple[str, ...], str]:
    rec = fusions.get(name)
    if rec and rec.aten_ops:
        ops = rec.aten_ops
        how = f"ATen ops from Inductor {rec.source}"
    else:
        ops = ops_from_kernel_name(name)
        how = "ATen ops read from the generated kernel's name (no Inductor artifacts)"
    prim = primary_op(ops) or name
    return prim, tuple(o for o in ops if o != prim), how


def correlation_claims(
    kernels: Sequence[TimelineKernel],
    kineto_index: Sequence[int | None],
    kineto_kernels: Sequence[TimelineKernel],
    cpu_ops: Sequence[CpuOp],
    fusions: Mapping[str, FusionRecord],
    graph_launch_correlations: frozenset[int],
) -> list[Claim | None]:
    """Tier 1: Kineto External id -> launching cpu_op."""
    by_ext: dict[int, CpuOp] = {}
    for op in cpu_ops:
        if op.external_id is not None and op.category == "cpu_op":
            by_ext.setdefault(op.external_id, op)
    compiled_spans = _compiled_spans(cpu_ops)
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
            prim, fused, how = _resolve_generated(op.name, fusions)
            out[j] = Claim(Tier.CUPTI_CORRELATION, prim, ("ext", op.external_id), op.external_id,
                           op.input_shapes, fused, True, f"launched by '{op.name}'; {how}")
        elif is_operator_name(op.name):
            out[j] = Claim(Tier.CUPTI_CORRELATION, clean_op_name(op.name), ("ext", op.external_id),
                           op.external_id, op.input_shapes, (), compiled)
    return out


def _compiled_spans(cpu_ops: Sequence[CpuOp]) -> dict[int, tuple[list[int], list[int]]]:
    spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for op in cpu_ops:
        if op.name.startswith(_COMPILED_MARKERS):
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


def _claim_from_stack(stack: Sequence[str], tier: Tier, instance_prefix: tuple,
                      fusions: Mapping[str, FusionRecord], detail: str) -> Claim | None:
    compiled = any(s.startswith(_COMPILED_MARKERS) for s in stack)
    for text in reversed(stack):
        parsed = parse_nvtx_op(text)
        if parsed is None:
            continue
        inst = (*instance_prefix, parsed.op_id if parsed.op_id is not None else text)
        if is_generated_kernel_name(parsed.name):
            prim, fused, how = _resolve_generated(parsed.name, fusions)
            return Claim(tier, prim, inst, parsed.op_id, parsed.input_shapes, fused, True,
                         f"{detail} '{parsed.name}'; {how}")
        return Claim(tier, parsed.name, inst, parsed.op_id, parsed.input_shapes, (), compiled, detail)
    return None


def ncu_nvtx_claims(
    rows: Sequence[CounterRow], row_index: Sequence[int | None], measured: Sequence[bool],
    fusions: Mapping[str, FusionRecord],
) -> list[Claim | None]:
    """Tier 2: the NVTX stack ncu recorded for the measured launch itself (never inherited)."""
    out: list[Claim | None] = [None] * len(row_index)
    for j, ri in enumerate(row_index):
        if ri is None or not measured[j]:
            continue
        stack = rows[ri].nvtx_stack
        if stack:
            out[j] = _claim_from_stack(stack, Tier.NCU_NVTX, ("op",), fusions, "ncu NVTX range")
    return out


def nsys_enclosure_claims(
    kernels: Sequence[TimelineKernel], runtime_calls: Sequence[RuntimeCall], ranges: Sequence[NvtxRange],
    fusions: Mapping[str, FusionRecord],
) -> list[Claim | None]:
    """Tier 3: innermost operator range open on the launching thread at launch time."""
    launch_by_corr = {r.correlation_id: r for r in runtime_calls if r.correlation_id is not None}
    trees: dict[int, IntervalTree] = defaultdict(IntervalTree)
    for rng in ranges:
        if rng.end_ns > rng.start_ns and (
            parse_nvtx_op(rng.text) is not None or rng.text.startswith(_COMPILED_MARKERS)
        ):
            trees[rng.tid].addi(rng.start_ns, rng.end_ns, rng)
    out: list[Claim | None] = [None] * len(kernels)
    for j, k in enumerate(kernels):
        launch = launch_by_corr.get(k.correlation_id) if k.correlation_id is not None else None
        if launch is None or launch.tid not in trees:
            continue
        hits = sorted(trees[launch.tid].at(launch.start_ns), key=lambda iv: (iv.begin, -iv.end))
        if not hits:
            continue
        stack = [iv.data.text for iv in hits]
        claim = _claim_from_stack(stack, Tier.NSYS_NVTX, ("nvtx", launch.tid), fusions,
                                  "nsys NVTX range enclosing the launch")
        out[j] = claim
    return out


def fusion_claims(kernels: Sequence[TimelineKernel], fusions: Mapping[str, FusionRecord]) -> list[Claim | None]:
    """Tier 4: Inductor's own record of what a generated kernel computes."""
    out: list[Claim | None] = [None] * len(kernels)
    for j, k in enumerate(kernels):
        rec = fusions.get(k.name)
        if rec is None or not rec.aten_ops:
            continue
        prim = primary_op(rec.aten_ops)
        if prim is None:
            continue
        out[j] = Claim(Tier.INDUCTOR_FUSION, prim, ("kernel", j), None, None,
                       tuple(o for o in rec.aten_ops if o != prim), True, f"Inductor {rec.source}")
    return out
