"""Timeline rules: what the step's wall time, not its kernels, says.

    host_bound    the GPU is busy for a small share of the measured step -> cuda_graphs
                  (and fewer launches, a larger batch)

The measured step is the span from the first kernel's start to the last kernel's end over the
measured iterations; the GPU is busy where any kernel runs (overlaps counted once). Below the
threshold the host sets the pace whatever the kernels do. The timeline run is profiled, which
lengthens host time: the attention layer's optimized step is 1.14 ms there and 0.55 ms of wall
time unprofiled, with 47 us of kernels (4% busy under the profiler, 9% without).
"""

from __future__ import annotations

import numpy as np

from profiler_core.analysis.findings import Finding, FindingKind
from profiler_core.analysis.profile_view import pct
from profiler_core.analysis.rules import RuleContext, rule
from profiler_core.analysis.rules_serving import graphs_not_applicable
from profiler_core.compile_mode import CUDA_GRAPH_MODES
from profiler_core.transformations import Transformation


@rule("host_bound")
def host_bound(ctx: RuleContext) -> list[Finding]:
    """The GPU idles for most of the measured step: the host (Python, dispatch, launches) sets the pace."""
    view, t = ctx.view, ctx.thresholds
    if len(view.kernels) < 2:
        return []
    every = np.arange(len(view.kernels))
    busy_ns, span_ns = view.busy_and_span_at(every)
    busy_pct = pct(busy_ns, span_ns)
    if span_ns <= 0 or busy_pct >= t.host_bound_busy_pct:
        return []
    steps = view.profile.capture.measured_iterations or 1
    graphed = ((view.profile.capture.compile_mode or "") in CUDA_GRAPH_MODES
               or int(view.kernel_columns.in_graph.sum()) * 2 > len(every))
    helps = ["fewer launches per step (compile more of the step, fuse the small kernels)",
             "a larger batch per step (more GPU work per launch)"]
    blocked = graphs_not_applicable(ctx)
    if not graphed and not blocked:
        helps.insert(0, "CUDA graphs (compile mode reduce-overhead): one launch replays the step")
    return [ctx.finding(
        "host_bound",
        title="Host-bound step: the GPU waits on the host",
        kind=FindingKind.OPTIMIZATION if not graphed and not blocked else FindingKind.STRUCTURAL,
        symptom=(f"the GPU is busy {busy_pct:.1f}% of the measured step ({busy_ns / steps / 1e3:,.1f} us of "
                 f"kernels in a {span_ns / steps / 1e3:,.1f} us step, {steps} step(s) measured; "
                 f"< {t.host_bound_busy_pct:g}%)"),
        bottleneck="the host (Python, dispatch, kernel launches) sets the pace, not the GPU",
        kernel_positions=every,
        transformation=None if graphed or blocked else Transformation.CUDA_GRAPHS,
        facts=[f"kernel passes shorten only the {busy_pct:.1f}% the GPU is busy: they will not show in "
               "end-to-end time",
               "what can help: " + "; ".join(helps),
               *([blocked] if blocked else []),
               "the step runs from the first kernel's start to the last kernel's end of the timeline "
               "capture; the profiler lengthens host time, so an unprofiled step is shorter (its wall "
               "time, where the run measured one, is the figure to check)"],
        counter_fields=(),
        gain_ns=span_ns - busy_ns,
        gain_basis="timeline",
        gain_whole_ns=span_ns,
    )]
