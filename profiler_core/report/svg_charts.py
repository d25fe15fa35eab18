"""Inline SVG charts for the HTML report: plain strings, no JavaScript, every label escaped.

    hbar_chart([("gemm", 132.4), ("elementwise", 16.6)], unit="us", title="Time by class")
    grouped_bars([("gemm", 132.4, 27.9)], labels=("baseline", "optimized"), unit="us", title="...")
    stacked_bar([("cupti_correlation", 95.0), ("unattributed", 5.0)], title="Coverage")
    dumbbell_chart([("gemm tensor_core_active_pct", 0.01, 61.0)], title="Counter shifts")
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

PALETTE = ("#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2",
           "#97bbf5", "#9c6b4e", "#9498a0")
BASE_COLOR, OPT_COLOR = "#9498a0", "#4269d0"
# One color per operator class, the same in every chart.
CLASS_COLORS = {"gemm": "#4269d0", "attention": "#a463f2", "normalization": "#6cc5b0",
                "elementwise": "#efb118", "reduction": "#ff725c", "cast_copy": "#9c6b4e", "rnn": "#3ca951",
                "convolution": "#97bbf5", "communication": "#ff8ab7", "other": "#9498a0"}
_FONT = "font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;font-size:12px"
_LABEL_W, _VALUE_W, _ROW_H = 230, 90, 22


def _fmt(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _clip(label: str, limit: int = 34) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "\u2026"


def _svg(width: int, height: int, title: str, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" style="{_FONT}">'
            f"<title>{escape(title)}</title>"
            f'<text x="0" y="14" font-weight="600" font-size="13">{escape(title)}</text>'
            + "".join(body) + "</svg>")


def _row_label(y: float, label: str) -> str:
    return (f'<text x="{_LABEL_W - 6}" y="{y:.1f}" text-anchor="end" dominant-baseline="middle">'
            f"<title>{escape(label)}</title>{escape(_clip(label))}</text>")


def hbar_chart(rows: Sequence[tuple[str, float]], *, unit: str, title: str, width: int = 720,
               colors: Sequence[str] | None = None) -> str:
    """One horizontal bar per (label, value), in the order given; ``colors`` per row, else the palette."""
    plot_w = width - _LABEL_W - _VALUE_W
    top = 26
    peak = max((v for _, v in rows), default=0.0) or 1.0
    body = []
    for i, (label, value) in enumerate(rows):
        y = top + i * _ROW_H
        w = max(0.0, value / peak * plot_w)
        body.append(_row_label(y + _ROW_H / 2, label))
        color = colors[i] if colors else PALETTE[i % len(PALETTE)]
        body.append(f'<rect x="{_LABEL_W}" y="{y + 3}" width="{w:.1f}" height="{_ROW_H - 6}" '
                    f'fill="{color}"><title>{escape(label)}: {_fmt(value)} {escape(unit)}</title></rect>')
        body.append(f'<text x="{_LABEL_W + w + 4:.1f}" y="{y + _ROW_H / 2:.1f}" dominant-baseline="middle">'
                    f"{_fmt(value)} {escape(unit)}</text>")
    return _svg(width, top + len(rows) * _ROW_H + 6, title, body)


def grouped_bars(rows: Sequence[tuple[str, float, float]], *, labels: tuple[str, str], unit: str,
                 title: str, width: int = 720) -> str:
    """Two bars per label (baseline grey, optimized blue) on one scale, with a legend."""
    plot_w = width - _LABEL_W - _VALUE_W
    top, pair_h = 44, 2 * 14 + 8
    peak = max((max(b, o) for _, b, o in rows), default=0.0) or 1.0
    body = [_legend(26, [(labels[0], BASE_COLOR), (labels[1], OPT_COLOR)])]
    for i, (label, base, opt) in enumerate(rows):
        y = top + i * pair_h
        body.append(_row_label(y + 14, label))
        for j, (value, color) in enumerate(((base, BASE_COLOR), (opt, OPT_COLOR))):
            w = max(0.0, value / peak * plot_w)
            yy = y + j * 14
            tip = f"{label} {labels[j]}: {_fmt(value)} {unit}"
            body.append(f'<rect x="{_LABEL_W}" y="{yy + 1}" width="{w:.1f}" height="12" fill="{color}">'
                        f"<title>{escape(tip)}</title></rect>")
            body.append(f'<text x="{_LABEL_W + w + 4:.1f}" y="{yy + 7}" dominant-baseline="middle" '
                        f'font-size="11">{_fmt(value)}</text>')
    return _svg(width, top + len(rows) * pair_h + 4, title, body)


def _legend(y: int, items: Sequence[tuple[str, str]]) -> str:
    parts, x = [], 0
    for label, color in items:
        parts.append(f'<rect x="{x}" y="{y - 9}" width="12" height="12" fill="{color}"/>'
                     f'<text x="{x + 16}" y="{y}">{escape(label)}</text>')
        x += 24 + 7 * len(label)
    return "".join(parts)


def stacked_bar(segments: Sequence[tuple[str, float]], *, title: str, width: int = 720,
                colors: dict[str, str] | None = None) -> str:
    """One 100% bar split by share, with a legend giving each segment's percentage."""
    total = sum(v for _, v in segments) or 1.0
    body, x = [], 0.0
    for i, (label, value) in enumerate(segments):
        w = value / total * width
        color = (colors or {}).get(label, PALETTE[i % len(PALETTE)])
        body.append(f'<rect x="{x:.1f}" y="24" width="{w:.1f}" height="22" fill="{color}">'
                    f"<title>{escape(label)}: {100 * value / total:.1f}%</title></rect>")
        x += w
    legend = [(f"{label} {100 * value / total:.1f}%", (colors or {}).get(label, PALETTE[i % len(PALETTE)]))
              for i, (label, value) in enumerate(segments)]
    lines = [legend[i:i + 4] for i in range(0, len(legend), 4)]
    for n, line in enumerate(lines):
        body.append(_legend(66 + n * 18, line))
    return _svg(width, 60 + 18 * len(lines) + 6, title, body)


