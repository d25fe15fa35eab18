"""The HTML report's bar charts, drawn by matplotlib's SVG backend: inline ``<svg>`` strings, no JavaScript.

    hbar_chart([("gemm", 132.4), ("elementwise", 16.6)], unit="us", title="Time by class")
    grouped_bars([("gemm", 132.4, 27.9)], labels=("baseline", "optimized"), unit="us", title="...")
    stacked_bar([("cupti_correlation", 95.0), ("unattributed", 5.0)], title="Coverage")
    dumbbell_chart([("gemm tensor_core_active_pct", 0.01, 61.0)], title="Counter shifts")

matplotlib is imported when a chart is drawn, never when this module is imported: ``oprof --help``
and the commands that draw nothing do not pay for it. Each chart starts with a ``<title>`` (what a
screen reader announces) and keeps its text as text (``svg.fonttype: none``).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from html import escape
from typing import Any

PALETTE = ("#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2",
           "#97bbf5", "#9c6b4e", "#9498a0")
BASE_COLOR, OPT_COLOR = "#9498a0", "#4269d0"
# One color per operator class, the same in every chart.
CLASS_COLORS = {"gemm": "#4269d0", "attention": "#a463f2", "normalization": "#6cc5b0",
                "elementwise": "#efb118", "reduction": "#ff725c", "cast_copy": "#9c6b4e", "rnn": "#3ca951",
                "convolution": "#97bbf5", "communication": "#ff8ab7", "other": "#9498a0"}
WIDTH_IN = 9.0
_RC: dict[str, Any] = {"svg.fonttype": "none", "svg.hashsalt": "oprof", "font.size": 9, "axes.spines.top": False,
       "axes.spines.right": False}


def fmt(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _clip(label: str, limit: int = 40) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "\u2026"


@contextmanager
def figure(height_in: float) -> Iterator[Any]:
    """A matplotlib Figure with no display attached (the Agg canvas), under the report's style."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC):  # type: ignore[arg-type]  # the stubs list every key as a Literal
        yield Figure(figsize=(WIDTH_IN, height_in))


def to_svg(fig: Any, title: str) -> str:
    """The figure as one inline ``<svg>`` element, its ``<title>`` first, no XML prolog."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    # no links out of the page: drop the RDF metadata block, and use SVG 2's plain href for markers
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, count=1, flags=re.S)
    svg = svg.replace(' xmlns:xlink="http://www.w3.org/1999/xlink"', "").replace("xlink:href=", "href=")
    svg = re.sub(r"<svg ", '<svg class="chart" role="img" ', svg, count=1)
    head_end = svg.index(">") + 1
    return svg[:head_end] + f"<title>{escape(title)}</title>" + svg[head_end:]


def _bars_axes(fig: Any, labels: Sequence[str], title: str) -> Any:
    ax = fig.add_subplot()
    ax.set_title(title, loc="left", fontsize=10, fontweight="bold")
    ax.set_yticks(range(len(labels)), [_clip(lbl) for lbl in labels])
    ax.invert_yaxis()  # the first row on top, as given
    ax.grid(True, axis="x", color="#e6e6e6", lw=0.6)
    ax.set_axisbelow(True)
    return ax


def hbar_chart(rows: Sequence[tuple[str, float]], *, unit: str, title: str,
               colors: Sequence[str] | None = None) -> str:
    """One horizontal bar per (label, value), in the order given; ``colors`` per row, else the palette."""
    with figure(0.9 + 0.28 * max(len(rows), 1)) as fig:
        ax = _bars_axes(fig, [lbl for lbl, _ in rows], title)
        values = [v for _, v in rows]
        bars = ax.barh(range(len(rows)), values,
                       color=list(colors) if colors else [PALETTE[i % len(PALETTE)] for i in range(len(rows))])
        ax.bar_label(bars, labels=[f"{fmt(v)} {unit}" for v in values], padding=3, fontsize=8)
        ax.set_xlabel(unit)
        ax.margins(x=0.15)
        return to_svg(fig, title)


def grouped_bars(rows: Sequence[tuple[str, float, float]], *, labels: tuple[str, str], unit: str,
                 title: str) -> str:
    """Two bars per label (baseline grey, optimized blue) on one scale, with a legend."""
    with figure(1.1 + 0.42 * max(len(rows), 1)) as fig:
        ax = _bars_axes(fig, [lbl for lbl, _, _ in rows], title)
        h = 0.38
        for j, color in enumerate((BASE_COLOR, OPT_COLOR)):
            values = [float(r[1 + j]) for r in rows]
            bars = ax.barh([i - h / 2 + j * h for i in range(len(rows))], values, height=h, color=color,
                           label=labels[j])
            ax.bar_label(bars, labels=[fmt(v) for v in values], padding=3, fontsize=7)
        ax.set_xlabel(unit)
        ax.margins(x=0.12)
        ax.legend(loc="lower right", fontsize=8, frameon=False)
        return to_svg(fig, title)


def stacked_bar(segments: Sequence[tuple[str, float]], *, title: str, colors: dict[str, str] | None = None) -> str:
    """One 100% bar split by share, with a legend giving each segment's percentage."""
    total = sum(v for _, v in segments) or 1.0
    with figure(0.8) as fig:
        ax = fig.add_subplot()
        ax.set_title(title, loc="left", fontsize=10, fontweight="bold")
        left = 0.0
        for i, (label, value) in enumerate(segments):
            share = 100 * value / total
            ax.barh([0], [share], left=left, height=0.6, color=(colors or {}).get(label, PALETTE[i % len(PALETTE)]),
                    label=f"{label} {share:.1f}%")
            left += share
        ax.set_xlim(0, 100)
        ax.set_yticks([])
        ax.set_xlabel("percent of kernel time")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.9), ncol=min(4, max(len(segments), 1)),
                  fontsize=8, frameon=False)
        return to_svg(fig, title)


def dumbbell_chart(rows: Sequence[tuple[str, float | None, float | None]], *, title: str) -> str:
    """Baseline dot -> optimized dot per row on a 0..100 axis (percent counters)."""
    with figure(1.1 + 0.3 * max(len(rows), 1)) as fig:
        ax = _bars_axes(fig, [lbl for lbl, _, _ in rows], title)
        for i, (_, base, opt) in enumerate(rows):
            if base is not None and opt is not None:
                ax.plot([base, opt], [i, i], color="#666666", lw=1.5, zorder=1)
            text = f"{'n/a' if base is None else fmt(base)} \u2192 {'n/a' if opt is None else fmt(opt)}"
            ax.annotate(text, (1.01, i), xycoords=("axes fraction", "data"), va="center", fontsize=8)
        for j, (name, color) in enumerate((("baseline", BASE_COLOR), ("optimized", OPT_COLOR))):
            pts = [(r[1 + j], i) for i, r in enumerate(rows) if r[1 + j] is not None]
            ax.scatter([min(max(v or 0.0, 0.0), 100.0) for v, _ in pts], [i for _, i in pts], s=36, color=color,
                       label=name, zorder=2)
        ax.set_xlim(0, 100)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_xlabel("percent")
        ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, fontsize=8, frameon=False)
        return to_svg(fig, title)
