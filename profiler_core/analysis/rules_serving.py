"""Rules for inference as users serve it: generate() decode loops and data-dependent dispatch.

    decode_loop     prefill, then one forward per new token over a KV cache -> static_kv_cache (structural)
    host_syncs      device-to-host reads inside the step (MoE routing)       (structural: no CUDA graphs)

A decode loop repeats the same GEMMs once per token with M = batch, as an unrolled recurrence
repeats them once per time step; the growing key of its attention tells it apart, and
recurrent_region stands down when this rule's loop is found.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

import numpy as np

from profiler_core.analysis.decode_loop import UNKNOWN, DecodeLoop, detect_decode_loop
from profiler_core.analysis.findings import Finding, FindingKind
from profiler_core.analysis.host_syncs import (
    UNKNOWN_MODULE,
    HostSyncs,
    expert_gemms,
    find_host_syncs,
    per_expert_gemm_runs,
)
from profiler_core.analysis.patterns import gemm_rows
from profiler_core.analysis.profile_view import KernelsAt, ProfileView
from profiler_core.analysis.rules import RuleContext, rule
from profiler_core.schema import Tier
from profiler_core.transformations import Transformation

# Per profile view, computed once: several rules ask (recurrent_region, host_bound, launch_bound).
_LOOPS: WeakKeyDictionary[ProfileView, DecodeLoop | None] = WeakKeyDictionary()
_SYNCS: WeakKeyDictionary[ProfileView, HostSyncs] = WeakKeyDictionary()


def decode_loop_of(ctx: RuleContext) -> DecodeLoop | None:
    """The profile's decode loop, or None."""
    if ctx.view not in _LOOPS:
        loop = detect_decode_loop(ctx.view, ctx.ops, min_forwards=ctx.thresholds.decode_min_forwards,
                                  window=ctx.thresholds.attention_window_ops)
        _LOOPS[ctx.view] = loop
    return _LOOPS[ctx.view]


def host_syncs_of(ctx: RuleContext) -> HostSyncs:
    """The profile's host syncs."""
    if ctx.view not in _SYNCS:
        _SYNCS[ctx.view] = find_host_syncs(ctx.view, ctx.ops)
    return _SYNCS[ctx.view]


def decode_figures(loop: DecodeLoop) -> list[str]:
    """The per-token figures a serving engineer reads, one sentence each."""
    tpot = loop.time_per_output_token_ns
    per_token = (f"time per output token {tpot / 1e6:.3f} ms ({1e9 / tpot:,.1f} tokens/s per sequence, "
                 if tpot else "time per output token n/a (")
    return [
        per_token + f"{loop.tokens_per_s:,.1f} tokens/s over the batch of {loop.batch}, prefill included)",
        f"prefill {loop.prefill_ns / 1e6:.3f} ms, decode {loop.decode_ns / 1e6:.3f} ms "
        f"({loop.decode_forwards} decode forwards) of a {loop.step_ns / 1e6:.3f} ms step",
        f"GPU busy {loop.busy_pct:.1f}% of the step, {loop.decode_busy_pct:.1f}% of the decode part; "
        f"{loop.kernels_per_token:,.0f} kernels per token",
    ]


