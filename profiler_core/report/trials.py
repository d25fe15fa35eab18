"""The HTML report's trials table: each pass the optimize loop tried, its outcome and its numerics verdict.

A trial (``optimize.loop.Trial``, or its JSON in optimize.json) carries the plan's verdict:
the reference it was judged against, the rule, and the line naming the worst output and its
numbers. The table shows that line per trial; the reference and the rule once above it (each
trial's own where they differ).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from profiler_core.report.templating import render


def _get(trial: Any, name: str) -> Any:
    return trial.get(name) if isinstance(trial, Mapping) else getattr(trial, name, None)


def trials_html(trials: Sequence[Any]) -> str:
    """The trials section, or "" without trials."""
    if not trials:
        return ""
    verdicts = [_get(t, "validation") or {} for t in trials]
    references = list(dict.fromkeys(v.get("reference", "") for v in verdicts if v.get("reference")))
    rules = list(dict.fromkeys(v.get("rule", "") for v in verdicts if v.get("rule")))
    rows = []
    for trial, verdict in zip(trials, verdicts, strict=True):
        line = verdict.get("verdict") or ""
        if len(references) > 1 and verdict.get("reference"):
            line = f"{line} (reference {verdict['reference']})"
        if not line:
            line = _get(trial, "reason") or "-" if _get(trial, "outcome") == "rejected_validation" else "-"
        speedup = _get(trial, "speedup_vs_best")
        rows.append({"name": _get(trial, "transformation"), "outcome": str(_get(trial, "outcome")).replace("_", " "),
                     "verdict": line, "speedup": f"{speedup:.3f}x" if isinstance(speedup, int | float) else "-"})
    return str(render("trials.html.j2", rows=rows,
                      reference=references[0] if len(references) == 1 else "the reference each row names"
                      if references else "no float64 reference",
                      rule=rules[0] if len(rules) == 1 else "per trial" if rules else "the tolerance table"))
