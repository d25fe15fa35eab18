"""Markdown reports: a profile (with findings) and/or a comparison, sized for a pull-request comment.

Comparability warnings come first, as a GitHub alert, so nobody reads a speedup without
them; harmless notes are a note, not a warning. Names are escaped for tables (``|``) and for
GitHub's HTML pass (``<`` with a backslash, since kernel names carry C++ templates); nothing is
written as an HTML entity, so ``->`` reads ``->``.
"""

from __future__ import annotations

from profiler_core.analysis.compare import Comparison, CounterDelta
from profiler_core.analysis.counter_format import format_value
from profiler_core.analysis.findings import FindingsReport, in_priority_order
from profiler_core.analysis.profile_view import ProfileView, shared_views
from profiler_core.errors import ProfilerError
from profiler_core.report.digest import (
    KEY_COUNTERS,
    SHORT_NAMES,
    counter_provenance,
    coverage_by_tier,
    delta_text,
    findings_owner,
    not_shown,
    shift_parts,
    split_warnings,
    time_by_class,
    top_operators,
    us,
)
from profiler_core.report.end_to_end import EndToEnd, banner
from profiler_core.schema import Profile

_ARROW = {"up": "\u2191", "down": "\u2193", "same": "=", "n/a": "?"}


def md(text: object) -> str:
    """Escape text for a markdown table cell or line: pipes, a ``<`` that could open a tag, newlines."""
    return str(text).replace("\\", "\\\\").replace("<", "\\<").replace("|", "\\|").replace("\n", " ")


def _alerts(items: list[str], profile: Profile | None = None) -> list[str]:
    serious, notes = split_warnings(items, profile)
    out: list[str] = []
    if serious:
        out += ["> [!WARNING]", *(f"> {md(w)}  " for w in serious), ""]
    if notes:
        out += ["> [!NOTE]", *(f"> {md(w)}  " for w in notes), ""]
    return out


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out + [""]


def _shifts(counters: list[CounterDelta]) -> str:
    return md("; ".join(shift_parts(counters, "\u2192"))) or "-"


def comparison_markdown(c: Comparison, *, top_k: int = 10, end_to_end: EndToEnd | None = None) -> list[str]:
    """The lines of a comparison section; the verdict follows wall time when the run measured it."""
    base, opt = md(c.base_label or "baseline"), md(c.opt_label or "optimized")
    lines = [f"## oprof compare: {base} \u2192 {opt}", ""]
    lines += _alerts(list(c.warnings))
    _, text = banner(c, end_to_end)
    word, _, rest = text.partition(" ")
    lines += [f"**{word}** {md(rest).replace('->', chr(0x2192))} "
              f"Comparable: **{'yes' if c.comparability.comparable else 'NO'}**.", ""]
    lines += ["### By operator class", ""]
    lines += _table(
        ["class", "base us", "opt us", "\u0394", "base share", "opt share", "counter shifts"],
        [[r.op_class.value, us(r.base_ns), us(r.opt_ns), delta_text(r), f"{r.base_share_pct:.1f}%",
          f"{r.opt_share_pct:.1f}%", _shifts(r.counters)] for r in c.classes])
    if c.shift_checks:
        lines += ["### Did the named bottleneck move as predicted?", ""]
        verdicts = {True: "yes", False: "**no**", None: "n/a"}
        lines += _table(["finding", "counter", "expected", "observed", ""],
                        [[md(s.rule_id), md(s.text), _ARROW[s.expected], _ARROW[s.observed],
                          verdicts[s.as_predicted]] for s in c.shift_checks])
    ops = c.operators.largest_changes(top_k)
    lines += [f"### Operators (top {len(ops)} by |\u0394|)", ""]
    lines += _table(["operators", "match", "base us", "opt us", "\u0394", "counter shifts"],
                    [[md(r.label), r.method.value, us(r.base_ns), us(r.opt_ns), delta_text(r),
                      _shifts(r.counters)] for r in ops])
    lines += _more(len(ops), len(c.operators), "operator groups")
    if c.new_overhead:
        lines += [f"### New overhead: {us(c.new_overhead_ns)} us", ""]
        lines += _table(["kind", "kernels", "us", "share of optimized", "names"],
                        [[r.kind, str(r.kernel_count), us(r.duration_ns), f"{r.share_of_opt_pct:.1f}%",
                          md(", ".join(r.kernel_names[:3]))] for r in c.new_overhead])
    for title, rows in (("Kernels only in the optimized run", c.only_in_opt),
                        ("Kernels only in the baseline", c.only_in_base)):
        if rows:
            lines += [f"<details><summary>{title} ({len(rows)})</summary>", ""]
            lines += _table(["kernel", "class", "count", "us"],
                            [[md(r.name), r.op_class.value, str(r.count), us(r.duration_ns)]
                             for r in rows[:15]])
            lines += _more(min(len(rows), 15), len(rows), "kernels")
            lines += ["</details>", ""]
    return lines