@rule("decode_loop")
def decode_loop(ctx: RuleContext) -> list[Finding]:
    """generate(): a prefill forward, then one forward per new token, each a host-paced burst of launches."""
    loop = decode_loop_of(ctx)
    if loop is None:
        return []
    lo, hi = loop.kv_lengths
    if loop.kv_growing:
        cache_text = f"the KV cache grows by one position per token (key length {lo} to {hi})"
    elif hi == UNKNOWN:
        cache_text = ("the decode forwards run compiled (their attention's shapes are not recorded): a "
                      "fixed-size cache")
    else:
        cache_text = f"every decode forward reads a key of length {hi} (a fixed-size cache)"
    prompt = f"a {loop.prompt_len}-token prompt" if loop.prompt_len else "no prefill in the capture"
    decode_kernels, replayed = 0, 0
    view, graph_tier = ctx.view, list(Tier).index(Tier.CUDA_GRAPH)
    for op in loop.ops:  # each kernel read off the columns where it is the view's own
        kernels = view.kernels_of(op)
        at = view.positions(kernels)
        decode_kernels += len(kernels)
        replayed += (int((view.kernel_columns.in_graph[at] | (view.kernel_columns.tier[at] == graph_tier)).sum())
                     if at is not None else sum(1 for k in kernels if k.graph_id is not None
                                                or k.attribution.tier is Tier.CUDA_GRAPH))
    graphed = bool(decode_kernels) and replayed * 2 > decode_kernels
    transformation = None if graphed or not loop.kv_growing else Transformation.STATIC_KV_CACHE
    bottleneck = ("each token's decode step replays as a CUDA graph; what is left is the eager prefill, the "
                  "host's work between tokens (sampling, stopping checks) and the kernels themselves" if graphed else
                  "the host launches every token's kernels one by one and the GPU waits between them; "
                  + cache_text + (", so no step can be compiled once and replayed" if loop.kv_growing else ""))
    return [ctx.finding(
        "decode_loop",
        title="generate() decode loop: one forward per new token",
        kind=FindingKind.STRUCTURAL,
        symptom=(f"{loop.decode_forwards} decode forwards of {loop.layers} attention layers after {prompt}, batch "
                 f"{loop.batch}; {loop.kernels_per_token:,.0f} kernels per token, GPU busy {loop.busy_pct:.1f}% "
                 "of the step"),
        bottleneck=bottleneck,
        ops=list(loop.ops),
        kernels=KernelsAt(view.kernels, np.argsort(view.kernel_columns.start, kind="stable")),  # by start
        transformation=transformation,
        facts=[*decode_figures(loop), cache_text,
               "the per-token GEMMs (M = batch) are the decode loop, not a recurrent network"
               + ("; a static KV cache lets the decode step be compiled and CUDA-graphed" if transformation
                  else "")],
        counter_fields=(),
        gain_ns=max(loop.step_ns - round(loop.step_ns * loop.busy_pct / 100), 0) * loop.iterations,
        gain_basis="timeline",
        gain_whole_ns=loop.step_ns * loop.iterations,
    )]


