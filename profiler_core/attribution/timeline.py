"""The timeline the profile is built on, in launch order, and its alignment with Kineto.

Durations come from the timeline run (nsys when present, else Kineto); ncu's replayed
timings never enter a speedup. Launch order is host-side order (CUPTI correlation ids
increase with each API call), not GPU start time: on several streams the two differ.
When the timeline is nsys, Kineto kernels (which carry the CUPTI correlation to their
launching operator) are aligned to it by per-name invocation order, validated by grid and
block, exactly like the counter join.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from profiler_core.attribution.counter_join import dims_agree
from profiler_core.attribution.names import choose_name_key
from profiler_core.errors import DeterminismError
from profiler_core.records import TimelineKernel


def launch_order(kernels: Sequence[TimelineKernel]) -> list[TimelineKernel]:
    """Kernels sorted by host launch order (correlation id), ties and gaps by start time."""
    if kernels and all(k.correlation_id is not None for k in kernels):
        return sorted(kernels, key=lambda k: (k.correlation_id, k.start_ns))
    return sorted(kernels, key=lambda k: k.start_ns)


def align_timelines(
    timeline: Sequence[TimelineKernel], other: Sequence[TimelineKernel], *, other_label: str,
    allow_partial: bool = False,
) -> tuple[list[int | None], list[str]]:
    """For each timeline kernel, the index of the same launch in ``other`` (or None).

    Raises DeterminismError on the first divergence unless ``allow_partial``.
    """
    warnings: list[str] = []
    key, label = choose_name_key((k.name for k in timeline), (k.name for k in other))
    if label != "join_key":
        warnings.append(f"{other_label} and timeline kernel names joined on their {label.replace('_', ' ')} "
                        "(the tools' demanglers differ)")
    by_name_other: dict[str, list[int]] = defaultdict(list)
    for i, k in enumerate(other):
        by_name_other[key(k.name)].append(i)
    seen: dict[str, int] = defaultdict(int)
    out: list[int | None] = [None] * len(timeline)
    problems: list[str] = []
    for j, k in enumerate(timeline):
        nm = key(k.name)
        nth = seen[nm]
        seen[nm] += 1
        candidates = by_name_other.get(nm, [])
        if nth >= len(candidates):
            problems.append(f"timeline launch #{j} '{k.name}' (launch {nth + 1} of it) has no match in {other_label}")
            continue
        o = other[candidates[nth]]
        if not dims_agree(k, o):
            problems.append(
                f"timeline launch #{j} '{k.name}' ran grid {k.grid} block {k.block} but {other_label} "
                f"launch #{candidates[nth]} ran grid {o.grid} block {o.block}"
            )
            continue
        out[j] = candidates[nth]
    extra = [nm for nm, idx in by_name_other.items() if len(idx) > seen.get(nm, 0)]
    if extra:
        problems.append(f"{other_label} launched '{extra[0]}' more often than the timeline")
    if problems and not allow_partial:
        raise DeterminismError(
            f"the timeline and {other_label} runs launched different kernels: {problems[0]} "
            f"({len(problems)} divergence(s)); re-capture with one Inductor cache, or pass --allow-partial"
        )
    warnings.extend(problems[:5])
    return out, warnings
