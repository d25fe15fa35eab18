"""A single self-contained HTML report: inline CSS and SVG charts, no JavaScript, no external files.

Charts: time by operator class, coverage by tier, top operators; with a baseline, also
baseline vs optimized per class and the counter shifts of the busiest classes. The page and its
sections are jinja2 templates in ``templates/`` (autoescaped: kernel names carry ``<`` and ``>``,
a workload name could carry anything); this module gathers what each template shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markupsafe import Markup, escape

from profiler_core.analysis.compare import Comparison
from profiler_core.analysis.findings import FindingsReport, in_priority_order
from profiler_core.analysis.profile_view import ProfileView, shared_views
from profiler_core.errors import ProfilerError
from profiler_core.gc_pause import gc_paused
from profiler_core.metrics.catalog import HEADLINE_COUNTERS
from profiler_core.report.digest import (
    KEY_COUNTERS,
    SHORT_NAMES,
    counter_provenance,
    coverage_by_tier,
    findings_owner,
    split_warnings,
    time_by_class,
    top_operators,
    us,
)
from profiler_core.report.end_to_end import EndToEnd, banner
from profiler_core.report.svg_charts import (
    CLASS_COLORS,
    dumbbell_chart,
    grouped_bars,
    hbar_chart,
    stacked_bar,
)
from profiler_core.report.templating import render
from profiler_core.report.trials import trials_html
from profiler_core.schema import Profile, Tier

_TIER_COLORS = {Tier.CUPTI_CORRELATION.value: "#3ca951", Tier.NCU_NVTX.value: "#6cc5b0",
                Tier.NSYS_NVTX.value: "#4269d0", Tier.INDUCTOR_FUSION.value: "#efb118",
                Tier.CUDA_GRAPH.value: "#a463f2", Tier.UNATTRIBUTED.value: "#ff725c"}
_SHIFT_FIELDS = HEADLINE_COUNTERS


def comparison_html(c: Comparison, *, top_k: int = 15, end_to_end: EndToEnd | None = None) -> str:
    """The comparison section; its banner's verdict follows wall time when the run measured it."""
    verdict, text = banner(c, end_to_end)
    word, _, rest = text.partition(" ")
    serious, notes = split_warnings(c.warnings)
    shift_rows = [(f"{r.op_class.value} {SHORT_NAMES[d.field]}", d.base, d.opt)
                  for r in c.classes[:4] for d in r.counters
                  if d.field in _SHIFT_FIELDS and (d.base is not None or d.opt is not None)]
    return render(
        "comparison.html.j2", c=c, verdict=verdict, word=word, rest=rest, serious=serious, notes=notes,
        class_chart=Markup(grouped_bars([(r.op_class.value, r.base_ns / 1000, r.opt_ns / 1000) for r in c.classes],
                                        labels=("baseline", "optimized"), unit="us",
                                        title="Kernel time per operator class: baseline vs optimized")),
        shift_chart=Markup(dumbbell_chart(shift_rows, title="Counter shifts in the busiest classes (percent)"))
        if shift_rows else None,
        ops=c.operators.largest_changes(top_k),
        one_sided=[("Kernels only in the optimized run", c.only_in_opt),
                   ("Kernels only in the baseline", c.only_in_base)])


def profile_html(profile: Profile, *, top_k: int = 12, heading: str = "Where the time went") -> str:
    """The single-profile section: class and tier charts, top operators with their counters."""
    view = ProfileView.of(profile)
    classes = time_by_class(view)
    tiers = coverage_by_tier(view)
    top = top_operators(view, top_k)
    serious, notes = split_warnings(list(profile.warnings), profile)
    charts = [hbar_chart([(s.label, s.duration_ns / 1000) for s in classes], unit="us",
                         title="Kernel time by operator class",
                         colors=[CLASS_COLORS.get(s.label, "#9498a0") for s in classes]),
              stacked_bar([(s.label, s.duration_ns) for s in tiers], colors=_TIER_COLORS,
                          title="Coverage: kernel time by attribution tier"),
              hbar_chart([(o.key, o.duration_ns / 1000) for o in top], unit="us",
                         title=f"Top {len(top)} operators by kernel time (colored by class)",
                         colors=[CLASS_COLORS.get(o.op_class.value, "#9498a0") for o in top])]
    unattributed = sorted(view.unattributed_kernels, key=lambda kern: -kern.duration_ns)[:10]
    return render(
        "profile.html.j2", heading=heading, summary=_summary(profile, view), serious=serious, notes=notes,
        charts=[Markup(chart) for chart in charts], top=top, operator_count=len(profile.operators),
        counter_fields=list(KEY_COUNTERS), counter_names=[SHORT_NAMES[f] for f in KEY_COUNTERS],
        unattributed=[(kern, view.kernel_class(kern).value) for kern in unattributed],
        unattributed_count=len(view.unattributed_kernels), unattributed_pct=view.share_pct(view.unattributed_ns))