@rule("host_syncs", always_reported=True)
def host_syncs(ctx: RuleContext) -> list[Finding]:
    """Device-to-host reads inside the step: data-dependent dispatch, which no CUDA graph can hold."""
    syncs = host_syncs_of(ctx)
    if not syncs:
        return []
    experts = expert_gemms(ctx.view, ctx.ops)
    facts = syncs.evidence()
    n = syncs.iterations
    loop_runs = per_expert_gemm_runs(ctx.view, ctx.ops)
    loop_ops = [op for run in loop_runs for op in run]
    if loop_runs:
        rows = [r for op in loop_ops if (r := gemm_rows(op)) is not None]
        loop_ns = ctx.view.gemm_kernel_ns(ctx.view.kernels_of_ops(loop_ops))
        facts.append(f"{len(loop_ops) // n} GEMMs per step run one per expert in {len(loop_runs) // n} runs (rows "
                     f"{min(rows)}-{max(rows)} each: the tokens routed to that expert), {loop_ns / n / 1e3:,.1f} us "
                     "of GEMM time per step: "
                     "a grouped GEMM's fallback loop, which reads the token counts on the host first "
                     + ("(transformers' grouped_mm path falls back so with float32 weights under torch.compile)"
                        if syncs.compiled else "(transformers' eager experts implementation loops so over the "
                        "experts the host read back)"))
    if experts is not None:
        per = sorted(experts.gemm_ns.items(), key=lambda kv: -kv[1])
        if experts.pooled:
            rows = [r for rs in experts.tokens.values() for r in rs]
            where = per[0][0] if len(per) == 1 else f"{len(per)} experts modules ({per[0][0]}, ...)"
            facts.append(f"{len(experts.ops) // n} expert GEMMs per step under {where} (the module stack names no "
                         f"single expert){f'; rows per expert call {min(rows)}-{max(rows)}' if rows else ''}")
        else:
            facts.append(f"expert GEMM time over {len(per)} experts: " + ", ".join(
                f"{name.rsplit('.', 1)[-1]} {ns / 1e3:,.1f} us" for name, ns in per[:8]))
            tokens = {name: sum(rs) for name, rs in experts.tokens.items()}
            if tokens:
                facts.append("tokens routed per expert (rows of its first GEMM, all steps): " + ", ".join(
                    f"{name.rsplit('.', 1)[-1]} {n}" for name, n in sorted(tokens.items())))
    total = len(syncs.copies) + len(syncs.sync_ops)
    if syncs.block_graphs:
        where = (f"{syncs.in_graphs // n} of {total // n} per step run inside the compiled graphs"
                 if syncs.compiled else "the capture compiled nothing, so a plan would compile them too")
        facts.append(f"CUDA graphs (cuda_graphs, reduce-overhead) cannot capture a copy to the host ({where}): "
                     "not applicable here; bf16 and compile settings still are"
                     + ("; moe_grouped_experts runs each run of expert GEMMs as one bf16 grouped GEMM with the "
                        "counts kept on the GPU (transformers MoE models), after which graphs can apply"
                        if loop_runs else ""))
    else:
        facts.append(f"all {total // n} per step run in eager code between the compiled graphs (graph breaks): "
                     "CUDA graphs (reduce-overhead) record the compiled regions around them, so graph passes "
                     "still apply")
    copy_ops = [op for k in syncs.copies if (op := ctx.view.kernel_operator.get(k.id)) is not None]
    ops = [*syncs.sync_ops, *{op.key: op for op in [*copy_ops, *loop_ops]}.values()]
    return [ctx.finding(
        "host_syncs",
        title="Data-dependent dispatch: the host reads GPU values inside the step",
        kind=FindingKind.STRUCTURAL,
        symptom=facts[0],
        bottleneck="the host waits for the GPU to finish before it can choose what to launch next (routing, "
                   "sizes read back); the stream drains at each read, and a graph cannot capture a read inside a "
                   "compiled region",
        ops=ops,
        kernels=sorted([*syncs.copies, *ctx.view.kernels_of_ops(loop_ops)], key=lambda k: k.start_ns) or None,
        transformation=Transformation.MOE_GROUPED_EXPERTS if loop_runs else None,
        facts=facts,
        counter_fields=(),
    )]


def graphs_not_applicable(ctx: RuleContext) -> str | None:
    """Why compiling the model with CUDA graphs (cuda_graphs) cannot help this step, or None.

    Host syncs: a graph cannot capture a copy to the host (the host_syncs finding names them).
    A decode loop: generate() calls the model's own forward, so a compiled, graphed model
    never runs; static_kv_cache graphs the decode step instead (the decode_loop finding).
    """
    syncs = host_syncs_of(ctx)
    if syncs.block_graphs:
        module, _ = syncs.by_module.most_common(1)[0]
        where = f"most under {module}" if module != UNKNOWN_MODULE else "most in code outside any recorded module"
        return (f"cuda_graphs not applicable: the step reads GPU values on the host "
                f"({(len(syncs.copies) + len(syncs.sync_ops)) // syncs.iterations} syncs per step, {where}; "
                "see the host_syncs finding), which no CUDA graph can capture")
    loop = decode_loop_of(ctx)
    if loop is not None and loop.kv_growing:
        return ("cuda_graphs not applicable: the step is a generate() decode loop on a growing KV cache, which "
                "a graph of the model never replays; static_kv_cache graphs the decode step (see decode_loop)")
    if loop is not None:
        return ("cuda_graphs not applicable: the step is a generate() decode loop, which runs the model's own "
                "forward, so a graph of the compiled model never replays; on a static KV cache generate() "
                "compiles and graphs its decode step itself (static_kv_cache)")
    return None
