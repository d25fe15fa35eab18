"""Roofline chart and module tree for the reports: inline SVG, HTML sections, markdown lines, summary fields.

    roofline_svg(roof)        log-log: arithmetic intensity (FLOP/byte) x achieved FLOP/s, one point per
                              operator sized by its time and colored by class, the chip's roofs per precision
    modules_html(rollup)      the module tree with time, share and bottleneck per node, repeated blocks side by side
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from markupsafe import Markup

from profiler_core.analysis.modules import ModuleRollup, module_rollup
from profiler_core.analysis.roofline import OperatorRoofline, Roofline, roofline
from profiler_core.report.svg_charts import CLASS_COLORS, hbar_chart
from profiler_core.report.templating import render
from profiler_core.schema import Profile

_ROOF_COLORS = {"fp64": "#9c6b4e", "fp32": "#3ca951", "fp16": "#6cc5b0", "tf32_tensor": "#efb118",
                "fp16_tensor": "#ff8ab7", "bf16_tensor": "#ff725c", "fp8_tensor": "#a463f2",
                "fp64_tensor": "#97bbf5"}
_DRAWN = ("fp32", "tf32_tensor", "bf16_tensor", "fp8_tensor", "fp64")
_FONT = "font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;font-size:11px"
TREE_DEPTH, TREE_ROWS = 3, 40


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def plotted(roof: Roofline) -> list[OperatorRoofline]:
    """Operators with both FLOPs and DRAM bytes (the points a roofline can place)."""
    return [r for r in roof.operators if r.flops and r.dram_bytes and r.duration_ns > 0]


def roofline_svg(roof: Roofline, *, width: int = 800, height: int = 420) -> str:
    """The roofline chart as one ``<svg>`` (no script); an empty string when nothing can be placed."""
    points = plotted(roof)
    if roof.chip is None or not points:
        return ""
    left, right, top, bottom = 92, 190, 26, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    peaks = {name: roof.chip.flops[name] for name in _DRAWN if name in roof.chip.flops}
    y_max = 10 ** math.ceil(math.log10(max(peaks.values()) * 1.5))
    y_min = 10 ** math.floor(math.log10(min(min(r.achieved_flops_per_s or y_max for r in points), y_max / 1e4)))
    x_min = 10 ** math.floor(math.log10(min(min(r.arithmetic_intensity or 1 for r in points), 0.1)))
    x_max = 10 ** math.ceil(math.log10(max(max(r.arithmetic_intensity or 1 for r in points), 1e3)))

    def px(i: float) -> float:
        return left + (math.log10(i) - math.log10(x_min)) / (math.log10(x_max) - math.log10(x_min)) * plot_w

    def py(f: float) -> float:
        return top + plot_h - (math.log10(f) - math.log10(y_min)) / (math.log10(y_max) - math.log10(y_min)) * plot_h

    body: list[str] = [f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#ccc"/>']
    for e in range(int(math.log10(x_min)), int(math.log10(x_max)) + 1):
        x = px(10.0**e)
        body.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#eee"/>'
                    f'<text x="{x:.1f}" y="{top + plot_h + 14}" text-anchor="middle">1e{e}</text>')
    for e in range(int(math.log10(y_min)), int(math.log10(y_max)) + 1):
        y = py(10.0**e)
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#eee"/>'
                    f'<text x="{left - 4}" y="{y:.1f}" text-anchor="end" dominant-baseline="middle">'
                    f"{escape(_si(10.0**e, 'FLOP/s'))}</text>")
    body.append(f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle">arithmetic intensity '
                "(FLOP per DRAM byte)</text>")
    variants = [(False, "4 3", roof.chip.dram_bytes_per_s, "published")]
    if roof.chip.measured:
        variants.append((True, "", roof.chip.bandwidth(measured=True), "measured"))
    legend_y = top + 4
    for measured, dash, bandwidth, label in variants:
        for name, published_peak in peaks.items():
            peak = roof.chip.flops_per_s(name, measured=True) if measured else published_peak
            if measured and name not in roof.chip.measured:
                continue
            assert peak is not None
            ridge = peak / bandwidth
            x0 = max(x_min, y_min / bandwidth)
            segs = [(x0, x0 * bandwidth), (ridge, peak), (x_max, peak)] if ridge > x_min else [(x_min, peak),
                                                                                                 (x_max, peak)]
            path = " ".join(f"{px(i):.1f},{py(min(f, y_max)):.1f}" for i, f in segs)
            color = _ROOF_COLORS.get(name, "#666")
            body.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.6" '
                        f'stroke-dasharray="{dash}"><title>{escape(name)} {label}: {escape(_si(peak, "FLOP/s"))}, '
                        f'{escape(_si(bandwidth, "B/s"))}</title></polyline>')
            body.append(f'<line x1="{width - right + 8}" y1="{legend_y}" x2="{width - right + 26}" y2="{legend_y}" '
                        f'stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>'
                        f'<text x="{width - right + 30}" y="{legend_y}" dominant-baseline="middle">'
                        f"{escape(name)} ({label})</text>")
            legend_y += 15
    total = sum(r.duration_ns for r in points) or 1
    for r in sorted(points, key=lambda r: -r.duration_ns):
        assert r.arithmetic_intensity is not None and r.achieved_flops_per_s is not None
        radius = 2 + 14 * math.sqrt(r.duration_ns / total)
        color = CLASS_COLORS.get(r.op_class, "#9498a0")
        tip = (f"{r.key} ({r.op_class}{', ' + r.module_path if r.module_path else ''}): {r.duration_ns / 1e3:.1f} us, "
               f"{_si(r.achieved_flops_per_s, 'FLOP/s')}, I={r.arithmetic_intensity:.3g} FLOP/B, "
               f"{r.bound or '?'}-bound, {(r.fraction_of_roofline or 0):.0%} of roofline, FLOPs {r.flop_source}")
        body.append(f'<circle cx="{px(r.arithmetic_intensity):.1f}" cy="{py(max(r.achieved_flops_per_s, y_min)):.1f}" '
                    f'r="{radius:.1f}" fill="{color}" fill-opacity="0.55" stroke="{color}">'
                    f"<title>{escape(tip)}</title></circle>")
    title = f"Roofline on {roof.chip.name}: operators sized by time, colored by class"
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" style="{_FONT}"><title>{escape(title)}</title>'
            f'<text x="0" y="14" font-weight="600" font-size="13">{escape(title)}</text>' + "".join(body) + "</svg>")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def roofline_html(profile: Profile, roof: Roofline | None = None, *, top_k: int = 12) -> str:
    """The roofline section: chart, then the operators with the most headroom."""
    roof = roof or roofline(profile, measured_roofs=True)
    svg = roofline_svg(roof)
    rows = sorted((r for r in roof.operators if r.headroom_ns), key=lambda r: -(r.headroom_ns or 0))[:top_k]
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
    roof = roofline(profile, measured_roofs=True)
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
    rows = sorted((r for r in roof.operators if r.headroom_ns), key=lambda r: -(r.headroom_ns or 0))[:top_k]
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
    roof = roofline(profile, measured_roofs=True)
    rows = sorted((r for r in roof.operators if r.headroom_ns), key=lambda r: -(r.headroom_ns or 0))[:top_k]
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
