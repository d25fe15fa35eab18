"""Model-sized views of a profile: coverage, operator rows, one operator's kernels.

Times are reported in microseconds (``*_us``) rounded for reading; shares in percent of
the profile's total kernel time. Counters keep the profile's field names and base units.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from mcp_server.models import (
    CoverageSummary,
    EvidenceRow,
    KernelDetail,
    OperatorDetail,
    OperatorRow,
    TierShare,
)
from profiler_core.echo import shown
from profiler_core.metrics.catalog import HEADLINE_COUNTERS
from profiler_core.schema import Kernel, Operator, Profile

MAX_NAME_CHARS = 200
MAX_WARNINGS = 10  # warnings returned inline; the file written keeps them all


def us(ns: int | float) -> float:
    """Nanoseconds as microseconds, rounded for reading."""
    return round(ns / 1e3, 3)


def enum_value(x: Any) -> str:
    """An enum member's value (anything else as is), as text."""
    return str(getattr(x, "value", x))


def _tidy(values: dict[str, float | None]) -> dict[str, float | None]:
    """Counters rounded to 3 decimals: the float noise of aggregation is not information."""
    return {k: (round(v, 3) if v is not None else None) for k, v in values.items()}


def _clip(name: str) -> str:
    """A kernel name cut to ``MAX_NAME_CHARS`` (demangled templates run to kilobytes)."""
    return name if len(name) <= MAX_NAME_CHARS else name[: MAX_NAME_CHARS - 1] + "…"


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


def total_kernel_ns(profile: Profile) -> int:
    """Total kernel time of the profile (the denominator of every share)."""
    return profile.coverage.duration_ns or sum(k.duration_ns for k in profile.kernels)


def showing(shown: int, total: int, noun: str, more: str) -> str:
    """The "showing N of M" line of a capped list, with how to see more when something was cut."""
    text = f"{shown} of {total} {noun}"
    return f"{text}; {more}" if shown < total else text


def capped_warnings(warnings: Sequence[str], more: str) -> tuple[list[str], str]:
    """The first ``MAX_WARNINGS`` warnings, and their "showing" line (``more``: where the rest are)."""
    shown = list(warnings[:MAX_WARNINGS])
    return shown, showing(len(shown), len(warnings), "warnings", more)


def coverage_summary(profile: Profile) -> CoverageSummary:
    """Coverage by tier and by counter source, as shares of kernel time."""
    cov = profile.coverage
    total = total_kernel_ns(profile)
    by_tier = [TierShare(tier=tier, kernel_count=tc.kernel_count, time_pct=_pct(tc.duration_ns, total))
               for tier, tc in sorted(cov.by_tier.items(), key=lambda kv: -kv[1].duration_ns)]
    unattributed_ns = sum(u.duration_ns for u in profile.unattributed)
    return CoverageSummary(
        kernel_count=cov.kernel_count or len(profile.kernels),
        kernel_time_us=us(total),
        attributed_time_pct=round(cov.attributed_time_pct, 2),
        unattributed_time_pct=_pct(unattributed_ns, total),
        by_tier=by_tier,
        counters_measured_kernels=cov.counters_measured.kernel_count,
        counters_inherited_kernels=cov.counters_inherited.kernel_count,
        counters_missing_kernels=cov.counters_missing.kernel_count,
        tier_overlaps=cov.tier_overlaps,
        tier_disagreements=cov.tier_disagreements,
    )


def operator_row(op: Operator, total_ns: int) -> OperatorRow:
    """One operator's line in a top-N table."""
    return OperatorRow(
        key=op.key, name=op.name, op_class=op.op_class.value, execution_context=op.execution_context.value,
        kernel_count=op.kernel_count, time_us=us(op.duration_ns), share_pct=_pct(op.duration_ns, total_ns),
        confidence=op.confidence.value,
        headline=_tidy({name: op.metrics.get(name) for name in HEADLINE_COUNTERS}),
    )


def top_operators(profile: Profile, top_k: int) -> tuple[list[OperatorRow], str]:
    """The ``top_k`` operators by kernel time, and the matching "showing" line."""
    from profiler_core.attribution.operator_table import slowest  # numpy: loaded when a report is asked for

    total = total_kernel_ns(profile)
    rows = [operator_row(op, total) for op in slowest(profile.operators, top_k)]
    return rows, showing(len(rows), len(profile.operators), "operators, by kernel time", "raise top_k to see more")


