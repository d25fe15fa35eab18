"""Roofline-side diagnosis: operators far below both roofs, and roofline-tightened gain bounds.

    far_below_roofline   operators under FAR_BELOW of their attainable roofline  (note: latency/occupancy)

An operator at 3% of what its FLOPs and DRAM bytes allow is neither compute- nor memory-bound: it
waits on latency (too few threads, serial dependence, launch and tail effects). Its bound is the
time reaching the roof would save (its headroom), not its whole time.

``diagnose`` runs both unless ``roofline=False`` (``far_below_roofline`` is registered as needing the
roofline; ``tighten_gain_bounds`` reads every finding's bound, so it runs after the rules).

``tighten_gain_bounds`` caps a precision change's bound (tf32, bf16 promotion) by the roofline in
the target precision: a GEMM promoted to bf16 still takes at least max(FLOPs / bf16 peak, bytes / 2
/ bandwidth), so the gain can be at most its time minus that floor. Measured roofs are used where
the table has them (what a kernel can attain).
"""

from __future__ import annotations

from collections.abc import Sequence

from profiler_core.analysis.findings import Finding, FindingKind
from profiler_core.analysis.roofline import FAR_BELOW, Roofline
from profiler_core.analysis.rules import RuleContext, rule
from profiler_core.schema import Operator
from profiler_core.transformations import Transformation

_TARGET: dict[str, tuple[str, float]] = {Transformation.TF32: ("tf32_tensor", 1.0),
                                         Transformation.BF16_PROMOTION: ("bf16_tensor", 0.5),
                                         Transformation.BF16_AUTOCAST: ("bf16_tensor", 0.5)}
MAX_LISTED = 8


ROOFLINE_RULE = "far_below_roofline"


@rule(ROOFLINE_RULE, needs_roofline=True)
def far_below_roofline(ctx: RuleContext) -> list[Finding]:
    """Operators under ``FAR_BELOW`` of their attainable roofline: latency/occupancy-bound."""
    roof = ctx.view.measured_roofline
    far = roof.far_below()  # positions of the rows, read off the roofline's columns
    if not far or roof.chip is None:
        return []
    # the operator of each key (the last launched of a repeated key)
    keys = roof.keys_at(far)
    ops: Sequence[Operator]
    if ctx.view.keys_repeat:
        by_key = {op.key: op for op in ctx.ops}
        ops = [by_key[k] for k in keys if k in by_key]
    else:
        ops = ctx.view.operators_of_keys(keys)
    headroom = int(sum(h or 0 for h in roof.headroom_at(far)))
    worst = roof.most_headroom(MAX_LISTED, far)
    facts = [f"{len(far)} operators under {FAR_BELOW:.0%} of the roofline on {roof.chip.name} "
             f"({'measured' if roof.measured_roofs and roof.chip.measured else 'published'} roofs)",
             *(f"{r.key}: {r.fraction_of_roofline:.1%} of its {r.bound or 'memory'} roof, "
               f"{r.duration_ns / 1e3:.1f} us, {r.headroom_ns / 1e3:.1f} us to gain" for r in worst
               if r.fraction_of_roofline is not None and r.headroom_ns is not None)]
    return [ctx.finding(
        "far_below_roofline",
        title="Operators far below both roofs (latency/occupancy-bound)",
        kind=FindingKind.NOTE,
        symptom=f"{len(far)} operators reach under {FAR_BELOW:.0%} of what their FLOPs and DRAM bytes allow",
        bottleneck="latency or occupancy: too little parallel work in flight to load either the SMs or DRAM",
        ops=ops, facts=facts, counter_fields=("achieved_occupancy_pct", "sm_throughput_pct", "dram_throughput_pct"),
        gain_ns=headroom,
    )]


def tighten_gain_bounds(findings: list[Finding], roof: Roofline, total_ns: int) -> None:
    """Cap precision-change bounds by the target precision's roofline (in place; a fact says so)."""
    if roof.chip is None or not total_ns:
        return
    bandwidth = roof.bandwidth or 0.0
    for f in findings:
        target = _TARGET.get(f.transformation) if f.transformation else None
        if target is None or f.gain_basis != "kernel_time":
            continue
        name, byte_scale = target
        peak = roof.peak(name)
        if not peak or not bandwidth:
            continue
        # read off the roofline's columns (no row is built), then added one by one in the operators' order
        terms, floors = roof.time_above_floor(f.operators, peak, bandwidth, byte_scale)
        bound = 0.0
        for term in terms:
            bound += term
        if floors and bound < f.gain_bound_ns:
            pct = min(100.0, 100.0 * bound / total_ns)
            f.evidence.facts.append(
                f"bound tightened by the {name} roofline of {roof.chip.name} ({floors} operators): "
                f"{f.gain_bound_pct:.1f}% -> {pct:.1f}% of kernel time")
            f.gain_bound_ns = int(bound)
            f.gain_bound_pct = round(pct, 3)
            f.max_speedup = round(100.0 / (100.0 - pct), 3) if pct < 100.0 else None
