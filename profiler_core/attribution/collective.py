"""The collective an NCCL kernel belongs to, whichever way the trace spells it.

Kineto correlates a kernel with the range open when it was launched. A collective called
from Python is the dispatcher op ``c10d::allreduce_``; one issued by DDP's reducer from
its autograd hook is only inside ProcessGroupNCCL's own ``nccl:all_reduce`` range. Both
spellings name one collective, so both become the same operator name: a rank, or two
runs, that reached the collective by different paths still line up.
"""

from __future__ import annotations

# ProcessGroupNCCL's record_function names -> the c10d dispatcher op of that collective.
_NCCL_RANGES = {
    "all_reduce": "c10d::allreduce_",
    "all_reduce_coalesced": "c10d::allreduce_coalesced_",
    "all_reduce_barrier": "c10d::barrier",
    "all_gather": "c10d::allgather_",
    "_all_gather_base": "c10d::_allgather_base_",
    "all_gather_into_tensor_coalesced": "c10d::allgather_into_tensor_coalesced_",
    "reduce_scatter": "c10d::reduce_scatter_",
    "_reduce_scatter_base": "c10d::_reduce_scatter_base_",
    "reduce_scatter_tensor_coalesced": "c10d::reduce_scatter_tensor_coalesced_",
    "broadcast": "c10d::broadcast_",
    "reduce": "c10d::reduce_",
    "all_to_all": "c10d::alltoall_",
    "all_to_all_base": "c10d::alltoall_base_",
    "gather": "c10d::gather_",
    "scatter": "c10d::scatter_",
    "send": "c10d::send",
    "recv": "c10d::recv_",
}
NCCL_RANGE_PREFIX = "nccl:"


def collective_operator(range_name: str) -> str | None:
    """``"nccl:all_reduce"`` -> ``"c10d::allreduce_"``; any other name -> None."""
    if not range_name.startswith(NCCL_RANGE_PREFIX):
        return None
    what = range_name[len(NCCL_RANGE_PREFIX):].strip()
    if not what:
        return None
    # an unknown collective keeps its own name under c10d, so it is still communication
    return _NCCL_RANGES.get(what, f"c10d::{what}")