def _operator_column(operators: Sequence[Operator], field: str) -> list[Any]:
    """``op.<field>`` of every operator: off a table's column (no model built), else the models'."""
    column = getattr(operators, "column", None)
    values = column(field) if column is not None else None
    return values if values is not None else [getattr(op, field) for op in operators]


def find_operator(profile: Profile, wanted: str) -> Operator:
    """The operator named by key (``aten::addmm#0``), or by name when only one call has it.

    Keys and names are read off a large profile's operator table; only the operator found is built."""
    ops = profile.operators
    keys = _operator_column(ops, "key")
    by_key = dict(zip(keys, range(len(keys)), strict=True))  # the last of a repeated key
    if wanted in by_key:
        return ops[by_key[wanted]]
    names = _operator_column(ops, "name")
    named = [g for g, name in enumerate(names) if name == wanted or name.split("::")[-1] == wanted]
    if len(named) == 1:
        return ops[named[0]]
    if named:
        durations = _operator_column(ops, "duration_ns")
        keys = [keys[g] for g in sorted(named, key=lambda g: -durations[g])]
        listed = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
        raise ToolError(f"{shown(wanted)} names {len(keys)} operator calls ({listed}); pass one key")
    close = _close_keys(wanted, list(by_key), set(names)) if len(wanted) <= 300 else []
    hint = f"did you mean {', '.join(close)}?" if close else "call report to see the top operators' keys"
    raise ToolError(f"no operator {shown(wanted)} in this profile; {hint}")


_MANY_KEYS = 20_000  # above this, close keys are looked for among the calls of close names only


def _close_keys(wanted: str, keys: list[str], names: set[str]) -> list[str]:
    """Up to five keys like ``wanted`` (difflib's ratio >= 0.5). Among many keys, only the calls of
    the names like its name part are compared with it (difflib over a million keys takes seconds)."""
    if len(keys) > _MANY_KEYS:
        near = set(difflib.get_close_matches(wanted.split("#")[0], sorted(names), n=5, cutoff=0.5))
        keys = [k for k in keys if k.split("#")[0] in near]
    return difflib.get_close_matches(wanted, keys, n=5, cutoff=0.5)


def operator_kernels(profile: Profile, op: Operator) -> list[Kernel]:
    """The profile's kernels that ``op`` lists: by position in a kernel table (whose kernel j has id
    j, as the engine numbers them; checked for each one), else through a map of every kernel's id."""
    kernels = profile.kernels
    if hasattr(kernels, "model"):  # a table: its models are built when read
        n = len(kernels)
        found = [kernels[i] for i in op.kernel_ids if 0 <= i < n]
        if all(k.id == i for k, i in zip(found, (i for i in op.kernel_ids if 0 <= i < n), strict=True)):
            return found
    by_id = {k.id: k for k in kernels}
    return [by_id[i] for i in op.kernel_ids if i in by_id]


def operator_detail(op: Operator, total_ns: int) -> OperatorDetail:
    """Everything the profile says about one operator (its kernels listed separately)."""
    return OperatorDetail(
        key=op.key, name=op.name, call_index=op.call_index, op_class=op.op_class.value,
        execution_context=op.execution_context.value, is_fused=op.is_fused, fused_with=op.fused_with,
        source_nodes=op.source_nodes, input_shapes=op.input_shapes, kernel_count=op.kernel_count,
        time_us=us(op.duration_ns), share_pct=_pct(op.duration_ns, total_ns), confidence=op.confidence.value,
        library=op.library, layer_role=op.layer_role, inherited_from=op.inherited_from,
        metrics=_tidy(op.metrics), metric_null_reasons=dict(op.metric_null_reasons),
    )


def kernel_detail(kernel: Kernel) -> KernelDetail:
    """One kernel: timing, launch shape, attribution evidence and counters."""
    att = kernel.attribution
    return KernelDetail(
        id=kernel.id, name=_clip(kernel.short_name or kernel.name), duration_us=us(kernel.duration_ns),
        stream=kernel.stream, grid=list(kernel.grid) if kernel.grid else None,
        block=list(kernel.block) if kernel.block else None, registers_per_thread=kernel.registers_per_thread,
        library=kernel.library, tier=att.tier.value, confidence=att.confidence.value,
        tiers_agree=att.tiers_agree,
        evidence=[EvidenceRow(tier=e.tier.value, operator=e.operator, detail=e.detail) for e in att.evidence],
        reason=att.reason, fused_with=kernel.fused_with, counter_source=kernel.counter_source.value,
        counters=_tidy({k: v for k, v in kernel.counters.items() if v is not None}),
    )

