"""The roofline chart of the HTML report, drawn by matplotlib's SVG backend (imported only when drawn).

Log-log: arithmetic intensity (FLOP per DRAM byte) against achieved FLOP/s. The memory roof
(DRAM bandwidth) and every compute roof the chip has are drawn and labelled; measured roofs, where
the chip has them, are solid beside the dashed published ones. One point per operator that has
both FLOPs and DRAM bytes, its area proportional to its time, coloured by operator class; the
caption says how many operators are placed and why the others are not. Above ``MAX_MARKERS``
operators, those of a class less than 1/``BINS_PER_DECADE`` of a decade apart on both axes (under
a pixel at the chart's size) are drawn as one marker at their time-weighted place, its area their
summed time, and the caption says so (a long capture's 100k operators are otherwise 100k SVG paths
and tens of MB of page):

    roofline_svg(roofline(profile, measured_roofs=True))  ->  '<svg ...>...</svg>' ('' when nothing is placed)

Each element carries an SVG id the tests and a reader can find: ``roof-dram-published``,
``roof-bf16_tensor-measured``, ``roof-fp16_tensor-bf16_tensor-published`` (roofs of one
height share a line), ``points-gemm`` (one marker per operator).
"""

from __future__ import annotations

import math

import numpy as np

from profiler_core.analysis.roofline import PlotPoints, Roofline
from profiler_core.report.svg_charts import CLASS_COLORS, figure, to_svg

ROOF_COLORS = {"fp64": "#9c6b4e", "fp32": "#3ca951", "fp16": "#6cc5b0", "tf32_tensor": "#efb118",
               "fp16_tensor": "#ff8ab7", "bf16_tensor": "#ff725c", "fp8_tensor": "#a463f2",
               "fp64_tensor": "#97bbf5"}
MEMORY_COLOR = "#444444"


MAX_MARKERS = 2000  # operators drawn one marker each; beyond, neighbours on the chart are merged
BINS_PER_DECADE = 200