def dumbbell_chart(rows: Sequence[tuple[str, float | None, float | None]], *, title: str,
                   width: int = 720) -> str:
    """Baseline dot -> optimized dot per row on a 0..100 axis (percent counters)."""
    plot_w = width - _LABEL_W - 70
    top = 44
    labels = ("baseline", "optimized")
    body = [_legend(26, [(labels[0], BASE_COLOR), (labels[1], OPT_COLOR)])]
    for tick in range(0, 101, 25):
        x = _LABEL_W + tick / 100 * plot_w
        body.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{top + len(rows) * _ROW_H}" '
                    f'stroke="#ddd"/><text x="{x:.1f}" y="{top + len(rows) * _ROW_H + 12}" '
                    f'text-anchor="middle" font-size="10">{tick}</text>')
    for i, (label, base, opt) in enumerate(rows):
        y = top + i * _ROW_H + _ROW_H / 2
        body.append(_row_label(y, label))

        def pos(v: float) -> float:
            return _LABEL_W + min(max(v, 0.0), 100.0) / 100.0 * plot_w

        if base is not None and opt is not None:
            body.append(f'<line x1="{pos(base):.1f}" y1="{y:.1f}" x2="{pos(opt):.1f}" y2="{y:.1f}" '
                        f'stroke="#666" stroke-width="2"/>')
        for value, color, name in ((base, BASE_COLOR, labels[0]), (opt, OPT_COLOR, labels[1])):
            if value is not None:
                body.append(f'<circle cx="{pos(value):.1f}" cy="{y:.1f}" r="5" fill="{color}">'
                            f"<title>{escape(label)} {escape(name)}: {_fmt(value)}</title></circle>")
        text = f"{'n/a' if base is None else _fmt(base)} \u2192 {'n/a' if opt is None else _fmt(opt)}"
        body.append(f'<text x="{width - 66}" y="{y:.1f}" dominant-baseline="middle" font-size="11">'
                    f"{escape(text)}</text>")
    return _svg(width, top + len(rows) * _ROW_H + 18, title, body)
