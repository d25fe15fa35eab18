"""Roofline and module tree sections for the reports: HTML sections, markdown lines, summary fields.

    roofline_html(profile)    the roofline chart (report/roofline_chart.py) and the operators with most headroom
    modules_html(rollup)      the module tree with time, share and bottleneck per node, repeated blocks side by side
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from profiler_core.analysis.modules import ModuleRollup, module_rollup
from profiler_core.analysis.profile_view import ProfileView
from profiler_core.analysis.roofline import Roofline
from profiler_core.report.roofline_chart import roofline_svg, si
from profiler_core.report.svg_charts import hbar_chart
from profiler_core.report.templating import render
from profiler_core.schema import Profile

TREE_DEPTH, TREE_ROWS = 3, 40


def _si(value: float, unit: str) -> str:
    return si(value, unit)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def roofline_html(profile: Profile, roof: Roofline | None = None, *, top_k: int = 12) -> str:
    """The roofline section: chart, then the operators with the most headroom."""
    roof = roof or ProfileView.of(profile).measured_roofline
    svg = roofline_svg(roof)
    rows = roof.most_headroom(top_k, with_headroom=True)
    return render(
        "roofline.html.j2", svg=Markup(svg), warning=roof.warnings[0] if roof.warnings else None,
        which="measured" if roof.measured_roofs else "published",
        rows=[{"key": r.key, "module_path": r.module_path,
               "flops_text": f"{_si(r.flops, '')} ({r.flop_source})" if r.flops else "-",
               "intensity": f"{r.arithmetic_intensity:.3g}" if r.arithmetic_intensity else "-",
               "achieved": _si(r.achieved_flops_per_s, "FLOP/s") if r.achieved_flops_per_s else "-",
               "bound": f"{r.bound} ({r.roof})" if r.roof else (r.bound or "-"),
               "of_roofline": _pct(r.fraction_of_roofline), "headroom": f"{(r.headroom_ns or 0) / 1e3:.1f}"}
              for r in rows])


def modules_html(profile: Profile, rollup: ModuleRollup | None = None) -> str:
    """The module tree section (empty when no kernel carries a module path)."""
    rollup = rollup or module_rollup(profile)
    if not rollup.nodes:
        return ""
    groups = [(Markup(hbar_chart([(b.path, b.duration_ns / 1e3) for b in group.blocks], unit="us",
                                 title=f"Repeated blocks of {group.parent or '(model)'}: time per block")),
               ", ".join(f"{b.path} ({b.vs_median:.2f}x median)" for b in group.outliers))
              for group in rollup.groups[:2]]
    return render("modules.html.j2", coverage_pct=rollup.coverage_pct,
                  nodes=rollup.tree(max_depth=TREE_DEPTH)[:TREE_ROWS],
                  total=rollup.nodes[""].duration_ns if "" in rollup.nodes else rollup.total_ns, groups=groups)


def roofline_markdown(profile: Profile, *, top_k: int = 8) -> list[str]:
    """Markdown lines: per-class roofline, the operators with most headroom, the module tree's top levels."""
    roof = ProfileView.of(profile).measured_roofline
    lines = ["### Roofline", ""]
    if roof.chip is None:
        return [*lines, roof.warnings[0] if roof.warnings else "no roofs", ""]
    lines += [f"Roofs: {roof.chip.name} ({roof.chip.source}); measured where known.", "",
              "| class | us | FLOPs | FLOP/B | achieved | headroom us |", "|---|---|---|---|---|---|"]
    for c in roof.classes:
        lines.append(f"| {c.op_class} | {c.duration_ns / 1e3:.1f} | {_si(c.flops, '') if c.flops else '-'} | "
                     f"{f'{c.arithmetic_intensity:.3g}' if c.arithmetic_intensity else '-'} | "
                     f"{_si(c.achieved_flops_per_s, 'FLOP/s') if c.achieved_flops_per_s else '-'} | "
                     f"{(c.headroom_ns or 0) / 1e3:.1f} |")
    rows = roof.most_headroom(top_k, with_headroom=True)
    lines += ["", "| operator | module | bound | of roofline | headroom us | FLOPs from |", "|---|---|---|---|---|---|"]
    lines += [f"| {r.key} | {r.module_path or '-'} | {r.bound or '-'} ({r.roof or '-'}) | "
              f"{_pct(r.fraction_of_roofline)} | {(r.headroom_ns or 0) / 1e3:.1f} | {r.flop_source or '-'} |"
              for r in rows]
    rollup = module_rollup(profile, roof)
    if rollup.nodes:
        lines += ["", "### Modules", "", "| module | total us | self us | bottleneck |", "|---|---|---|---|"]
        lines += [f"| {_tree_prefix(n.depth)}{n.path or '(model)'} | {n.duration_ns / 1e3:.1f} | "
                  f"{n.self_ns / 1e3:.1f} | {n.bottleneck} |" for n in rollup.tree(max_depth=2)[:20]]
    return [*lines, ""]


def _tree_prefix(depth: int) -> str:
    """Plain-text indentation for a module row (Markdown tables collapse spaces; no HTML escapes)."""
    return "" if depth <= 0 else "· " * (depth - 1) + "└─ "


def roofline_summary(profile: Profile, *, top_k: int = 5) -> dict[str, Any]:
    """Compact fields for the agent summary: chip roofs, top headroom operators, repeated-block spread."""
    roof = ProfileView.of(profile).measured_roofline
    rows = roof.most_headroom(top_k, with_headroom=True)
    rollup = module_rollup(profile, roof)
    out: dict[str, Any] = {
        "chip": roof.chip.key if roof.chip else None,
        "top_headroom": [{"key": r.key, "module": r.module_path, "bound": r.bound, "roof": r.roof,
                          "of_roofline_pct": None if r.fraction_of_roofline is None
                          else round(100 * r.fraction_of_roofline, 1),
                          "headroom_us": round((r.headroom_ns or 0) / 1e3, 1), "flops_from": r.flop_source}
                         for r in rows],
    }
    if rollup.groups:
        g = rollup.groups[0]
        out["blocks"] = {"parent": g.parent, "n": len(g.blocks),
                         "us": [round(b.duration_ns / 1e3, 1) for b in g.blocks],
                         "outliers": [b.path for b in g.outliers]}
    return out