def si(value: float, unit: str) -> str:
    """``value`` with an SI prefix: 4.8e12, "B/s" -> "4.8 TB/s"."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _bounds(points: PlotPoints, peaks: dict[str, float]) -> tuple[float, ...]:
    intensities = [x for x in points.intensity if x]
    achieved = [y for y in points.achieved if y]
    y_max = 10 ** math.ceil(math.log10(max(peaks.values()) * 2))
    y_min = 10 ** math.floor(math.log10(min([*achieved, y_max / 1e4])))
    x_min = 10 ** math.floor(math.log10(min([*intensities, 0.1])))
    x_max = 10 ** math.ceil(math.log10(max([*intensities, 1e3])))
    return x_min, x_max, y_min, y_max


def roofline_svg(roof: Roofline, *, height_in: float = 5.2) -> str:
    """The roofline chart as one ``<svg>`` element; an empty string when no operator can be placed."""
    points = roof.plot_points()  # the placed operators' figures, read off the roofline's columns
    if roof.chip is None or not len(points):
        return ""
    chip = roof.chip
    peaks = dict(sorted(chip.flops.items(), key=lambda kv: kv[1]))
    x_min, x_max, y_min, y_max = _bounds(points, peaks)
    title = f"Roofline on {chip.name}: operators sized by time, colored by class"
    with figure(height_in) as fig:
        ax = fig.add_axes((0.09, 0.17, 0.62, 0.74))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(x_min, x_max)
        ax.set_ylim(y_min, y_max)
        variants = [("published", "--", chip.dram_bytes_per_s, False)]
        if chip.measured:
            variants.append(("measured", "-", chip.bandwidth(measured=True), True))
        top_peak = max(peaks.values())
        for label, style, bandwidth, measured in variants:
            ridge_top = top_peak / bandwidth
            line, = ax.plot([y_min / bandwidth, ridge_top], [y_min, top_peak], style, color=MEMORY_COLOR, lw=1.4,
                            label=f"DRAM {si(bandwidth, 'B/s')} ({label})")
            line.set_gid(f"roof-dram-{label}")
            drawn: dict[float, list[str]] = {}  # roofs of one height share a line: "fp32 = fp64_tensor"
            for name, published in peaks.items():
                peak = chip.flops_per_s(name, measured=True) if measured else published
                if peak is not None and not (measured and name not in chip.measured):
                    drawn.setdefault(peak, []).append(name)
            for peak, names in drawn.items():
                color = ROOF_COLORS.get(names[0], "#666")
                line, = ax.plot([max(peak / bandwidth, x_min), x_max], [peak, peak], style, color=color, lw=1.4,
                                label=f"{' = '.join(names)} {si(peak, 'FLOP/s')} ({label})")
                line.set_gid(f"roof-{'-'.join(names)}-{label}")
                if not measured:
                    ax.annotate(" = ".join(names), (x_max, peak), xytext=(-3, 2), textcoords="offset points",
                                ha="right", va="bottom", fontsize=7, color=color)
        total = sum(points.duration_ns) or 1
        by_class: dict[str, list[int]] = {}
        for j, op_class in enumerate(points.op_class):
            by_class.setdefault(op_class or "other", []).append(j)
        merge = len(points) > MAX_MARKERS
        n_markers = 0
        durations = points.duration_ns
        for cls, members in sorted(by_class.items(), key=lambda kv: -sum(durations[j] for j in kv[1])):
            color = CLASS_COLORS.get(cls, "#9498a0")
            xs, ys, times = marker_places([points.intensity[j] for j in members],
                                          [points.achieved[j] for j in members], [durations[j] for j in members],
                                          x_min, y_min, merge=merge)
            n_markers += len(xs)
            dots = ax.scatter(xs, ys, s=[8 + 600 * t / total for t in times], color=color, alpha=0.55,
                              edgecolors=color, linewidths=0.6, label=f"{cls}: {len(members)} operators")
            dots.set_gid(f"points-{cls}")
        ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte)")
        ax.set_ylabel("achieved FLOP/s")
        ax.grid(True, which="major", color="#e6e6e6", lw=0.6)
        ax.set_title(title, loc="left", fontsize=10, fontweight="bold")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
        unplaced = len(roof.operators) - len(points)
        fig.text(0.09, 0.02, f"{len(points)} of {len(roof.operators)} operators placed: those with both FLOPs and "
                 f"DRAM bytes measured or modelled\n({unplaced} lack one of them and are not drawn). "
                 "Roofs: dashed published, solid measured on this chip."
                 + (f"\nDrawn as {n_markers:,} markers: operators of a class less than 1/{BINS_PER_DECADE} decade "
                    "apart on both axes are one marker, sized by their summed time." if merge else ""),
                 fontsize=7.5)
        return to_svg(fig, title)


def marker_places(intensity: list[float | None], achieved: list[float | None], duration_ns: list[int],
                  x_min: float, y_min: float, *, merge: bool) -> tuple[list[float], list[float], list[float]]:
    """Each marker's (intensity, achieved FLOP/s, time in ns): one per operator, or with ``merge``
    one per cell of 1/``BINS_PER_DECADE`` decade on both axes holding any, at the time-weighted mean
    of its operators' logarithms."""
    xs = [x or x_min for x in intensity]
    ys = [max(y or y_min, y_min) for y in achieved]
    times = [float(t) for t in duration_ns]
    if not merge:
        return xs, ys, times
    lx, ly, w = np.log10(xs), np.log10(ys), np.asarray(times)
    cells = np.stack([np.floor(lx * BINS_PER_DECADE), np.floor(ly * BINS_PER_DECADE)], axis=1)
    distinct, cell = np.unique(cells, axis=0, return_inverse=True)  # cells in their sorted order
    cell = cell.ravel()
    n = len(distinct)
    summed = np.bincount(cell, weights=w, minlength=n)
    weight = np.where(summed > 0, summed, 1.0)
    return ((10 ** (np.bincount(cell, weights=lx * w, minlength=n) / weight)).tolist(),
            (10 ** (np.bincount(cell, weights=ly * w, minlength=n) / weight)).tolist(), summed.tolist())
