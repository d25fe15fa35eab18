"""How a counter value and a counter shift read in text: ``tensor_core_active_pct 0.01 -> 61.3``."""

from __future__ import annotations

from typing import Literal

Direction = Literal["up", "down", "same", "n/a"]


def format_value(value: float | None) -> str:
    """Compact, unit-free: 0.0139 -> 0.01, 61.27 -> 61.3, 7476736 -> 7.48M; None -> n/a."""
    if value is None:
        return "n/a"
    magnitude = abs(value)
    if magnitude >= 1e9:
        return f"{value / 1e9:.2f}G"
    if magnitude >= 1e6:
        return f"{value / 1e6:.2f}M"
    if magnitude >= 1e4:
        return f"{value / 1e3:.1f}k"
    if magnitude >= 100 or float(value).is_integer():
        return f"{value:.0f}"
    if magnitude >= 1:
        return f"{value:.1f}"
    return f"{value:.2f}"


def direction(field: str, base: float | None, opt: float | None, *, same_abs: float,
              same_rel_pct: float) -> Direction:
    """up / down / same / n/a (a side missing).

    Unchanged means within ``same_rel_pct`` percent of the baseline value or, for percentage
    counters (``*_pct``, ``*_rate``), within ``same_abs`` points.
    """
    if base is None or opt is None:
        return "n/a"
    points = same_abs if field.endswith(("_pct", "_rate")) else 0.0
    tolerance = max(points, abs(base) * same_rel_pct / 100.0)
    if abs(opt - base) <= tolerance:
        return "same"
    return "up" if opt > base else "down"


def shift_text(field: str, base: float | None, opt: float | None) -> str:
    """``tensor_core_active_pct 0.01 -> 61.3``."""
    return f"{field} {format_value(base)} -> {format_value(opt)}"
