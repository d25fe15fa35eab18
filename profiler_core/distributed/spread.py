"""The merged view of a multi-rank run: each operator's duration spread across ranks.

Ranks of one data-parallel job run the same operators; the one that takes longest holds
the others up at the next collective. Per operator key: min, median and max duration over
the ranks that ran it, the slowest rank, and max/median (the straggler factor). An operator
missing on some rank is listed with the ranks it was found on, never padded with zeros.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from profiler_core.schema import OperatorClass, Profile


class OperatorSpread(BaseModel):
    """One operator key across ranks."""

    model_config = ConfigDict(extra="forbid")

    key: str
    op_class: OperatorClass
    ranks: list[int]  # ranks that ran it
    min_ns: int
    median_ns: float
    max_ns: int
    slowest_rank: int
    straggler_factor: float | None  # max / median; None when the median is 0


class RankSpread(BaseModel):
    """Total kernel time per rank, and the slowest rank of the run."""

    model_config = ConfigDict(extra="forbid")

    total_ns: dict[int, int]
    min_ns: int
    median_ns: float
    max_ns: int
    slowest_rank: int


def operator_spread(profiles: Mapping[int, Profile]) -> list[OperatorSpread]:
    """Per operator key, min/median/max duration over ranks; largest max - min first."""
    by_key: dict[str, dict[int, int]] = {}
    classes: dict[str, OperatorClass] = {}
    for rank in sorted(profiles):
        for op in profiles[rank].operators:
            by_key.setdefault(op.key, {})[rank] = op.duration_ns
            classes.setdefault(op.key, op.op_class)
    rows = []
    for key, per_rank in by_key.items():
        values = list(per_rank.values())
        median = float(statistics.median(values))
        slowest = max(per_rank, key=lambda r: (per_rank[r], -r))  # ties: the lowest rank
        rows.append(OperatorSpread(
            key=key, op_class=classes[key], ranks=sorted(per_rank), min_ns=min(values), median_ns=median,
            max_ns=max(values), slowest_rank=slowest,
            straggler_factor=max(values) / median if median > 0 else None))
    rows.sort(key=lambda r: (-(r.max_ns - r.min_ns), r.key))
    return rows


def rank_spread(profiles: Mapping[int, Profile]) -> RankSpread:
    """Kernel time per rank (the coverage total) and which rank is slowest."""
    totals = {rank: profiles[rank].coverage.duration_ns for rank in sorted(profiles)}
    values = list(totals.values())
    return RankSpread(total_ns=totals, min_ns=min(values), median_ns=float(statistics.median(values)),
                      max_ns=max(values), slowest_rank=max(totals, key=lambda r: (totals[r], -r)))
