"""Which part of a training step launched each kernel: forward, backward or the optimizer's step.

The profiler names both regions on the host. The autograd engine runs every backward node
inside a range ``autograd::engine::evaluate_function: AddmmBackward0`` (``CompiledFunctionBackward``
for a compiled graph's backward), on its own thread; ``torch.optim`` wraps each step in
``Optimizer.step#AdamW.step``. A kernel's phase is that of the ranges enclosing the host call
that launched it (its CUDA runtime call, matched by correlation id), on the launching thread::

    cudaLaunchKernel @ t on thread 7  inside  "Optimizer.step#AdamW.step" [t0, t1] on thread 7
    -> "optimizer"

Any other launch of a trace that has such ranges is "forward"; a trace with none of them (an
inference step) gets no phase at all. Kernels replayed from a CUDA graph carry no launch of
their own and get none either. Each backward op also records the sequence number of the
forward op it differentiates; the phase does not need it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

from intervaltree import IntervalTree

from profiler_core.records import KinetoTrace, TimelineKernel

Phase = Literal["forward", "backward", "optimizer"]
BACKWARD_PREFIX = "autograd::engine::evaluate_function:"
OPTIMIZER_PREFIX = "Optimizer.step#"
_RANK: dict[Phase | None, int] = {"optimizer": 2, "backward": 1}


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
    for op in kineto.cpu_ops:
        phase = range_phase(op.name)
        if phase is not None and op.end_ns > op.start_ns:
            trees[op.tid].addi(op.start_ns, op.end_ns, phase)
    if not trees:
        return [None] * len(kernels)
    launch = {r.correlation_id: r for r in kineto.runtime_calls if r.correlation_id is not None}
    out: list[Phase | None] = []
    for k in kernels:
        call = launch.get(k.correlation_id) if k is not None and k.correlation_id is not None else None
        if call is None:
            out.append(None)
            continue
        found: list[Phase | None] = ([iv.data for iv in trees[call.tid].at(call.start_ns)]
                                     if call.tid in trees else [])
        out.append(max(found, key=_RANK.__getitem__) if found else "forward")
    return out


def operator_phase(phases: Sequence[Phase | None]) -> Phase | None:
    """One operator's phase from its kernels' phases: the first that is known."""
    return next((p for p in phases if p is not None), None)
