"""Compare two multi-rank runs: rank by rank, then the merged view.

Rank N of the optimized run is compared with rank N of the baseline (the ordinary
:func:`~profiler_core.analysis.compare.compare`). The merged rows say what happened to the
slowest rank (the job waits for it), to the spread between ranks, and to each rank's
compute/communication overlap.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from profiler_core.analysis.compare import Comparison, compare
from profiler_core.distributed.attribute import MultiRankProfile, merge_ranks
from profiler_core.errors import ProfilerError
from profiler_core.schema import Profile


class RankOverlapDelta(BaseModel):
    """One rank's overlap share on both sides (None where a side has no NCCL kernel)."""

    model_config = ConfigDict(extra="forbid")

    rank: int
    base_share: float | None
    opt_share: float | None


class MultiRankComparison(BaseModel):
    """Per-rank comparisons plus the merged (slowest-rank, spread, overlap) view."""

    model_config = ConfigDict(extra="forbid")

    world_size: int
    per_rank: dict[int, Comparison]
    base_slowest_rank: int
    opt_slowest_rank: int
    base_max_ns: int  # the slowest rank's kernel time: what the job waits for
    opt_max_ns: int
    max_delta_pct: float
    base_spread_ns: int  # slowest minus fastest rank
    opt_spread_ns: int
    overlap: list[RankOverlapDelta]
    warnings: list[str] = Field(default_factory=list)


def compare_ranks(base: Mapping[int, Profile], opt: Mapping[int, Profile], *,
                  base_label: str | None = None, opt_label: str | None = None) -> MultiRankComparison:
    """Compare rank N with rank N, then the merged views of both runs."""
    if not base or not opt:
        raise ProfilerError("a multi-rank comparison needs profiles on both sides; attribute both runs first")
    warnings: list[str] = []
    if set(base) != set(opt):
        warnings.append(f"the runs have different ranks (baseline {sorted(base)}, optimized {sorted(opt)}); "
                        "only the ranks in both are compared")
    common = sorted(set(base) & set(opt))
    if not common:
        raise ProfilerError(f"no rank in common (baseline {sorted(base)}, optimized {sorted(opt)}); "
                            "compare runs of the same world size")
    per_rank = {r: compare(base[r], opt[r], base_label=_label(base_label, r), opt_label=_label(opt_label, r))
                for r in common}
    bm = merge_ranks({r: base[r] for r in common}, {r: f"rank{r}" for r in common})
    om = merge_ranks({r: opt[r] for r in common}, {r: f"rank{r}" for r in common})
    return _merged(bm, om, per_rank, warnings)


def _merged(bm: MultiRankProfile, om: MultiRankProfile, per_rank: dict[int, Comparison],
            warnings: list[str]) -> MultiRankComparison:
    b_over = {r.rank: r.overlap.overlap_share for r in bm.ranks}
    o_over = {r.rank: r.overlap.overlap_share for r in om.ranks}
    bt, ot = bm.totals, om.totals
    return MultiRankComparison(
        world_size=len(per_rank), per_rank=per_rank, base_slowest_rank=bt.slowest_rank,
        opt_slowest_rank=ot.slowest_rank, base_max_ns=bt.max_ns, opt_max_ns=ot.max_ns,
        max_delta_pct=round(100.0 * (ot.max_ns - bt.max_ns) / bt.max_ns, 3) if bt.max_ns else 0.0,
        base_spread_ns=bt.max_ns - bt.min_ns, opt_spread_ns=ot.max_ns - ot.min_ns,
        overlap=[RankOverlapDelta(rank=r, base_share=b_over.get(r), opt_share=o_over.get(r)) for r in per_rank],
        warnings=warnings + [w for r, c in per_rank.items() for w in (f"rank {r}: {x}" for x in c.warnings[:3])])


def _label(label: str | None, rank: int) -> str | None:
    return None if label is None else f"{label} rank{rank}"
