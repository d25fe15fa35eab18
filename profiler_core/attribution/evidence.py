"""The evidence tiers' shared vocabulary: what each source says launched a kernel.

A tier's statement about one kernel is a :class:`Claim`. Tiers are recorded side by side and
never averaged; the engine picks the strongest:

1. CUPTI correlation (Kineto): the kernel's ``External id`` is the launching ``cpu_op``'s.
2. ncu NVTX: the push/pop stack ncu recorded for that very launch (``--nvtx``).
3. nsys NVTX enclosure: the innermost operator range open on the launching host thread at
   the host-side launch time (runtime API record joined by correlation id). GPU time is
   useless here: the kernel runs after the range closed.
4. Inductor fusion map: kernel name -> constituent ATen ops (provenance, else comments).

The tiers run on columns (tier_columns.py: 1, 2 and 4; enclosure.py: 3). This module holds
what they share: the compiled-region markers, the innermost operator range of a stack and its
claim, and the resolver naming a generated kernel's operator. The tests keep the tiers'
record-by-record form as the reference the columns are checked against
(tests/attribution/object_evidence.py).

A Triton kernel's launching cpu_op (and its NVTX range) is named after the kernel itself;
its operator identity comes from the fusion map, else from the fused ops spelled in its name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from profiler_core.attribution.names import (
    NvtxOp,
    is_generated_kernel_name,
    parse_nvtx_op,
)
from profiler_core.attribution.operator_class import classify_operator, triton_ops
from profiler_core.records import (
    FusionRecord,
    InductorCall,
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
COMPILED_MARKERS = ("Torch-Compiled Region", "## Call CompiledFxGraph", "CompiledFunction")
# The compiled graph itself: ops inside one ran compiled. Dynamo's "Torch-Compiled Region" wraps the
# whole frame, including the eager code it resumes after a graph break, so where a capture shows
# graph calls, an op inside the region but outside every graph call ran eagerly.
GRAPH_CALL_MARKERS = ("## Call CompiledFxGraph", "CompiledFunction")


def compiled_markers(texts: Iterable[str]) -> tuple[str, ...]:
    """The range names that mean "compiled" in this capture (see GRAPH_CALL_MARKERS)."""
    return GRAPH_CALL_MARKERS if any(t.startswith(GRAPH_CALL_MARKERS) for t in texts) else COMPILED_MARKERS


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


Resolver = Callable[[str], tuple[str, tuple[str, ...], str]]


def extern_classes_of(calls: Iterable[InductorCall]) -> frozenset[OperatorClass]:
    """The classes of work a compiled graph ran as library calls (all of them when unknown)."""
    seen = {classify_operator(c.name) for c in calls if c.kind == "extern"}
    return frozenset(seen & EXTERN_CLASSES) if seen else EXTERN_CLASSES


def make_resolver(fusions: Mapping[str, FusionRecord],
                  extern_classes: frozenset[OperatorClass] = EXTERN_CLASSES) -> Resolver:
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


def innermost(stack: tuple[str, ...], parse: Callable[[str], NvtxOp | None],
               markers: tuple[str, ...] = COMPILED_MARKERS) -> tuple[int, NvtxOp, bool] | None:
    """(depth, parsed range, inside a compiled graph) of a stack's innermost operator range."""
    compiled = any(t.startswith(markers) for t in stack)
    for depth in range(len(stack) - 1, -1, -1):
        parsed = parse(stack[depth])
        if parsed is not None:
            return depth, parsed, compiled
    return None


@functools.lru_cache(maxsize=65536)
def innermost_op(stack: tuple[str, ...], markers: tuple[str, ...]) -> tuple[int, NvtxOp, bool] | None:
    return innermost(stack, parse_nvtx_op, markers)


def claim_from_stack(found: tuple[int, NvtxOp, bool] | None, tier: Tier, instance: tuple,
                      resolve: Resolver, detail: str) -> Claim | None:
    """The innermost operator range of a stack (``found``, from :func:`innermost`) as a claim.

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
