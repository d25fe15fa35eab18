"""``diagnose(profile)``: run every registered rule and rank the findings by their gain bound.

    report = diagnose(read_profile("profile.json"))
    for f in report.findings:            # largest Amdahl bound first
        print(f.rule_id, f.transformation, f.gain_bound_pct)
"""

from __future__ import annotations

from collections.abc import Iterable

from profiler_core.analysis.findings import Finding, FindingKind, FindingsReport
from profiler_core.analysis.profile_view import ProfileView
from profiler_core.analysis.roofline import roofline as roofline_of
from profiler_core.analysis.rules import RULES, RuleContext
from profiler_core.analysis.rules_roofline import ROOFLINE_RULE, far_below_roofline, tighten_gain_bounds
from profiler_core.analysis.thresholds import DEFAULT_THRESHOLDS, Thresholds
from profiler_core.errors import ProfilerError
from profiler_core.schema import Profile

_KIND_ORDER = {FindingKind.OPTIMIZATION: 0, FindingKind.STRUCTURAL: 1, FindingKind.NOTE: 2}


def diagnose(profile: Profile, thresholds: Thresholds = DEFAULT_THRESHOLDS, *,
             rules: Iterable[str] | None = None, roofline: bool = True) -> FindingsReport:
    """Findings for ``profile``, sorted by gain bound (largest first); ``rules`` limits which run
    (``far_below_roofline`` among them: with ``rules`` given it runs only when named).

    ``roofline`` (on by default): also flag operators far below both roofs, and cap precision-change
    bounds by the target precision's roofline where that is tighter (analysis/rules_roofline.py);
    ``roofline=False`` gives the bounds from kernel time alone.
    """
    selected = list(RULES) if rules is None else list(rules)
    unknown = [r for r in selected if r not in RULES and r != ROOFLINE_RULE]
    if unknown:
        raise ProfilerError(f"unknown diagnosis rule {', '.join(unknown)}; known: {', '.join([*RULES, ROOFLINE_RULE])}")
    far_below = roofline and (rules is None or ROOFLINE_RULE in selected)
    if ROOFLINE_RULE in selected and not roofline:
        raise ProfilerError(f"rule {ROOFLINE_RULE} needs the roofline: leave roofline on, or drop the rule")
    selected = [r for r in selected if r != ROOFLINE_RULE]
    view = ProfileView(profile)
    ctx = RuleContext(view=view, thresholds=thresholds)
    findings: list[Finding] = []
    for rule_id in selected:
        for finding in RULES[rule_id](ctx):
            keep = (finding.evidence.share_pct >= thresholds.min_finding_share_pct
                    or finding.rule_id in ("high_unattributed", "counters_missing"))
            if keep:
                findings.append(finding)
    if roofline:
        if far_below:
            findings.extend(f for f in far_below_roofline(ctx)
                            if f.evidence.share_pct >= thresholds.min_finding_share_pct)
            selected = [*selected, ROOFLINE_RULE]
        tighten_gain_bounds(findings, roofline_of(profile, measured_roofs=True), view.total_ns)
    findings.sort(key=lambda f: (-f.gain_bound_pct, _KIND_ORDER[f.kind], f.rule_id))
    warnings = list(profile.warnings)
    if not profile.kernels:
        warnings.append("the profile holds no kernels: nothing to diagnose")
    return FindingsReport(
        workload=profile.capture.workload,
        gpu_name=profile.capture.gpu_name,
        total_kernel_ns=view.total_ns,
        kernel_count=len(profile.kernels),
        operator_count=len(profile.operators),
        attributed_pct=round(view.share_pct(view.total_ns - view.unattributed_ns), 3),
        unattributed_pct=round(view.share_pct(view.unattributed_ns), 3),
        rules_run=selected,
        thresholds=thresholds.as_dict(),
        findings=findings,
        warnings=warnings,
    )
