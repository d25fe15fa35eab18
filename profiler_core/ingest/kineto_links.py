"""Launch links of Kineto traces whose GPU events do not name their operator.

Current Kineto gives each GPU event the ``External id`` of the ``cpu_op`` that launched it.
Older Kineto (and some builds as late as 2024) writes the launch's CUPTI correlation id
there instead, on the GPU event and on its runtime call alike, so no ``cpu_op`` answers to
it and every kernel would stay unattributed::

    cpu_op  aten::ones      tid 948300  [512.0, 514.2] us   External id 513
    runtime cudaLaunchKernel tid 948300  [512.1, 512.2] us  correlation 1482, External id 1482
    kernel  FillFunctor ...                                 correlation 1482, External id 1482
    -> kernel External id 513 (the innermost cpu_op open on the launching thread)

This is what Kineto itself does when it stamps an External id: the operator range open on
the launching thread at the launch. A GPU event is relinked only when its External id is
missing or names no ``cpu_op``; it then keeps the link only when its runtime call is in the
trace and lies inside a ``cpu_op`` (a trace cut down to a window keeps its kernels unnamed).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import defaultdict
from collections.abc import Sequence

from profiler_core.records import CpuOp, RuntimeCall, TimelineKernel

# Ranges looked at behind a launch before giving up: enough for any real nesting (its
# siblings included), and a bound on a huge trace with many launches outside every operator.
_MAX_STEPS_BACK = 4096


def relink_launches(kernels: Sequence[TimelineKernel], cpu_ops: Sequence[CpuOp],
                    runtime_calls: Sequence[RuntimeCall]) -> tuple[list[TimelineKernel], int]:
    """``kernels`` with the External id of their launching ``cpu_op`` where it was missing; and how many."""
    op_ids = {op.external_id for op in cpu_ops if op.external_id is not None}
    orphans = [i for i, k in enumerate(kernels)
               if k.correlation_id is not None and (k.external_id is None or k.external_id not in op_ids)]
    if not orphans or not op_ids:
        return list(kernels), 0
    calls = {c.correlation_id: c for c in runtime_calls if c.correlation_id is not None}
    threads = _threads(cpu_ops)
    out = list(kernels)
    relinked = 0
    for i in orphans:
        corr = out[i].correlation_id
        call = calls.get(corr) if corr is not None else None
        op = _innermost(threads.get(call.tid), call) if call is not None else None
        if op is not None:
            out[i] = dataclasses.replace(out[i], external_id=op.external_id)
            relinked += 1
    return out, relinked


def _threads(cpu_ops: Sequence[CpuOp]) -> dict[int, tuple[list[int], list[CpuOp]]]:
    """Per thread: the operator ranges with an External id, sorted by start (starts, ranges)."""
    by_tid: dict[int, list[CpuOp]] = defaultdict(list)
    for op in cpu_ops:
        if op.category == "cpu_op" and op.external_id is not None:
            by_tid[op.tid].append(op)
    out = {}
    for tid, ops in by_tid.items():
        ops.sort(key=lambda o: (o.start_ns, -o.end_ns))
        out[tid] = ([o.start_ns for o in ops], ops)
    return out


def _innermost(thread: tuple[list[int], list[CpuOp]] | None, call: RuntimeCall) -> CpuOp | None:
    """The latest-opened range of ``thread`` that holds ``call`` (ranges nest, so the innermost)."""
    if thread is None:
        return None
    starts, ops = thread
    last = bisect.bisect_right(starts, call.start_ns) - 1
    for j in range(last, max(last - _MAX_STEPS_BACK, -1), -1):
        if ops[j].end_ns >= call.end_ns:
            return ops[j]
    return None
