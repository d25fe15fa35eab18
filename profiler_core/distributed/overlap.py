"""Compute/communication overlap of one rank, measured on its timeline.

Of the time NCCL kernels run, how much runs while a compute kernel runs on another
stream: the part of communication hidden behind compute. Compute intervals (every
non-NCCL kernel, per stream) go into an interval tree; each NCCL kernel's overlap is the
length of its intersection with the union of compute intervals on the other streams.
A rank with no NCCL kernel has no overlap to speak of: the share is None, and ``note``
says so, rather than a 0 % that would read as "nothing hidden".
"""

from __future__ import annotations

from collections.abc import Sequence

from intervaltree import IntervalTree
from pydantic import BaseModel, ConfigDict

from profiler_core.schema import Kernel, OperatorClass, Profile


class OverlapStats(BaseModel):
    """How much of one rank's NCCL time runs concurrently with compute on other streams."""

    model_config = ConfigDict(extra="forbid")

    nccl_kernels: int
    nccl_ns: int  # summed NCCL kernel time
    compute_ns: int  # summed compute kernel time
    overlapped_ns: int  # NCCL time during which compute ran on another stream
    exposed_ns: int  # NCCL time with no compute beside it
    overlap_share: float | None  # overlapped_ns / nccl_ns; None without NCCL kernels
    note: str | None = None


def is_nccl_kernel(kernel: Kernel, comm_ops: frozenset[str] = frozenset()) -> bool:
    """An NCCL kernel: its library is nccl, or its operator is a communication operator."""
    return kernel.library == "nccl" or (kernel.attribution.operator_key or "") in comm_ops


def communication_ops(profile: Profile) -> frozenset[str]:
    """Keys of the profile's communication operators (their kernels count as NCCL kernels)."""
    return frozenset(o.key for o in profile.operators if o.op_class is OperatorClass.COMMUNICATION)


def comm_overlap(profile: Profile) -> OverlapStats:
    """Overlap of NCCL kernels with compute kernels on other streams (module docstring)."""
    comm_ops = communication_ops(profile)
    kernels = [k for k in profile.kernels if k.kind == "kernel" and k.end_ns > k.start_ns]
    nccl = [k for k in kernels if is_nccl_kernel(k, comm_ops)]
    compute = [k for k in kernels if not is_nccl_kernel(k, comm_ops)]
    compute_ns = sum(k.end_ns - k.start_ns for k in compute)
    if not nccl:
        return OverlapStats(nccl_kernels=0, nccl_ns=0, compute_ns=compute_ns, overlapped_ns=0, exposed_ns=0,
                            overlap_share=None,
                            note="no NCCL kernel on this rank's timeline: overlap is undefined")
    trees: dict[tuple[int, int], IntervalTree] = {}
    overlapped = sum(_covered_ns(k, trees, compute) for k in nccl)
    nccl_ns = sum(k.end_ns - k.start_ns for k in nccl)
    return OverlapStats(nccl_kernels=len(nccl), nccl_ns=nccl_ns, compute_ns=compute_ns, overlapped_ns=overlapped,
                        exposed_ns=nccl_ns - overlapped, overlap_share=overlapped / nccl_ns)


def _covered_ns(comm: Kernel, trees: dict[tuple[int, int], IntervalTree], compute: Sequence[Kernel]) -> int:
    key = (comm.device, comm.stream)
    if key not in trees:  # compute on the same device, other streams than this NCCL kernel's
        trees[key] = IntervalTree.from_tuples((k.start_ns, k.end_ns) for k in compute
                                              if k.stream != comm.stream and k.device == comm.device)
    hits = trees[key].overlap(comm.start_ns, comm.end_ns)
    if not hits:
        return 0
    # clip to the NCCL kernel, then merge so two concurrent compute kernels count once
    clipped = IntervalTree.from_tuples((max(iv.begin, comm.start_ns), min(iv.end, comm.end_ns)) for iv in hits)
    clipped.merge_overlaps(strict=False)
    return sum(iv.end - iv.begin for iv in clipped)
