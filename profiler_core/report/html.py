"""A single self-contained HTML report: inline CSS and SVG charts, no JavaScript, no external files.

Charts: time by operator class, coverage by tier, top operators; with a baseline, also
baseline vs optimized per class and the counter shifts of the busiest classes. Every string
from a profile (kernel names carry ``<`` and ``>``; a workload name could carry anything)
goes through ``html.escape``.
"""

from __future__ import annotations

from html import escape

from profiler_core.analysis.compare import Comparison, CounterDelta
from profiler_core.analysis.counter_format import format_value
from profiler_core.analysis.findings import FindingsReport, in_priority_order
from profiler_core.analysis.profile_view import ProfileView
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
from profiler_core.report.svg_charts import (
    CLASS_COLORS,
    dumbbell_chart,
    grouped_bars,
    hbar_chart,
    stacked_bar,
)
from profiler_core.schema import Profile, Tier

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;
color:#1d1d1f;padding:0 16px;line-height:1.4}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;
padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
.meta{color:#555;font-size:13px}.warn{background:#fff1f0;border:2px solid #d4380d;color:#a8071a;
padding:10px 14px;border-radius:6px;margin:12px 0;font-weight:600}.warn li{font-weight:500}
.verdict{font-size:18px;padding:10px 14px;border-radius:6px;margin:12px 0;background:#f0f5ff;
border:1px solid #adc6ff}.faster{background:#f6ffed;border-color:#95de64}.slower{background:#fff1f0;
border-color:#ff7875}table{border-collapse:collapse;font-size:12px;margin:6px 0 12px;width:100%}
th,td{border:1px solid #e3e3e3;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#fafafa}td.n{text-align:right;font-variant-numeric:tabular-nums}
.name{font-family:ui-monospace,Menlo,Consolas,monospace;word-break:break-all}
.finding{border:1px solid #e3e3e3;border-left:4px solid #4269d0;border-radius:4px;padding:8px 12px;
margin:8px 0}.finding.structural{border-left-color:#d4380d}.finding.note{border-left-color:#9498a0}
.tag{display:inline-block;background:#eef;border-radius:3px;padding:0 6px;font-size:12px;margin-right:6px}
.notes{background:#fafafa;border:1px solid #ddd;color:#555;padding:6px 14px;border-radius:6px;margin:8px 0;
font-size:13px}.unchanged{background:#fffbe6;border-color:#ffd666}
svg.chart{display:block;margin:8px 0 16px;max-width:100%;height:auto}
"""
_TIER_COLORS = {Tier.CUPTI_CORRELATION.value: "#3ca951", Tier.NCU_NVTX.value: "#6cc5b0",
                Tier.NSYS_NVTX.value: "#4269d0", Tier.INDUCTOR_FUSION.value: "#efb118",
                Tier.CUDA_GRAPH.value: "#a463f2", Tier.UNATTRIBUTED.value: "#ff725c"}
_SHIFT_FIELDS = ("tensor_core_active_pct", "achieved_occupancy_pct", "dram_throughput_pct",
                 "sm_throughput_pct")


def _table(header: list[str], rows: list[list[str]], numeric: set[int] | None = None) -> str:
    """Rows are already-escaped HTML fragments."""
    numeric = numeric or set()
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _warnings(items: list[str], profile: Profile | None = None) -> str:
    """A red box for what can change a conclusion; the rest as plain notes."""
    serious, notes = split_warnings(items, profile)
    out = ""
    if serious:
        lis = "".join(f"<li>{escape(w)}</li>" for w in serious)
        out += f'<div class="warn">Warning: read the numbers below with care<ul>{lis}</ul></div>'
    if notes:
        out += '<div class="notes">Notes<ul>' + "".join(f"<li>{escape(w)}</li>" for w in notes) + "</ul></div>"
    return out


def _more(shown: int, total: int, what: str) -> str:
    text = not_shown(shown, total, what)
    return f'<p class="meta">{escape(text)}</p>' if text else ""


def _shifts(counters: list[CounterDelta]) -> str:
    return "; ".join(shift_parts(counters, "&rarr;", escape)) or "-"


def comparison_html(c: Comparison, *, top_k: int = 15, end_to_end: EndToEnd | None = None) -> str:
    """The comparison section; its banner's verdict follows wall time when the run measured it."""
    verdict, text = banner(c, end_to_end)
    word, _, rest = text.partition(" ")
    parts = [f"<h2>Baseline vs optimized</h2><p class=\"meta\">{escape(c.base_label or 'baseline')} &rarr; "
             f"{escape(c.opt_label or 'optimized')}</p>", _warnings(c.warnings),
             f'<div class="verdict {verdict}"><b>{escape(word)}</b> {escape(rest).replace("-&gt;", "&rarr;")} '
             f"Comparable: <b>{'yes' if c.comparability.comparable else 'NO'}</b>.</div>"]
    parts.append(grouped_bars([(r.op_class.value, r.base_ns / 1000, r.opt_ns / 1000) for r in c.classes],
                              labels=("baseline", "optimized"), unit="us",
                              title="Kernel time per operator class: baseline vs optimized"))
    shift_rows = []
    for r in c.classes[:4]:
        for d in r.counters:
            if d.field in _SHIFT_FIELDS and (d.base is not None or d.opt is not None):
                shift_rows.append((f"{r.op_class.value} {SHORT_NAMES[d.field]}", d.base, d.opt))
    if shift_rows:
        parts.append(dumbbell_chart(shift_rows, title="Counter shifts in the busiest classes (percent)"))
    parts.append("<h3>By operator class</h3>" + _table(
        ["class", "base us", "opt us", "&Delta;", "base share", "opt share", "counter shifts"],
        [[escape(r.op_class.value), us(r.base_ns), us(r.opt_ns),
          delta_text(r), f"{r.base_share_pct:.1f}%",
          f"{r.opt_share_pct:.1f}%", _shifts(r.counters)] for r in c.classes], numeric={1, 2, 3, 4, 5}))
    if c.shift_checks:
        parts.append("<h3>Did the named bottleneck move as predicted?</h3>" + _table(
            ["finding", "counter", "expected", "observed", "as predicted"],
            [[escape(s.rule_id), escape(s.text), s.expected, s.observed,
              {True: "yes", False: "<b>no</b>", None: "n/a"}[s.as_predicted]] for s in c.shift_checks]))
    ops = sorted(c.operators, key=lambda r: -abs(r.delta_ns))[:top_k]
    parts.append(f"<h3>Operators (top {len(ops)} by |&Delta;|)</h3>" + _table(
        ["operators", "match", "base us", "opt us", "&Delta;", "counter shifts"],
        [[f'<span class="name">{escape(r.label)}</span>', escape(r.method.value), us(r.base_ns),
          us(r.opt_ns), delta_text(r), _shifts(r.counters)]
         for r in ops], numeric={2, 3, 4}) + _more(len(ops), len(c.operators), "operator groups"))
    if c.new_overhead:
        parts.append(f"<h3>New overhead: {us(c.new_overhead_ns)} us</h3>" + _table(
            ["kind", "kernels", "us", "share of optimized", "names"],
            [[escape(r.kind), str(r.kernel_count), us(r.duration_ns), f"{r.share_of_opt_pct:.1f}%",
              f'<span class="name">{escape(", ".join(r.kernel_names[:3]))}</span>'] for r in c.new_overhead],
            numeric={1, 2, 3}))
    for title, rows in (("Kernels only in the optimized run", c.only_in_opt),
                        ("Kernels only in the baseline", c.only_in_base)):
        if rows:
            parts.append(f"<h3>{title} ({len(rows)})</h3>" + _table(
                ["kernel", "class", "count", "us"],
                [[f'<span class="name">{escape(r.name)}</span>', escape(r.op_class.value), str(r.count),
                  us(r.duration_ns)] for r in rows[:15]], numeric={2, 3}) + _more(min(len(rows), 15), len(rows),
                                                                                   "kernels"))
    return "".join(parts)


def profile_html(profile: Profile, *, top_k: int = 12, heading: str = "Where the time went") -> str:
    """The single-profile section: class and tier charts, top operators with their counters."""
    view = ProfileView(profile)
    classes = time_by_class(view)
    tiers = coverage_by_tier(view)
    top = top_operators(view, top_k)
    parts = [f"<h2>{escape(heading)}</h2>", f'<p class="meta">{escape(_summary(profile, view))}</p>',
             _warnings(list(profile.warnings), profile),
             hbar_chart([(s.label, s.duration_ns / 1000) for s in classes], unit="us",
                        title="Kernel time by operator class",
                        colors=[CLASS_COLORS.get(s.label, "#9498a0") for s in classes]),
             stacked_bar([(s.label, s.duration_ns) for s in tiers], colors=_TIER_COLORS,
                         title="Coverage: kernel time by attribution tier"),
             hbar_chart([(o.key, o.duration_ns / 1000) for o in top], unit="us",
                        title=f"Top {len(top)} operators by kernel time (colored by class)",
                        colors=[CLASS_COLORS.get(o.op_class.value, "#9498a0") for o in top])]
    parts.append("<h3>Top operators and their bottleneck counters</h3>" + _table(
        ["operator", "class", "us", "share", *(escape(SHORT_NAMES[f]) for f in KEY_COUNTERS), "bottleneck",
         "tier"],
        [[f'<span class="name">{escape(o.key)}</span>', escape(o.op_class.value), us(o.duration_ns),
          f"{o.share_pct:.1f}%", *(format_value(o.counters[f]) for f in KEY_COUNTERS),
          escape(o.bottleneck or "-"), escape(o.tier)] for o in top],
        numeric={2, 3, 4, 5, 6, 7, 8}) + _more(len(top), len(profile.operators), "operators"))
    if view.unattributed_kernels:
        rows = sorted(view.unattributed_kernels, key=lambda kern: -kern.duration_ns)[:10]
        parts.append(f"<h3>Unattributed kernels ({len(view.unattributed_kernels)}, "
                     f"{view.share_pct(view.unattributed_ns):.1f}% of kernel time)</h3>" + _table(
            ["kernel", "class", "us", "reason"],
            [[f'<span class="name">{escape(kern.name)}</span>', escape(view.kernel_class(kern).value),
              us(kern.duration_ns), escape(kern.attribution.reason or "-")] for kern in rows], numeric={2})
            + _more(len(rows), len(view.unattributed_kernels), "kernels"))
    return "".join(parts)


def _summary(profile: Profile, view: ProfileView) -> str:
    cap = profile.capture
    return (f"{cap.workload or 'workload'}: {len(profile.kernels)} kernels, {len(profile.operators)} operators, "
            f"{us(view.total_ns)} us profiled kernel time over {cap.measured_iterations} measured iterations; "
            f"{counter_provenance(profile)}")


def findings_html(report: FindingsReport, heading: str = "Findings") -> str:
    """The findings section: one card per finding, in the order the loop acts on them."""
    if not report.findings:
        return f"<h3>{escape(heading)}</h3><p>No rule fired.</p>"
    cards = []
    for f in in_priority_order(report.findings):
        licenses = f.licenses
        more = len(f.operators) - 8
        ops = ", ".join(f.operators[:8]) + (f" (+{more} more)" if more > 0 else "")
        facts = "".join(f"<li>{escape(x)}</li>" for x in f.evidence.facts)
        cards.append(
            f'<div class="finding {f.kind.value}"><b>{escape(f.title)}</b> '
            f'<span class="tag">{escape(licenses)}</span><span class="tag">bound {f.gain_bound_pct:.1f}% '
            f"({escape(f.gain_basis.replace('_', ' '))})</span><span class=\"tag\">confidence "
            f"{escape(f.confidence.value)}</span><br>{escape(f.symptom)}. <i>{escape(f.bottleneck)}</i>."
            f'<br><span class="meta">operators: <span class="name">{escape(ops) or "-"}</span></span>'
            f"<ul>{facts}</ul></div>")
    return (f"<h3>{escape(heading)}</h3><p class=\"meta\">in the order to act on them: structural changes "
            "that license a pass first, then by the bound on the gain</p>" + "".join(cards))


def render_html(profile: Profile | None = None, *, findings: FindingsReport | None = None,
                comparison: Comparison | None = None, baseline: Profile | None = None,
                title: str | None = None, end_to_end: EndToEnd | None = None) -> str:
    """One self-contained HTML document for a profile, its findings and/or a comparison.

    Each profile gets its own section, with the findings diagnosed from it (``findings`` goes to
    the profile it was diagnosed from: the baseline's findings under the baseline's tables).
    """
    if comparison is None and baseline is not None and profile is not None:
        from profiler_core.analysis.compare import compare

        comparison = compare(baseline, profile)
    if profile is None and comparison is None:
        raise ProfilerError("nothing to report: give a profile, or a comparison")
    cap = profile.capture if profile is not None else None
    name = title or (cap.workload if cap and cap.workload else "profile")
    meta = ""
    if profile is not None and cap is not None:
        view = ProfileView(profile)
        # with a baseline, each section states its own profile's counts; the header only what both share
        counts = "" if baseline is not None else (
            f"{len(profile.kernels)} kernels &middot; {len(profile.operators)} operators &middot; "
            f"{us(view.total_ns)} us profiled kernel time &middot; ")
        meta = (f"{escape(cap.gpu_name or 'GPU ?')} ({escape(cap.chip or '?')}) &middot; {counts}"
                f"{cap.warmup_iterations} warmup + {cap.measured_iterations} measured iterations &middot; "
                f"compile mode {escape(cap.compile_mode or '?')}")
    body = [f"<h1>oprof report: {escape(name)}</h1><p class=\"meta\">{meta}</p>"]
    if comparison is not None:
        body.append(comparison_html(comparison, end_to_end=end_to_end))
    owner = findings_owner(findings, baseline, profile) if findings is not None else None
    if baseline is not None:
        body.append(profile_html(baseline, heading="Baseline: where the time went"))
        if findings is not None and owner is baseline:
            body.append(findings_html(findings, "Findings on the baseline"))
    if profile is not None:
        body.append(profile_html(profile, heading="Optimized: where the time went" if baseline is not None
                                 else "Where the time went"))
        from profiler_core.report.roofline_report import modules_html, roofline_html

        body.append(roofline_html(profile))
        body.append(modules_html(profile))
        if findings is not None and owner is not baseline:
            body.append(findings_html(findings, "Findings on the optimized run" if baseline is not None
                                      else "Findings"))
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>oprof: {escape(name)}</title><style>{_CSS}</style></head>"
            f"<body>{''.join(body)}</body></html>\n")
