"""The jinja2 environment the HTML report renders with: templates shipped in ``templates/``, autoescape on.

Every string from a profile goes in as plain text and is escaped by the template; only markup the
report builds itself (the inline SVG charts) goes in as ``Markup``.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from profiler_core.analysis.compare import CounterDelta
from profiler_core.analysis.counter_format import format_value
from profiler_core.report.digest import delta_text, not_shown, shift_parts, us


def _arrows(text: str) -> Markup:
    """``a -> b`` as ``a &rarr; b``, the rest escaped."""
    return Markup("&rarr;").join(escape(part) for part in str(text).split("->"))


def _shifts(counters: Iterable[CounterDelta]) -> Markup:
    return Markup("; ".join(shift_parts(counters, "&rarr;", lambda s: str(escape(s)))) or "-")


@cache
def environment() -> Environment:
    env = Environment(loader=PackageLoader("profiler_core.report", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(arrows=_arrows, shifts=_shifts, us=us, delta=delta_text, value=format_value)
    env.globals.update(not_shown=not_shown)
    return env


def render(template: str, **context: Any) -> Markup:
    """One template rendered to markup (safe to place inside another template)."""
    return Markup(environment().get_template(template).render(**context))
