"""The table ``oprof demo`` prints over the shipped captures: its columns, rows and legend.

Three columns describe the baseline capture alone; two compare before with after (profiled kernel
time, and wall time per step end to end). The legend says which are which, and a note per example
says why its two before -> after columns tell different stories where they do (tv_resnet18:
kernels 0.98x, step 1.29x; CUDA graphs remove launch gaps, not kernels).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from profiler_core.api import ShippedAnalysis

COLUMNS = ("example", "kernels", "attributed", "top finding", "passes kept", "kernel time", "end to end")


def legend(notes: list[tuple[str, str]]) -> list[str]:
    """What the table's columns measure, and why kernel time and end to end disagree where they do.

    ``notes``: (example, why its two before -> after columns tell different stories).
    """
    lines = [
        "Baseline capture only: kernels, attributed (share of kernel time tied to an operator), top finding.",
        "Before -> after the shipped optimize run: kernel time (profiled GPU kernel time per step, summed) and "
        "end to end (median wall time per step over 30 unprofiled iterations; the speedup a user sees).",
        "The two differ when time outside the kernels changes: CUDA graphs remove launch gaps, not kernels; "
        "a host-bound step gains nothing from faster kernels.",
    ]
    lines += [f"  {name}: {note}" for name, note in notes]
    return lines



def row_of(done: ShippedAnalysis) -> tuple[tuple[str, ...], str, str | None]:
    """One example analysed: the table's cells, its report, and why its two before -> after columns differ."""
    from profiler_core.analysis.findings import in_priority_order
    from profiler_core.report.end_to_end import disagreement, speedup_verdict

    top = next(iter(in_priority_order(done.findings.findings)), None)
    top_text = f"{top.rule_id} -> {top.transformation or 'structural'}" if top else "-"
    c = done.comparison
    kernel = (f"{c.base_total_ns / 1e3:.0f} -> {c.opt_total_ns / 1e3:.0f} us ({c.speedup:.2f}x)" if c is not None
              else f"{done.baseline.coverage.duration_ns / 1e3:.0f} us")
    kept = "-" if done.kept_passes is None else (", ".join(done.kept_passes) or "none")
    w = done.wall_ms
    note = None
    if "baseline" in w and "optimized" in w:
        wall_speedup = w["baseline"] / w["optimized"]
        wall = f"{w['baseline']:.2f} -> {w['optimized']:.2f} ms ({wall_speedup:.2f}x)"
        if c is not None and c.speedup and (kv := c.verdict) != (wv := speedup_verdict(wall_speedup)):
            note = f"kernels {c.speedup:.2f}x, step {wall_speedup:.2f}x: {disagreement(kv, wv)}"
    elif "baseline" in w:  # nothing kept: the baseline's own timing
        wall = f"{w['baseline']:.2f} ms"
    else:
        wall = "-"
    cov = done.baseline.coverage
    cells = (done.name, str(cov.kernel_count), f"{cov.attributed_time_pct:.1f}%", top_text, kept, kernel, wall)
    return cells, str(done.report_html), note
