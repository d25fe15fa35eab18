"""Which part of a training step launched each kernel: forward, backward or the optimizer's step.

The profiler names both regions on the host. The autograd engine runs every backward node
inside a range ``autograd::engine::evaluate_function: AddmmBackward0`` (``CompiledFunctionBackward``
for a compiled graph's backward), on its own thread; ``torch.optim`` wraps each step in
``Optimizer.step#AdamW.step``. A kernel's phase is that of the ranges enclosing the host call
that launched it (its CUDA runtime call, matched by correlation id), on the launching thread::

    cudaLaunchKernel @ t on thread 7  inside  "Optimizer.step#AdamW.step" [t0, t1] on thread 7
    -> "optimizer"

Any other launch of a trace that has such ranges is "forward", except in a compiled step whose
optimizer was compiled too (Dynamo traces through ``Optimizer.step``, so no such range is
recorded): there a launch outside every range that follows a backward range more recently than a
compiled forward (``CompiledFunction``) is the optimizer's. A trace with none of these ranges (an
inference step) gets no phase at all. Kernels replayed from a CUDA graph carry no launch of
their own and get none either. Each backward op also records the sequence number of the
forward op it differentiates; the phase does not need it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
from intervaltree import IntervalTree

from profiler_core.attribution.columns import NONE, Interner, column, encode_attr, last_index_of
from profiler_core.records import KinetoTrace

Phase = Literal["forward", "backward", "optimizer"]
BACKWARD_PREFIX = "autograd::engine::evaluate_function:"
OPTIMIZER_PREFIX = "Optimizer.step#"
_RANK: dict[Phase | None, int] = {"optimizer": 2, "backward": 1}
COMPILED_FORWARD = "CompiledFunction"  # the autograd function a compiled graph's forward runs in


def range_phase(name: str) -> Phase | None:
    """The phase a host range marks, from its name; None for any other range."""
    if name.startswith(OPTIMIZER_PREFIX):
        return "optimizer"
    if name.startswith(BACKWARD_PREFIX):
        return "backward"
    return None


def kernel_phases(kineto: KinetoTrace, correlation_ids: Sequence[int | None]) -> list[Phase | None]:
    """The phase of each kernel launched under ``correlation_ids`` (None: a kernel with no Kineto twin, or
    none), read off the trace's columns where the reader kept them (``record_columns.TableRecords``)."""
    trees: dict[int, IntervalTree] = defaultdict(IntervalTree)
    backward_ends: list[int] = []
    forward_starts: list[int] = []  # compiled forwards: their autograd function's range
    stepped = False  # an Optimizer.step range exists
    ops = kineto.cpu_ops
    names = Interner()
    name_code = encode_attr(names, ops, "name")
    phases = [range_phase(name) for name in names.values]
    marked = np.array([p is not None or name == COMPILED_FORWARD for p, name in zip(phases, names.values,
                                                                                      strict=True)] + [False])
    rows = np.flatnonzero(marked[name_code])  # only the ranges that mark a phase are read one by one
    tids, starts, ends = (column(ops, attr, 0)[rows].tolist() for attr in ("tid", "start_ns", "end_ns"))
    for code, tid, start, end in zip(name_code[rows].tolist(), tids, starts, ends, strict=True):
        phase = phases[code]
        if phase is not None and end > start:
            trees[tid].addi(start, end, phase)
            stepped = stepped or phase == "optimizer"
            if phase == "backward":
                backward_ends.append(end)
        elif phase is None:  # COMPILED_FORWARD
            forward_starts.append(start)
    if not trees:
        return [None] * len(correlation_ids)
    # A compiled optimizer step records no Optimizer.step range (Dynamo traces through it): in a
    # compiled training step, a launch outside any range that follows a backward more recently than a
    # compiled forward is the optimizer's (its step, or its zero_grad)
    after_backward = _after_backward(backward_ends, forward_starts) if not stepped and forward_starts else None
    calls = kineto.runtime_calls
    call_corr = column(calls, "correlation_id")
    wanted = np.fromiter((NONE if c is None else c for c in correlation_ids), dtype=np.int64,
                         count=len(correlation_ids))
    # the last call of each correlation id, as a dict built in order keeps it
    at = np.where(wanted != NONE, last_index_of(call_corr, wanted), NONE) if len(call_corr) else \
        np.full(len(wanted), NONE, dtype=np.int64)
    hit = np.flatnonzero(at != NONE)
    call_tid = column(calls, "tid", 0)[at[hit]].tolist()
    call_start = column(calls, "start_ns", 0)[at[hit]].tolist()
    out: list[Phase | None] = [None] * len(correlation_ids)
    for j, tid, start in zip(hit.tolist(), call_tid, call_start, strict=True):
        found: list[Phase | None] = [iv.data for iv in trees[tid].at(start)] if tid in trees else []
        if found:
            out[j] = max(found, key=_RANK.__getitem__)
        else:
            out[j] = "optimizer" if after_backward is not None and after_backward(start) else "forward"
    return out


def _after_backward(backward_ends: list[int], forward_starts: list[int]) -> Callable[[int], bool]:
    """Whether a time follows the end of a backward range more recently than a compiled forward's start."""
    ends, starts = sorted(backward_ends), sorted(forward_starts)

    def check(t: int) -> bool:
        i, j = bisect_right(ends, t), bisect_right(starts, t)
        return i > 0 and (j == 0 or ends[i - 1] > starts[j - 1])

    return check
