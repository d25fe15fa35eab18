"""Terminal reports with rich: tables for a comparison, a profile and its findings.

Comparability warnings print first, in bold red, above any speedup. The CLI prints these
renderables on stderr; ``render_terminal`` returns the same output as plain text.
"""

from __future__ import annotations

import io

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from profiler_core.analysis.compare import Comparison, CounterDelta
from profiler_core.analysis.counter_format import format_value
from profiler_core.analysis.findings import FindingsReport, in_priority_order
from profiler_core.analysis.profile_view import ProfileView
from profiler_core.report.digest import (
    KEY_COUNTERS,
    SHORT_NAMES,
    coverage_by_tier,
    delta_text,
    shift_parts,
    time_by_class,
    top_operators,
    us,
)
from profiler_core.report.end_to_end import EndToEnd, banner, wall_verdict
from profiler_core.schema import Profile

_VERDICT_STYLE = {"faster": "bold green", "slower": "bold red", "unchanged": "bold yellow"}


def _shifts(counters: list[CounterDelta]) -> str:
    return "; ".join(shift_parts(counters, "\u2192")) or "-"


def warnings_renderable(warnings: list[str]) -> RenderableType | None:
    """Warnings in bold red, one per line (None when there are none)."""
    if not warnings:
        return None
    return Text("\n".join(f"WARNING: {w}" for w in warnings), style="bold red")


def comparison_renderables(c: Comparison, *, top_k: int = 10,
                           end_to_end: EndToEnd | None = None) -> list[RenderableType]:
    """Verdict (end to end first, when wall time was measured), class and operator tables, shifts, overhead."""
    out: list[RenderableType] = []
    if (w := warnings_renderable(c.warnings)) is not None:
        out.append(w)
    if wall_verdict(end_to_end) is not None:
        verdict, text = banner(c, end_to_end)
        word, _, rest = text.partition(" ")
        out.append(Text.assemble((word, _VERDICT_STYLE[verdict]), " " + rest))
    speed = f"{c.speedup:.2f}x" if c.speedup else "n/a"
    per = " per iteration" if c.per_iteration else ""
    out.append(Text.assemble(
        (c.verdict.upper(), _VERDICT_STYLE[c.verdict]),
        f": {us(c.base_total_ns)} us -> {us(c.opt_total_ns)} us{per} "
        f"({speed}, {c.delta_pct:+.1f}%) on profiled kernel time; comparable: "
        f"{'yes' if c.comparability.comparable else 'NO'}"))
    classes = Table(title="By operator class", title_justify="left")
    for col, justify in (("class", "left"), ("base us", "right"), ("opt us", "right"), ("delta", "right"),
                         ("base %", "right"), ("opt %", "right"), ("counter shifts", "left")):
        classes.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in c.classes:
        classes.add_row(r.op_class.value, us(r.base_ns), us(r.opt_ns),
                        delta_text(r), f"{r.base_share_pct:.1f}",
                        f"{r.opt_share_pct:.1f}", _shifts(r.counters))
    out.append(classes)
    if c.shift_checks:
        checks = Table(title="Predicted counter shifts", title_justify="left")
        for col in ("finding", "counter", "expected", "observed", "as predicted"):
            checks.add_column(col)
        for s in c.shift_checks:
            checks.add_row(s.rule_id, s.text, s.expected, s.observed,
                           {True: "yes", False: "[bold red]no[/]", None: "n/a"}[s.as_predicted])
        out.append(checks)
    ops = Table(title=f"Operators (top {top_k} by |delta|)", title_justify="left")
    for col, justify in (("operators", "left"), ("match", "left"), ("base us", "right"), ("opt us", "right"),
                         ("delta", "right")):
        ops.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for op_row in c.operators.largest_changes(top_k):
        ops.add_row(Text(op_row.label), op_row.method.value, us(op_row.base_ns), us(op_row.opt_ns),
                    delta_text(op_row))
    out.append(ops)
    if c.new_overhead:
        out.append(Text("new overhead: " + "; ".join(
            f"{r.kind} {r.kernel_count} kernels {us(r.duration_ns)} us ({r.share_of_opt_pct:.1f}%)"
            for r in c.new_overhead), style="yellow"))
    if c.only_in_opt or c.only_in_base:
        out.append(Text(f"kernels only in optimized: {len(c.only_in_opt)}, only in baseline: "
                        f"{len(c.only_in_base)}"))
    return out


def profile_renderables(profile: Profile, *, top_k: int = 10) -> list[RenderableType]:
    """Coverage, time by class and the top operators with their key counters."""
    view = ProfileView.of(profile)
    cap = profile.capture
    out: list[RenderableType] = []
    if (w := warnings_renderable(list(profile.warnings))) is not None:
        out.append(w)
    out.append(Text(f"{cap.workload or 'profile'}: {cap.gpu_name or 'GPU ?'} ({cap.chip or '?'}), "
                    f"{len(profile.kernels)} kernels, {len(profile.operators)} operators, "
                    f"{us(view.total_ns)} us profiled kernel time", style="bold"))
    for label, shares in (("coverage", coverage_by_tier(view)), ("time by class", time_by_class(view))):
        out.append(Text(f"{label}: " + ", ".join(f"{s.label} {s.share_pct:.1f}%" for s in shares)))
    table = Table(title=f"Top {top_k} operators", title_justify="left")
    table.add_column("operator", overflow="fold")
    table.add_column("class")
    table.add_column("us", justify="right")
    table.add_column("%", justify="right")
    for f in KEY_COUNTERS:
        table.add_column(SHORT_NAMES[f], justify="right")
    table.add_column("bottleneck")
    for o in top_operators(view, top_k):
        table.add_row(Text(o.key), o.op_class.value, us(o.duration_ns), f"{o.share_pct:.1f}",
                      *(format_value(o.counters[f]) for f in KEY_COUNTERS), o.bottleneck or "-")
    out.append(table)
    return out


def findings_renderables(report: FindingsReport) -> list[RenderableType]:
    """One table row per finding, then its facts."""
    if not report.findings:
        return [Text("no rule fired", style="green")]
    findings = in_priority_order(report.findings)
    table = Table(title="Findings (in the order to act on them: structural first, then by gain bound)",
                  title_justify="left")
    for col, justify in (("#", "right"), ("finding", "left"), ("licenses", "left"), ("bound", "right"),
                         ("conf.", "left"), ("symptom", "left")):
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for i, f in enumerate(findings, 1):
        table.add_row(str(i), f.rule_id, f.licenses, f"{f.gain_bound_pct:.1f}%", f.confidence.value,
                      Text(f.symptom))
    facts = [Text(f"{i}. {f.rule_id}: " + "; ".join(f.evidence.facts[:3]), style="dim")
             for i, f in enumerate(findings, 1)]
    return [table, *facts]


def render_terminal(profile: Profile | None = None, *, findings: FindingsReport | None = None,
                    comparison: Comparison | None = None, width: int = 140) -> str:
    """The terminal report as plain text (what the CLI prints, without colour)."""
    parts: list[RenderableType] = []
    if comparison is not None:
        parts += comparison_renderables(comparison)
    if profile is not None:
        parts += profile_renderables(profile)
    if findings is not None:
        parts += findings_renderables(findings)
    console = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    console.print(Group(*parts))
    return console.export_text()
