"""``diagnose(profile)``: run every registered rule and rank the findings by their gain bound.

    report = diagnose(read_profile("profile.json"))
    for f in report.findings:            # largest Amdahl bound first
        print(f.rule_id, f.transformation, f.gain_bound_pct)
"""

from __future__ import annotations

from collections.abc import Iterable

from profiler_core.analysis.findings import Finding, FindingKind, FindingsReport
from profiler_core.analysis.profile_view import ProfileView
from profiler_core.analysis.rules import RuleContext, registered_rules
from profiler_core.analysis.rules_roofline import tighten_gain_bounds
from profiler_core.analysis.thresholds import DEFAULT_THRESHOLDS, Thresholds
from profiler_core.errors import ProfilerError
from profiler_core.gc_pause import gc_paused
from profiler_core.schema import Profile

_KIND_ORDER = {FindingKind.OPTIMIZATION: 0, FindingKind.STRUCTURAL: 1, FindingKind.NOTE: 2}


@gc_paused()  # many acyclic models and rows: the cyclic collector only costs time here
def diagnose(profile: Profile, thresholds: Thresholds = DEFAULT_THRESHOLDS, *,
             rules: Iterable[str] | None = None, roofline: bool = True) -> FindingsReport:
    """Findings for ``profile``, sorted by gain bound (largest first); ``rules`` limits which run.

    Every registered rule runs (built-ins and plugins, see analysis/rules.py); a rule registered
    as ``always_reported`` keeps findings below the minimum share, one registered as
    ``needs_roofline`` runs only with the roofline on.

    ``roofline`` (on by default): also flag operators far below both roofs, and cap precision-change
    bounds by the target precision's roofline where that is tighter (analysis/rules_roofline.py);
    ``roofline=False`` gives the bounds from kernel time alone.
    """
    specs = registered_rules()
    selected = list(specs) if rules is None else list(rules)
    unknown = [r for r in selected if r not in specs]
    if unknown:
        raise ProfilerError(f"unknown diagnosis rule {', '.join(unknown)}; known: {', '.join(specs)}")
    needing = [r for r in selected if specs[r].needs_roofline]
    if needing and rules is not None and not roofline:
        raise ProfilerError(f"rule {needing[0]} needs the roofline: leave roofline on, or drop the rule")
    if not roofline:
        selected = [r for r in selected if not specs[r].needs_roofline]
    view = ProfileView.of(profile)
    ctx = RuleContext(view=view, thresholds=thresholds)
    findings: list[Finding] = []
    for rule_id in selected:
        spec = specs[rule_id]
        findings.extend(f for f in spec.function(ctx)
                        if f.evidence.share_pct >= thresholds.min_finding_share_pct or spec.always_reported)
    if roofline:
        tighten_gain_bounds(findings, view.measured_roofline, view.total_ns)
    findings.sort(key=lambda f: (-f.gain_bound_pct, _KIND_ORDER[f.kind], f.rule_id))
    warnings = list(profile.warnings)
    if not profile.kernels:
        warnings.append("the profile holds no kernels: nothing to diagnose")
    return FindingsReport(
        workload=profile.capture.workload,
        gpu_name=profile.capture.gpu_name,
        total_kernel_ns=view.total_ns,
        kernel_count=len(view.kernels),
        operator_count=len(view.operators),
        attributed_pct=round(view.share_pct(view.total_ns - view.unattributed_ns), 3),
        unattributed_pct=round(view.share_pct(view.unattributed_ns), 3),
        rules_run=selected,
        thresholds=thresholds.as_dict(),
        findings=findings,
        warnings=warnings,
    )
