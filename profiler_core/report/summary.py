"""A compact summary of one profile for an MCP client's context: top operators, findings, coverage.

Bounded: the compact JSON of the summary never exceeds ``SUMMARY_MAX_BYTES``. When a profile
has more to say, the summary sheds detail in a fixed order (finding facts, operator lists,
long names, then operators and findings from the tail) and says so in ``truncated``.

    summary = compact_summary(profile, top_k=10)
    len(json.dumps(summary, separators=(",", ":"))) <= SUMMARY_MAX_BYTES
"""

from __future__ import annotations

import json
from typing import Any

from profiler_core.analysis.findings import FindingsReport
from profiler_core.analysis.profile_view import ProfileView
from profiler_core.report.digest import coverage_by_tier, time_by_class, top_operators
from profiler_core.schema import Profile

SUMMARY_MAX_BYTES = 6144
_COUNTER_KEYS = {"tensor_core_active_pct": "tc", "achieved_occupancy_pct": "occ",
                 "dram_throughput_pct": "dram", "sm_throughput_pct": "sm",
                 "local_memory_wavefronts": "spills"}


def _size(summary: dict[str, Any]) -> int:
    return len(json.dumps(summary, separators=(",", ":")).encode("utf-8"))


def _clip(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "\u2026"


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 1)


def compact_summary(profile: Profile, *, top_k: int = 10, findings: FindingsReport | None = None,
                    max_bytes: int = SUMMARY_MAX_BYTES) -> dict[str, Any]:
    """Top operators, findings and coverage of ``profile`` in at most ``max_bytes`` of compact JSON."""
    if findings is None:
        from profiler_core.analysis.diagnose import diagnose

        findings = diagnose(profile)
    view = ProfileView.of(profile)
    cap = profile.capture
    summary: dict[str, Any] = {
        "workload": _clip(cap.workload, 80), "gpu": cap.gpu_name, "chip": cap.chip,
        "iterations": {"warmup": cap.warmup_iterations, "measured": cap.measured_iterations},
        "kernels": len(profile.kernels), "operators": len(profile.operators),
        "total_kernel_us": round(view.total_ns / 1000, 1),
        "coverage": {"unattributed_pct": round(view.share_pct(view.unattributed_ns), 1),
                     "by_tier_pct": {s.label: round(s.share_pct, 1) for s in coverage_by_tier(view)}},
        "time_by_class_pct": {s.label: round(s.share_pct, 1) for s in time_by_class(view)},
        "top_operators": [
            {"key": o.key, "class": o.op_class.value, "us": round(o.duration_ns / 1000, 1),
             "pct": round(o.share_pct, 1),
             **{short: _round(o.counters.get(f)) for f, short in _COUNTER_KEYS.items()},
             "bottleneck": o.bottleneck}
            for o in top_operators(view, top_k)],
        "findings": [
            {"rule": f.rule_id, "licenses": f.licenses,
             "bound_pct": round(f.gain_bound_pct, 1), "basis": f.gain_basis, "confidence": f.confidence.value,
             "symptom": f.symptom, "n_operators": len(f.operators), "operators": f.operators[:4],
             "facts": f.evidence.facts[:3]}
            for f in findings.findings],
        "warnings": [_clip(w, 200) for w in profile.warnings[:3]],
        "truncated": False,
    }
    from profiler_core.report.roofline_report import roofline_summary

    summary["roofline"] = roofline_summary(profile)
    return _fit(summary, max_bytes)


def _fit(summary: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """Shed detail, least useful first, until the summary fits."""
    steps = [
        lambda s: s["roofline"].pop("blocks", None),
        lambda s: s["roofline"].update(top_headroom=s["roofline"]["top_headroom"][:2]),
        lambda s: [f.pop("facts", None) for f in s["findings"]],
        lambda s: [f.update(operators=f["operators"][:1]) for f in s["findings"]],
        lambda s: [o.update(key=_clip(o["key"], 60)) for o in s["top_operators"]],
        lambda s: [f.update(symptom=_clip(f["symptom"], 120)) for f in s["findings"]],
        lambda s: s.update(warnings=[_clip(w, 80) for w in s["warnings"]]),
        lambda s: [f.update(operators=[_clip(k, 40) for k in f["operators"]]) for f in s["findings"]],
    ]
    for step in steps:
        if _size(summary) <= max_bytes:
            return summary
        step(summary)
        summary["truncated"] = True
    # Still too large: drop rows from the tail, operators and findings alternately.
    if _size(summary) > max_bytes:
        summary["roofline"]["top_headroom"] = []
    while _size(summary) > max_bytes and (summary["top_operators"] or summary["findings"]):
        longer = "top_operators" if len(summary["top_operators"]) >= len(summary["findings"]) else "findings"
        summary[longer].pop()
        summary["truncated"] = True
    while _size(summary) > max_bytes and (summary["time_by_class_pct"] or summary["coverage"]["by_tier_pct"]):
        for table in (summary["time_by_class_pct"], summary["coverage"]["by_tier_pct"]):
            if table:
                table.pop(next(reversed(table)))
    return summary
