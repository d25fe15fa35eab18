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
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from profiler_core.records import CpuOp, RuntimeCall

if TYPE_CHECKING:
    import pyarrow as pa

# Ranges looked at behind a launch before giving up: enough for any real nesting (its
# siblings included), and a bound on a huge trace with many launches outside every operator.
_MAX_STEPS_BACK = 4096


def relink_launches(kernels: pa.Table, cpu_ops: pa.Table, runtime_calls: pa.Table) -> tuple[pa.Table, int]:
    """``kernels`` (a ``KINETO_KERNEL_COLUMNS`` table) with the External id of their launching ``cpu_op``
    where it was missing; and how many. The ops and calls become records only when some kernel needs one."""
    import numpy as np

    from profiler_core.ingest.arrow_columns import filled, from_numpy, one_chunk, validity
    from profiler_core.ingest.column_records import cpu_op_records, runtime_records

    op_column = one_chunk(cpu_ops.column("external_id"))
    op_ids = filled(op_column, 0)[validity(op_column)]
    corr = one_chunk(kernels.column("correlation_id"))
    ext_column = one_chunk(kernels.column("external_id"))
    ext, has_ext = filled(ext_column, 0), validity(ext_column)
    orphans = np.flatnonzero(validity(corr) & ~(has_ext & np.isin(ext, op_ids)))
    if not orphans.size or not op_ids.size:
        return kernels, 0
    calls = {c.correlation_id: c for c in runtime_records(runtime_calls) if c.correlation_id is not None}
    threads = _threads(cpu_op_records(cpu_ops))
    ext, has_ext = ext.copy(), has_ext.copy()
    relinked = 0
    for i, c in zip(orphans.tolist(), filled(corr, 0)[orphans].tolist(), strict=True):
        call = calls.get(c)
        op = _innermost(threads.get(call.tid), call) if call is not None else None
        if op is not None:
            ext[i], has_ext[i] = op.external_id, True
            relinked += 1
    if not relinked:
        return kernels, 0
    column = from_numpy(ext.astype(np.int64), mask=~has_ext)
    return kernels.set_column(kernels.column_names.index("external_id"), "external_id", column), relinked


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
