"""Compute-side rules: Tensor Cores idle, parallel projections, manual attention, recurrences.

    tensor_core_idle        FP32 GEMMs with the Tensor Core pipe idle  -> bf16_promotion (or tf32)
    parallel_projections    low-occupancy GEMMs reading one input     -> qkv_fusion
    manual_attention        bmm -> (scale) -> softmax -> bmm           -> sdpa
    recurrent_region        unrolled tiny split-K GEMM loop, or opaque RNN time -> rnn_reroute (structural)
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from profiler_core.analysis.findings import Finding, FindingKind
from profiler_core.analysis.patterns import (
    gemm_rows,
    manual_attention_groups,
    parallel_projection_groups,
    same_shape_gemm_runs,
)
from profiler_core.analysis.profile_view import (
    CLASS_CODES,
    KernelsAt,
    OperatorsAt,
    ProfileView,
    busy_and_span_ns,
    idle_inside_pct,
    pct,
)
from profiler_core.analysis.rules import RuleContext, counter, fmt_pct, registers_fact, rule
from profiler_core.analysis.rules_serving import decode_loop_of
from profiler_core.attribution.columns import unique_ints
from profiler_core.attribution.operator_class import gemm_precision
from profiler_core.schema import ExecutionContext, Kernel, Operator, OperatorClass
from profiler_core.transformations import Transformation

_GEMM_FIELDS = ("tensor_core_active_pct", "achieved_occupancy_pct", "sm_throughput_pct",
                "dram_throughput_pct", "registers_per_thread")
_SPLIT_K = re.compile(r"split_k|splitk", re.I)
_SPLIT_K_EPILOGUE = re.compile(r"splitkreduce|split_?k_?reduce|reduce_?split_?k", re.I)  # a kernel of its own


@rule("tensor_core_idle")
def tensor_core_idle(ctx: RuleContext) -> list[Finding]:
    """GEMMs whose Tensor Core pipe is (nearly) idle and whose kernels are not reduced precision."""
    limit = ctx.thresholds.tensor_core_idle_pct
    idle: Sequence[Operator] = []
    precisions = Counter[str]()
    view, order = ctx.view, ctx.view.op_order
    # GEMMs at or under the limit (an operator without the counter is NaN, under nothing), in launch order
    gemm = view.work_class_codes[order] == CLASS_CODES[OperatorClass.GEMM]
    low = view.op_counter_values("tensor_core_active_pct")[order] <= limit
    candidates = np.flatnonzero(gemm & low)
    at = view.own_kernel_positions(order[candidates])
    if at is not None:  # each candidate's kernel precisions, read off the name codes
        positions, sizes = at
        names = view.kernel_names
        code = {"fp32": 1}  # 0: no precision in the name, 1: fp32, 2: a reduced one
        by_name = np.array([code.get(p, 2) if (p := gemm_precision(n)) is not None else 0 for n in names] + [0],
                           dtype=np.int64)
        kinds = by_name[view.kernel_name_codes[positions]]
        grp = np.repeat(np.arange(len(candidates)), sizes)
        reduced = np.bincount(grp[kinds == 2], minlength=len(candidates)) > 0
        fp32 = np.bincount(grp[kinds == 1], minlength=len(candidates)) > 0
        # already reduced precision: the FP32 premise does not hold
        idle = OperatorsAt(view.operators, order[candidates[~reduced]]) if not view.keys_repeat \
            else [ctx.ops[i] for i in candidates[~reduced].tolist()]
        precisions.update(["fp32" if f else "unknown" for f in fp32[~reduced].tolist()])
    else:
        kept: list[Operator] = []
        for i in candidates.tolist():
            op = ctx.ops[i]
            found = {p for name in view.names_in(view.kernels_of(op)) if (p := gemm_precision(name)) is not None}
            if found - {"fp32"}:
                continue  # already reduced precision: the FP32 premise does not hold
            kept.append(op)
            precisions.update(found or {"unknown"})
        idle = kept
    if not idle:
        return []
    kernels = ctx.view.kernels_of_ops(idle)
    agg = ctx.view.counters_of(kernels, _GEMM_FIELDS)
    all_gemm_ns = ctx.view.gemm_kernel_ns()
    idle_ns = ctx.view.gemm_kernel_ns(kernels)
    precision_text = ", ".join(f"{p} x{n}" for p, n in precisions.most_common())
    training = bool(view.op_mask("phase", lambda phase: phase == "backward").any())
    return [ctx.finding(
        "tensor_core_idle",
        title="Tensor Cores idle on FP32 GEMMs",
        kind=FindingKind.OPTIMIZATION,
        symptom=(f"{len(idle)} GEMM operators run with tensor_core_active_pct "
                 f"{fmt_pct(counter(agg, 'tensor_core_active_pct'))} (<= {limit:g}%)"),
        bottleneck="GEMMs on the FP32 SIMT path: the Tensor Cores do no work",
        ops=idle,
        kernels=kernels,
        # A training step runs under autocast first, as the recipe a user writes: the elementwise work
        # between GEMMs stays bf16 too, where bf16_promotion casts each GEMM's output back to FP32 (on the
        # H200 GPT-2 step, both with the whole step graphed: autocast 4.00 ms, bf16_promotion 4.61 ms).
        transformation=Transformation.BF16_AUTOCAST if training else Transformation.BF16_PROMOTION,
        alternatives=([Transformation.BF16_PROMOTION] if training else []) + [Transformation.TF32],
        facts=[
            f"GEMM precision read from kernel names: {precision_text}",
            f"these GEMMs hold {pct(idle_ns, all_gemm_ns):.1f}% of all GEMM-kernel time",
            registers_fact(ctx.view, kernels),
        ],
        counter_fields=_GEMM_FIELDS,
        expected_shifts={"tensor_core_active_pct": "up"},
    )]


_LISTED_GROUPS = 6  # parallel projection groups a finding names one by one


@rule("parallel_projections")
def parallel_projections(ctx: RuleContext) -> list[Finding]:
    """Side-by-side projection GEMMs reading one input, each too small to fill the GPU."""
    t = ctx.thresholds
    groups = parallel_projection_groups(ctx.view, ctx.ops, min_size=t.min_parallel_projections,
                                        max_size=t.max_parallel_projections)
    view = ctx.view
    parts: list[Sequence[Operator]] = []
    facts: list[str] = []
    sizes = Counter[int]()
    op_groups = [view.operators_in_order_at(group) for group in groups]  # models built when read
    aggregates = view.counters_of_op_sets(op_groups, ("achieved_occupancy_pct",))  # all a group is judged by
    shapes_of = view.op_column("input_shapes", ctx.ops)
    for group, ops, agg in zip(groups, op_groups, aggregates, strict=True):
        occupancy = counter(agg, "achieved_occupancy_pct")
        if occupancy is None or occupancy >= t.low_occupancy_pct:
            continue
        parts.append(ops)
        sizes[len(ops)] += 1
        if len(facts) == _LISTED_GROUPS:
            continue  # the finding lists the first groups
        shapes = shapes_of[group[0]]
        facts.append(f"{' + '.join(view.keys_of(ops))}: one input signature"
                     f"{f' {shapes}' if shapes else ''}, occupancy {fmt_pct(occupancy)}")
    if not parts:
        return []
    chosen = view.joined(parts)
    n_groups = len(parts)
    size_text = (f"{n_groups} group(s) of {next(iter(sizes))}" if len(sizes) == 1 else f"{n_groups} groups ("
                 + ", ".join(f"{n} of {size}" for size, n in sorted(sizes.items(), reverse=True)) + ")")
    facts = [f"{size_text} parallel projections; shared input inferred from "
             "identical input shapes (or identical launches)", *facts]
    agg = ctx.view.counters_of(ctx.view.kernels_of_ops(chosen), _GEMM_FIELDS)
    return [ctx.finding(
        "parallel_projections",
        title="Low occupancy on parallel projection GEMMs",
        kind=FindingKind.OPTIMIZATION,
        symptom=(f"{len(chosen)} projection GEMMs in {size_text} read one input at "
                 f"achieved occupancy {fmt_pct(counter(agg, 'achieved_occupancy_pct'))} "
                 f"(< {t.low_occupancy_pct:g}%)"),
        bottleneck="each projection is too narrow to fill the SMs; launched separately they never overlap",
        ops=chosen,
        transformation=Transformation.QKV_FUSION,
        facts=facts,
        counter_fields=_GEMM_FIELDS,
        expected_shifts={"achieved_occupancy_pct": "up"},
    )]


@rule("manual_attention")
def manual_attention(ctx: RuleContext) -> list[Finding]:
    """matmul -> (scale) -> softmax -> matmul written by hand instead of SDPA."""
    groups = manual_attention_groups(ctx.view, ctx.ops, ctx.thresholds.attention_window_ops)
    if not groups:
        return []
    at = [i for group in groups for i in group]
    ops = ctx.view.operators_in_order_at(at)  # models built when read
    context_of = ctx.view.op_column("execution_context", ctx.ops)
    contexts = Counter(context_of[i].value for i in at)
    return [ctx.finding(
        "manual_attention",
        title="Hand-written attention (matmul-softmax-matmul)",
        kind=FindingKind.OPTIMIZATION,
        symptom=f"{len(groups)} score-GEMM -> softmax -> value-GEMM sequence(s) outside SDPA",
        bottleneck="the full score matrix is written to and read back from memory between kernels",
        ops=ops,
        transformation=Transformation.SDPA,
        facts=[
            *(" -> ".join(ctx.ops[i].key for i in group) for group in groups[:4]),
            "execution context: " + ", ".join(f"{c} x{n}" for c, n in contexts.most_common()),
        ],
        counter_fields=("dram_bytes_read", "dram_bytes_written", "dram_throughput_pct",
                        "tensor_core_active_pct"),
        expected_shifts={"dram_bytes_read": "down"},
    )]


@rule("recurrent_region")
def recurrent_region(ctx: RuleContext) -> list[Finding]:
    """An unrolled recurrence of tiny split-K GEMMs, or RNN time inside an opaque library.

    A generate() decode loop repeats its GEMMs once per token with M = batch as well; where the
    decode_loop rule finds one (attention over a growing KV cache), those GEMMs are its, and
    only opaque RNN kernels can still make a recurrent finding.
    """
    t, view = ctx.thresholds, ctx.view
    loop_parts: list[Sequence[Operator]] = []
    facts = []
    runs = {} if decode_loop_of(ctx) is not None else same_shape_gemm_runs(view, ctx.ops)
    for _signature, idxs in runs.items():
        if len(idxs) < t.recurrent_min_gemms:
            continue
        ops = view.operators_in_order_at(idxs)  # models built when read
        run_kernels, at = view.kernels_of_ops_at(ops)
        # per launch, not per operator: an operator holds its launches of every measured iteration
        if at is not None:  # read by position: each kernel's class, and each distinct name's match
            names = view.kernel_name_codes[at]
            gemm = view.kernel_class_codes[at] == CLASS_CODES[OperatorClass.GEMM]
            durations = view.kernel_durations[at][gemm & ~view.name_matches(_SPLIT_K_EPILOGUE)[names]].tolist()
        else:
            durations = [k.duration_ns for k in run_kernels if view.kernel_class(k) is OperatorClass.GEMM
                         and not view.matches(_SPLIT_K_EPILOGUE, k.name)]
        if not durations or statistics.median(durations) > t.tiny_gemm_us * 1000:
            continue
        split_k = (int(view.name_matches(_SPLIT_K)[names].sum()) if at is not None
                   else sum(1 for k in run_kernels if view.matches(_SPLIT_K, k.name)))
        rows = gemm_rows(ops[0])
        if split_k < t.split_k_min_epilogues and (rows is None or rows > t.recurrent_gemm_max_rows):
            continue
        loop_parts.append(ops)
        facts.append(f"{len(durations)} GEMM launches of one shape (M={rows if rows is not None else '?'}), "
                     f"median {statistics.median(durations) / 1000:.1f} us, {split_k} split-K kernels")
    # the kernels classed RNN (read off every kernel's class at once), those of an opaque call
    rnn_at = [p for p in np.flatnonzero(view.kernel_class_codes == CLASS_CODES[OperatorClass.RNN]).tolist()
              if _opaque_rnn(ctx, view.kernels[p])]
    rnn_kernels = [view.kernels[p] for p in rnn_at]
    rnn_ns = sum(k.duration_ns for k in rnn_kernels)
    opaque = view.share_pct(rnn_ns) >= t.rnn_opaque_min_pct
    if opaque:
        unattributed = sum(1 for k in rnn_kernels if view.is_unattributed(k))
        facts.append(f"{len(rnn_kernels)} RNN kernels ({view.share_pct(rnn_ns):.1f}% of kernel time) run "
                     f"inside an opaque library call; {unattributed} of them map to no operator")
    loop_ops = view.joined(loop_parts)
    if not loop_ops and not opaque:
        return []
    rnn_ops = {view.kernel_operator[k.id].key: view.kernel_operator[k.id]
               for k in rnn_kernels if opaque and k.id in view.kernel_operator}
    loop_keys = set(view.keys_of(loop_ops))
    extra = [op for key, op in rnn_ops.items() if key not in loop_keys]
    ops = [*loop_ops, *extra] if extra else loop_ops
    kernels = _loop_and_rnn_kernels(view, view.kernels_of_ops(loop_ops), rnn_at if opaque else [])
    on_cudnn = bool(rnn_ops) and all(op.library and "cudnn" in op.library for op in rnn_ops.values())
    if not loop_ops and on_cudnn:
        # already the fused cuDNN path: rerouting changes nothing; say where the time went instead
        title = "Recurrent region already runs in fused cuDNN: graph passes cannot reach it"
        symptom = "recurrent work runs inside one opaque cuDNN RNN call per layer"
        bottleneck = ("the work left the graph: per-timestep cuDNN kernels (GEMM + cell) with M = batch; "
                      "graph passes cannot see inside, only model shape (batch, hidden size) or precision can")
        transformation = None
        last_fact = "rnn_reroute would change nothing: the recurrence is already on cuDNN"
        expected_shifts = None
        idle = [idle_inside_pct(view.kernels_of(op)) for op in rnn_ops.values()]
        if idle and min(idle) > t.launch_latency_idle_pct:
            step_idle = view_idle_ns(view.kernels)
            inside = sum(view_idle_ns(view.kernels_of(op)) for op in rnn_ops.values())
            low, high = round(min(idle)), round(max(idle))
            spread = f"{low}%" if low == high else f"{low}-{high}%"
            bottleneck = (f"launch latency: the GPU idles {spread} of each cuDNN RNN call "
                          f"between its per-timestep kernels ({pct(inside, step_idle):.0f}% of the step's idle "
                          "time sits inside them); graph passes cannot see inside, only fewer timesteps, a "
                          "larger batch, CUDA graphs or precision can")
    else:
        title = "Recurrent region: route it to the fused cuDNN RNN"
        symptom = (("recurrent work runs as many tiny per-step GEMMs" if loop_ops
                    else "recurrent work runs inside an opaque library call")
                   + (" and as opaque RNN kernels" if loop_ops and opaque else ""))
        bottleneck = "per-timestep launches with M = batch starve the GPU; graph passes cannot see inside"
        transformation = Transformation.RNN_REROUTE
        last_fact = ("tiny GEMMs and launch gaps here are symptoms of the unrolled recurrence: "
                     "reroute it before tuning them (precision, CUDA graphs)")
        expected_shifts = {"tensor_core_active_pct": "up"}
    return [ctx.finding(
        "recurrent_region",
        title=title,
        kind=FindingKind.STRUCTURAL,
        symptom=symptom,
        bottleneck=bottleneck,
        ops=ops,
        kernels=kernels,
        transformation=transformation,
        facts=[*facts[:5], last_fact],
        counter_fields=_GEMM_FIELDS,
        expected_shifts=expected_shifts,
    )]


def _loop_and_rnn_kernels(view: ProfileView, loop: Sequence[Kernel], rnn_at: list[int]) -> Sequence[Kernel]:
    """The loop's kernels and the opaque RNN kernels (at ``rnn_at``), each once, in timeline order
    (equal starts in the order first listed), by position where the loop's are the view's."""
    loop_at = view.positions(loop) if isinstance(loop, KernelsAt) else None
    if loop_at is None:
        kernels = {k.id: k for k in loop}
        kernels.update({k.id: k for k in (view.kernels[p] for p in rnn_at)})
        return sorted(kernels.values(), key=lambda k: k.start_ns)
    at = np.concatenate([loop_at, np.asarray(rnn_at, dtype=np.int64)])
    _, first = unique_ints(at, index=True)
    at = at[np.sort(first)]
    return KernelsAt(view.kernels, at[np.argsort(view.kernel_columns.start[at], kind="stable")])


def view_idle_ns(kernels: Iterable[Kernel]) -> int:
    """Idle time between the first and the last of ``kernels`` (none of them running)."""
    busy, span = busy_and_span_ns(kernels)
    return span - busy


def _opaque_rnn(ctx: RuleContext, kernel: Kernel) -> bool:
    if ctx.view.kernel_class(kernel) is not OperatorClass.RNN:
        return False
    op = ctx.view.kernel_operator.get(kernel.id)
    return op is None or op.execution_context in (ExecutionContext.OPAQUE_LIBRARY,
                                                  ExecutionContext.UNKNOWN, ExecutionContext.EAGER)
