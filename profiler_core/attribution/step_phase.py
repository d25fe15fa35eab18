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

from intervaltree import IntervalTree

from profiler_core.records import KinetoTrace, TimelineKernel

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


def kernel_phases(kineto: KinetoTrace, kernels: Sequence[TimelineKernel | None]) -> list[Phase | None]:
    """The phase of each of ``kernels`` (Kineto kernel records, None where there is no twin)."""
    trees: dict[int, IntervalTree] = defaultdict(IntervalTree)
    backward_ends: list[int] = []
    forward_starts: list[int] = []  # compiled forwards: their autograd function's range
    stepped = False  # an Optimizer.step range exists
    for op in kineto.cpu_ops:
        phase = range_phase(op.name)
        if phase is not None and op.end_ns > op.start_ns:
            trees[op.tid].addi(op.start_ns, op.end_ns, phase)
            stepped = stepped or phase == "optimizer"
            if phase == "backward":
                backward_ends.append(op.end_ns)
        elif op.name == COMPILED_FORWARD:
            forward_starts.append(op.start_ns)
    if not trees:
        return [None] * len(kernels)
    # A compiled optimizer step records no Optimizer.step range (Dynamo traces through it): in a
    # compiled training step, a launch outside any range that follows a backward more recently than a
    # compiled forward is the optimizer's (its step, or its zero_grad)
    after_backward = _after_backward(backward_ends, forward_starts) if not stepped and forward_starts else None
    launch = {r.correlation_id: r for r in kineto.runtime_calls if r.correlation_id is not None}
    out: list[Phase | None] = []
    for k in kernels:
        call = launch.get(k.correlation_id) if k is not None and k.correlation_id is not None else None
        if call is None:
            out.append(None)
            continue
        found: list[Phase | None] = ([iv.data for iv in trees[call.tid].at(call.start_ns)]
                                     if call.tid in trees else [])
        if found:
            out.append(max(found, key=_RANK.__getitem__))
        else:
            out.append("optimizer" if after_backward is not None and after_backward(call.start_ns) else "forward")
    return out


def _after_backward(backward_ends: list[int], forward_starts: list[int]) -> Callable[[int], bool]:
    """Whether a time follows the end of a backward range more recently than a compiled forward's start."""
    ends, starts = sorted(backward_ends), sorted(forward_starts)

    def check(t: int) -> bool:
        i, j = bisect_right(ends, t), bisect_right(starts, t)
        return i > 0 and (j == 0 or ends[i - 1] > starts[j - 1])

    return check