def _summary(profile: Profile, view: ProfileView) -> str:
    cap = profile.capture
    return (f"{cap.workload or 'workload'}: {len(profile.kernels)} kernels, {len(profile.operators)} operators, "
            f"{us(view.total_ns)} us profiled kernel time over {cap.measured_iterations} measured iterations; "
            f"{counter_provenance(profile)}")


def findings_html(report: FindingsReport, heading: str = "Findings") -> str:
    """The findings section: one card per finding, in the order the loop acts on them."""
    cards = []
    for f in in_priority_order(report.findings):
        more = len(f.operators) - 8
        cards.append((f, ", ".join(f.operators[:8]) + (f" (+{more} more)" if more > 0 else "")))
    return render("findings.html.j2", heading=heading, findings=cards)


def yardstick_html(e: EndToEnd) -> str:
    """The recipe a user writes instead of the loop, each timed beside the plan, and the verdict."""
    rows = "".join(f"<tr><td><code>{escape(code)}</code></td><td>{escape(outcome)}</td><td>{escape(shown)}</td></tr>"
                   for code, outcome, shown in e.recipes)
    plan = f"{e.opt_wall_ms or e.base_wall_ms:.3f} ms" if (e.opt_wall_ms or e.base_wall_ms) else "not timed"
    return (f'<section id="yardstick"><h2>By hand: the recipe instead of the loop</h2>'
            f"<p>{escape(e.recipe_verdict)}</p><table><thead><tr><th>recipe</th><th>outcome</th>"
            f"<th>end-to-end median</th></tr></thead><tbody>"
            f"<tr><td>the loop's plan</td><td>kept</td><td>{escape(plan)}</td></tr>{rows}</tbody></table></section>")


@gc_paused()  # many acyclic models and rows: the cyclic collector only costs time here
@shared_views()  # one view per profile for every section (a large profile's models are built once)
def render_html(profile: Profile | None = None, *, findings: FindingsReport | None = None,
                comparison: Comparison | None = None, baseline: Profile | None = None,
                title: str | None = None, end_to_end: EndToEnd | None = None,
                trials: Sequence[Any] | None = None, training: str | None = None) -> str:
    """One self-contained HTML document for a profile, its findings and/or a comparison.

    Each profile gets its own section, with the findings diagnosed from it (``findings`` goes to
    the profile it was diagnosed from: the baseline's findings under the baseline's tables).
    ``trials``: the optimize loop's trials, shown with their numerics verdicts after the comparison.
    ``training``: the training view's section (report/training_view.py), after the trials.
    """
    if comparison is None and baseline is not None and profile is not None:
        from profiler_core.analysis.compare import compare

        comparison = compare(baseline, profile)
    if profile is None and comparison is None:
        raise ProfilerError("nothing to report: give a profile, or a comparison")
    cap = profile.capture if profile is not None else None
    name = title or (cap.workload if cap and cap.workload else "profile")
    counts = None
    if profile is not None and baseline is None:
        # with a baseline, each section states its own profile's counts; the header only what both share
        counts = {"kernels": len(profile.kernels), "operators": len(profile.operators),
                  "total_ns": ProfileView.of(profile).total_ns}
    sections: list[str] = []
    if comparison is not None:
        sections.append(comparison_html(comparison, end_to_end=end_to_end))
    if trials:
        sections.append(trials_html(trials))
    if training:
        sections.append(training)
    if end_to_end is not None and end_to_end.recipes:
        sections.append(yardstick_html(end_to_end))
    owner = findings_owner(findings, baseline, profile) if findings is not None else None
    if baseline is not None:
        sections.append(profile_html(baseline, heading="Baseline: where the time went"))
        if findings is not None and owner is baseline:
            sections.append(findings_html(findings, "Findings on the baseline"))
    if profile is not None:
        sections.append(profile_html(profile, heading="Optimized: where the time went" if baseline is not None
                                     else "Where the time went"))
        from profiler_core.report.roofline_report import modules_html, roofline_html

        sections.append(roofline_html(profile))
        sections.append(modules_html(profile))
        if findings is not None and owner is not baseline:
            sections.append(findings_html(findings, "Findings on the optimized run" if baseline is not None
                                          else "Findings"))
    return str(render("report.html.j2", name=name, cap=cap, counts=counts,
                      sections=[Markup(s) for s in sections if s])) + "\n"
