"""Runtime-side rules: memory-bound chains, launch overhead, spills, casts, coverage.

    memory_bound_elementwise  consecutive DRAM-bound elementwise ops   -> elementwise_fusion
    launch_bound              many kernels shorter than their launch   -> cuda_graphs
    cast_overhead             dtype casts inside a compiled graph      -> freezing
    register_spills           local-memory wavefronts > 0              (note)
    high_unattributed         work that left the graph                 (structural)
    counters_missing          kernel time the counters never saw       (note)
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence

import numpy as np

from profiler_core.analysis.findings import Finding, FindingKind
from profiler_core.analysis.profile_view import CLASS_CODES, OperatorsAt
from profiler_core.analysis.rules import RuleContext, counter, fmt_pct, registers_fact, rule
from profiler_core.analysis.rules_serving import graphs_not_applicable
from profiler_core.attribution.columns import unique_ints
from profiler_core.attribution.operator_class import overhead_kind
from profiler_core.compile_mode import CUDA_GRAPH_MODES
from profiler_core.schema import ExecutionContext, Operator, OperatorClass
from profiler_core.transformations import Transformation

_MEMORY_CLASSES = frozenset({OperatorClass.ELEMENTWISE, OperatorClass.CAST_COPY})
_MEMORY_FIELDS = ("dram_throughput_pct", "sm_throughput_pct", "dram_bytes_read", "dram_bytes_written")
_SPILL_FIELDS = ("local_memory_wavefronts", "registers_per_thread", "achieved_occupancy_pct")


@rule("memory_bound_elementwise")
def memory_bound_elementwise(ctx: RuleContext) -> list[Finding]:
    """Chains of consecutive elementwise operators that each saturate DRAM and leave the SMs idle."""
    t = ctx.thresholds
    chains: list[list[Operator]] = []
    run: list[Operator] = []
    view, order = ctx.view, ctx.view.op_order
    # each operator's verdict, in launch order: a memory class, both counters known, DRAM busy, SMs not
    memory = np.isin(view.work_class_codes[order], [CLASS_CODES[c] for c in _MEMORY_CLASSES])
    bound_at = (memory & (view.op_counter_values("dram_throughput_pct")[order] >= t.memory_bound_dram_pct)
                & (view.op_counter_values("sm_throughput_pct")[order] < t.memory_bound_sm_max_pct))
    for i, (has_kernels, bound) in enumerate(zip((view.op_kernel_counts[order] > 0).tolist(), bound_at.tolist(),
                                                 strict=True)):
        if not has_kernels:
            continue  # views and other kernel-less ops neither extend nor break a chain
        if bound:
            run.append(ctx.ops[i])
            continue
        if len(run) >= t.elementwise_chain_min_ops:
            chains.append(run)
        run = []
    if len(run) >= t.elementwise_chain_min_ops:
        chains.append(run)
    if not chains:
        return []
    ops = [op for chain in chains for op in chain]
    agg = ctx.view.counters_of(ctx.view.kernels_of_ops(ops), _MEMORY_FIELDS)
    eager = sum(1 for op in ops if op.execution_context is ExecutionContext.EAGER)
    facts = [f"{len(chains)} chain(s), longest {max(len(c) for c in chains)} operators",
             *(" -> ".join(op.key for op in chain[:6]) for chain in chains[:3])]
    if eager:
        facts.append(f"{eager} of the operators run eagerly: compiling the region lets Inductor fuse them")
    return [ctx.finding(
        "memory_bound_elementwise",
        title="Memory-bound elementwise chains",
        kind=FindingKind.OPTIMIZATION,
        symptom=(f"{len(ops)} elementwise operators at DRAM throughput "
                 f"{fmt_pct(counter(agg, 'dram_throughput_pct'))} with SM throughput "
                 f"{fmt_pct(counter(agg, 'sm_throughput_pct'))}"),
        bottleneck="each operator streams its tensors through DRAM; the intermediates need not exist",
        ops=ops,
        transformation=Transformation.ELEMENTWISE_FUSION,
        facts=facts,
        counter_fields=_MEMORY_FIELDS,
        expected_shifts={"dram_bytes_read": "down"},
    )]


@rule("launch_bound")
def launch_bound(ctx: RuleContext) -> list[Finding]:
    """Most kernels are shorter than a launch, or launch-sized gaps fill much of the timeline."""
    t, view = ctx.thresholds, ctx.view
    cols = view.kernel_columns
    kernels = np.flatnonzero(cols.is_kernel)  # positions of the kernels proper (no copies, no memsets)
    if len(kernels) < t.launch_bound_min_kernels:
        return []
    if (view.profile.capture.compile_mode or "") in CUDA_GRAPH_MODES:
        return []
    if int(cols.in_graph[kernels].sum()) * 2 > len(kernels):
        return []  # already replayed from CUDA graphs
    gap_ns = view.launch_gaps_ns(kernels, int(t.launch_gap_max_us * 1000))
    if gap_ns <= 0:
        return []  # the GPU never waited: short kernels, but not launch-bound
    tiny = kernels[cols.duration[kernels] < t.launch_bound_kernel_us * 1000]
    tiny_pct = 100.0 * len(tiny) / len(kernels)
    if tiny_pct < t.launch_bound_min_kernel_pct:
        return _gap_bound(ctx, kernels, gap_ns)
    median_us = statistics.median(cols.duration[tiny].tolist()) / 1000
    return _launch_finding(
        ctx, tiny, gap_ns, title="Launch-bound: many tiny kernels",
        symptom=(f"{len(tiny)} of {len(kernels)} kernels ({tiny_pct:.0f}%) run under "
                 f"{t.launch_bound_kernel_us:g} us (median {median_us:.1f} us)"),
        bottleneck="CPU launch latency, not GPU work, sets the pace: the GPU idles between kernels",
        facts=[f"{gap_ns / 1000:.1f} us of idle gaps (each <= {t.launch_gap_max_us:g} us) between kernels",
               "the bound is on the timeline (kernel time + those gaps): graphs remove gaps, not kernels"])


def _gap_bound(ctx: RuleContext, kernels: np.ndarray, gap_ns: int) -> list[Finding]:
    """Kernels of ordinary length, but the host launches them slower than the GPU runs them.

    A convolution network's cuDNN calls cost the host more than a Triton launch: the GPU waits
    in short gaps between kernels that are themselves not tiny. ``kernels``: their positions.
    """
    t = ctx.thresholds
    durations = ctx.view.kernel_durations[kernels]
    busy_ns = int(durations.sum())
    gap_pct = 100.0 * gap_ns / (busy_ns + gap_ns)
    if gap_pct < t.launch_gap_min_pct:
        return []
    median_us = statistics.median(durations.tolist()) / 1000
    return _launch_finding(
        ctx, kernels, gap_ns, title="Launch-bound: the GPU waits between kernels",
        symptom=(f"the GPU idles {gap_pct:.0f}% of the timeline in gaps of at most {t.launch_gap_max_us:g} us "
                 f"between {len(kernels)} kernels (median kernel {median_us:.1f} us; >= "
                 f"{t.launch_gap_min_pct:g}%)"),
        bottleneck="the host launches kernels slower than the GPU runs them: each call's host work "
                   "(Python, dispatch, library setup) outlasts the kernel it launches",
        facts=[f"{gap_ns / 1000:.1f} us of idle gaps (each <= {t.launch_gap_max_us:g} us) beside "
               f"{busy_ns / 1000:.1f} us of kernels",
               "the bound is on the timeline (kernel time + those gaps): graphs remove gaps, not kernels; "
               "the profiler lengthens host time, so the end-to-end timing decides"])


def _launch_finding(ctx: RuleContext, kernels: np.ndarray, gap_ns: int, *, title: str, symptom: str,
                    bottleneck: str, facts: list[str]) -> list[Finding]:
    """The launch_bound finding over the kernels at positions ``kernels`` (and their operators, in the
    order their first kernel comes), bound by the gaps on the timeline."""
    owners = ctx.view.kernel_owner_rows[kernels]
    owners = owners[owners >= 0]
    rows, first = unique_ints(owners, index=True)
    view, rows = ctx.view, rows[np.argsort(first)]
    ops: Sequence[Operator]
    if view.keys_repeat:  # the first operator of each key
        every = view.operators
        ops = list({op.key: op for op in (every[g] for g in rows.tolist())}.values())
        phases = {op.phase for op in ops}
    else:  # their models built only when read
        ops = OperatorsAt(view.operators, rows)
        phase_of = view.op_column("phase")
        phases = {phase_of[g] for g in rows.tolist()}
    # A training step launching short kernels in every phase: graph the whole step, optimizer included.
    whole_step = phases >= {"forward", "backward", "optimizer"}
    if whole_step:
        facts = [*facts, "the short kernels span forward, backward and the optimizer's step"]
    blocked = graphs_not_applicable(ctx)
    graphs = Transformation.WHOLE_STEP_CUDA_GRAPHS if whole_step else Transformation.CUDA_GRAPHS
    return [ctx.finding(
        "launch_bound", title=title, kind=FindingKind.STRUCTURAL if blocked else FindingKind.OPTIMIZATION,
        symptom=symptom, bottleneck=bottleneck, ops=ops, kernel_positions=kernels,
        facts=[*facts, *([blocked] if blocked else [])],
        transformation=None if blocked else graphs,
        alternatives=[Transformation.CUDA_GRAPHS] if whole_step and not blocked else (),
        counter_fields=("achieved_occupancy_pct", "sm_throughput_pct"),
        gain_ns=gap_ns, gain_basis="timeline", gain_whole_ns=ctx.view.total_ns + gap_ns,
    )]


@rule("cast_overhead")
def cast_overhead(ctx: RuleContext) -> list[Finding]:
    """dtype casts inside a compiled graph: freezing folds the casts of weights into constants."""
    view = ctx.view
    casts = (ctx.of_class(OperatorClass.CAST_COPY)
             & view.op_flags(ctx.ops, "execution_context", lambda c: c is ExecutionContext.COMPILED_GRAPH)
             & view.op_flags(ctx.ops, ("name", "fused_with"), lambda name, fused: overhead_kind(name, fused) == "cast"))
    ops = [ctx.ops[i] for i in np.flatnonzero(casts).tolist()]
    kernels = ctx.view.kernels_of_ops(ops)
    share = ctx.view.share_pct(int(ctx.view.durations_in(kernels).sum()))
    if not ops or share < ctx.thresholds.cast_overhead_pct:
        return []
    return [ctx.finding(
        "cast_overhead",
        title="dtype casts inside the compiled graph",
        kind=FindingKind.OPTIMIZATION,
        symptom=f"{len(ops)} cast operators take {share:.1f}% of kernel time",
        bottleneck="weights (or activations) are converted on every call",
        ops=ops,
        transformation=Transformation.FREEZING,
        facts=["freezing folds casts of parameters into constants; casts of activations remain "
               "unless their producer emits the target dtype"],
        counter_fields=("dram_bytes_read", "dram_bytes_written", "dram_throughput_pct"),
    )]


@rule("register_spills")
def register_spills(ctx: RuleContext) -> list[Finding]:
    """Operators whose kernels spill registers to local memory."""
    limit = ctx.thresholds.spill_wavefronts_min
    # each operator's wavefronts in launch order, read at once (None as 0, as ``op_counter(...) or 0``)
    wavefronts = ctx.view.op_counter_values("local_memory_wavefronts")[ctx.view.op_order]
    spilling = np.flatnonzero(np.where(np.isnan(wavefronts), 0.0, wavefronts) > limit).tolist()
    ops = [ctx.ops[i] for i in spilling]
    if not ops:
        return []
    agg = ctx.view.counters_of(ctx.view.kernels_of_ops(ops), _SPILL_FIELDS)
    return [ctx.finding(
        "register_spills",
        title="Register spills to local memory",
        kind=FindingKind.NOTE,
        symptom=(f"{len(ops)} operators issue {counter(agg, 'local_memory_wavefronts') or 0:,.0f} "
                 "local-memory wavefronts"),
        bottleneck="register pressure: spilled values round-trip through L1/L2",
        ops=ops,
        facts=[registers_fact(ctx.view, ctx.view.kernels_of_ops(ops)),
               "a smaller tile, fewer live values, or a lower-precision type reduces the pressure"],
        counter_fields=_SPILL_FIELDS,
        expected_shifts={"local_memory_wavefronts": "down"},
    )]


@rule("high_unattributed", always_reported=True)
def high_unattributed(ctx: RuleContext) -> list[Finding]:
    """A large share of kernel time maps to no operator: the work left the graph."""
    view = ctx.view
    share = view.share_pct(view.unattributed_ns)
    if share < ctx.thresholds.high_unattributed_pct:
        return []
    kernels = view.unattributed_kernels
    classes: Counter[str] = Counter()
    for k in kernels:
        classes[view.kernel_class(k).value] += k.duration_ns
    reasons = Counter(u.reason for u in view.profile.unattributed)
    facts = ["by class: " + ", ".join(f"{c} {view.share_pct(ns):.1f}%" for c, ns in classes.most_common(4))]
    if reasons:
        facts.append("reasons: " + "; ".join(f"{r} x{n}" for r, n in reasons.most_common(3)))
    facts.append("graph passes can't reach this time; look at the library call or dispatch path")
    return [ctx.finding(
        "high_unattributed",
        title="The work left the graph",
        kind=FindingKind.STRUCTURAL,
        symptom=f"{share:.1f}% of kernel time maps to no operator",
        bottleneck="kernels launched from outside the graph (an opaque library call, a custom extension)",
        kernels=kernels,
        facts=facts,
        gain_ns=view.unattributed_ns,
    )]


@rule("counters_missing", always_reported=True)
def counters_missing(ctx: RuleContext) -> list[Finding]:
    """Kernel time without hardware counters: every counter-based rule is blind there."""
    view = ctx.view
    at = np.flatnonzero(view.counterless_mask)
    share = view.share_pct(int(view.kernel_durations[at].sum()))
    if not len(at) or share < ctx.thresholds.counters_missing_pct:
        return []
    return [ctx.finding(
        "counters_missing",
        title="Counters missing on part of the time",
        kind=FindingKind.NOTE,
        symptom=f"{share:.1f}% of kernel time carries no hardware counters",
        bottleneck="unknown: counter-based rules cannot judge these kernels",
        kernel_positions=at,
        facts=["re-run the counter phase (ncu) over the same region to cover them"],
        gain_ns=0,
    )]
