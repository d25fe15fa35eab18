"""Multi-GPU captures: torchrun launch, per-rank run directories, per-rank attribution, merged view.

    from profiler_core.distributed import attribute_ranks, comm_overlap

    merged = attribute_ranks("oprof-runs/gpt2_ddp-...")   # rank<N>/profile.json + ranks.json
    merged.operators[0]                                   # widest spread across ranks
"""

from profiler_core.distributed.attribute import MultiRankProfile, attribute_ranks, merge_ranks, read_multi_rank
from profiler_core.distributed.compare import MultiRankComparison, compare_ranks
from profiler_core.distributed.overlap import OverlapStats, comm_overlap
from profiler_core.distributed.spread import OperatorSpread, operator_spread
from profiler_core.rundir import is_multi_rank, rank_dir

__all__ = [
    "MultiRankComparison", "MultiRankProfile", "OperatorSpread", "OverlapStats", "attribute_ranks",
    "comm_overlap", "compare_ranks", "is_multi_rank", "merge_ranks", "operator_spread", "rank_dir",
    "read_multi_rank",
]