def _more(shown: int, total: int, what: str) -> list[str]:
    text = not_shown(shown, total, what)
    return [f"_{text}_", ""] if text else []


def findings_markdown(report: FindingsReport, heading: str = "Findings") -> list[str]:
    """The lines of a findings section, in the order the loop acts on them."""
    lines = [f"### {heading}", ""]
    if not report.findings:
        return lines + ["No rule fired.", ""]
    findings = in_priority_order(report.findings)
    lines += _table(
        ["#", "finding", "licenses", "gain bound", "share", "confidence", "symptom"],
        [[str(i), md(f.title), md(f.licenses),
          f"{f.gain_bound_pct:.1f}% ({f.gain_basis.replace('_', ' ')})", f"{f.evidence.share_pct:.1f}%",
          f.confidence.value, md(f.symptom)] for i, f in enumerate(findings, 1)])
    for i, f in enumerate(findings, 1):
        ops = ", ".join(f.operators[:6]) + (f" (+{len(f.operators) - 6})" if len(f.operators) > 6 else "")
        lines.append(f"{i}. **{md(f.rule_id)}**: {md(f.bottleneck)}. Operators: {md(ops) or '-'}.")
        for fact in f.evidence.facts:
            lines.append(f"   - {md(fact)}")
    return lines + [""]


def profile_markdown(profile: Profile, *, top_k: int = 10, heading: str = "Profile") -> list[str]:
    """The lines of a single-profile section: headline, coverage, time by class, top operators."""
    view = ProfileView.of(profile)
    cap = profile.capture
    lines = [f"## {heading}: {md(cap.workload or 'workload')}", "",
             f"{md(cap.gpu_name or 'GPU ?')} ({md(cap.chip or '?')}), {len(profile.kernels)} kernels, "
             f"{len(profile.operators)} operators, {us(view.total_ns)} us profiled kernel time, "
             f"{cap.warmup_iterations} warmup + {cap.measured_iterations} measured iterations; "
             f"{counter_provenance(profile)}.", ""]
    lines += _alerts(list(profile.warnings), profile)
    lines += ["### Coverage by tier", ""]
    lines += _table(["tier", "us", "share"], [[s.label, us(s.duration_ns), f"{s.share_pct:.1f}%"]
                                             for s in coverage_by_tier(view)])
    lines += ["### Time by operator class", ""]
    lines += _table(["class", "us", "share"], [[s.label, us(s.duration_ns), f"{s.share_pct:.1f}%"]
                                              for s in time_by_class(view)])
    top = top_operators(view, top_k)
    lines += [f"### Top {len(top)} operators", ""]
    lines += _table(
        ["operator", "class", "us", "share", *(SHORT_NAMES[f] for f in KEY_COUNTERS), "bottleneck"],
        [[md(o.key), o.op_class.value, us(o.duration_ns), f"{o.share_pct:.1f}%",
          *(format_value(o.counters[f]) for f in KEY_COUNTERS), md(o.bottleneck or "-")] for o in top])
    return lines + _more(len(top), len(profile.operators), "operators")


@shared_views()  # one view per profile for every section (a large profile's models are built once)
def render_markdown(profile: Profile | None = None, *, findings: FindingsReport | None = None,
                    comparison: Comparison | None = None, baseline: Profile | None = None,
                    top_k: int = 10, end_to_end: EndToEnd | None = None) -> str:
    """A markdown report of a profile, its findings and/or a comparison with ``baseline``.

    Each profile gets its own section, followed by the findings diagnosed from it.
    """
    if comparison is None and baseline is not None and profile is not None:
        from profiler_core.analysis.compare import compare

        comparison = compare(baseline, profile)
    if profile is None and comparison is None:
        raise ProfilerError("nothing to report: give a profile, or a comparison")
    lines = ["# oprof report", ""]
    if comparison is not None:
        lines += comparison_markdown(comparison, top_k=top_k, end_to_end=end_to_end)
    owner = findings_owner(findings, baseline, profile) if findings is not None else None
    if baseline is not None:
        lines += profile_markdown(baseline, top_k=top_k, heading="Baseline")
        if findings is not None and owner is baseline:
            lines += findings_markdown(findings, "Findings on the baseline")
    if profile is not None:
        lines += profile_markdown(profile, top_k=top_k, heading="Optimized" if baseline is not None else "Profile")
        from profiler_core.report.roofline_report import roofline_markdown

        lines += roofline_markdown(profile)
        if findings is not None and owner is not baseline:
            lines += findings_markdown(findings, "Findings on the optimized run" if baseline is not None
                                       else "Findings")
    return "\n".join(lines).rstrip() + "\n"
