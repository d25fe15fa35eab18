"""Module paths for kernels no module call encloses: backward kernels and optimizer kernels.

A kernel of the backward pass runs inside autograd's backward op (``autograd::engine::
evaluate_function: AddmmBackward0``, ``CompiledFunctionBackward``), which Kineto stamps with the
``Sequence number`` of the forward op that made it and a ``Fwd thread id``. The backward kernel
takes that forward op's module path: the module call open at the forward op's start (eager
traces with the Python tracer), else the deepest module enclosing the paths of the kernels the
forward op launched (compiled graphs, whose kernels have paths from Inductor's provenance). A
sequence number whose forward ops disagree gives their common module.

A kernel launched inside ``Optimizer.step#AdamW.step`` or ``Optimizer.zero_grad#AdamW.zero_grad``
(the ranges ``torch.optim`` records) runs under ``optimizer.AdamW``.

Only kernels without a path are filled: a module call or Inductor's provenance speaks first.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Generic, TypeVar

from profiler_core.ingest.torch_trace import common_module
from profiler_core.records import CpuOp, KinetoTrace, ModuleSpan

OPTIMIZER_PREFIX = "optimizer"
_OPTIMIZER_RANGE = re.compile(r"^Optimizer\.(?:step|zero_grad)#(\w+)\.")


def optimizer_path(name: str) -> str | None:
    """``Optimizer.step#AdamW.step`` -> ``optimizer.AdamW``; None for any other range."""
    match = _OPTIMIZER_RANGE.match(name)
    return f"{OPTIMIZER_PREFIX}.{match.group(1)}" if match else None


def is_backward_op(op: CpuOp) -> bool:
    """An op autograd's engine ran for a forward op: it carries the forward thread's id (> 0)."""
    return op.sequence_number is not None and op.sequence_number >= 0 and bool(op.fwd_thread_id)


_S = TypeVar("_S", CpuOp, ModuleSpan)


class Nested(Generic[_S]):
    """One thread's calls (or ops), nested as a call stack: the innermost one open at a time is
    found by bisecting the starts and walking out through the enclosing ones, however many calls
    (each decode step's, each layer's) began and ended since the outer one opened."""

    def __init__(self, spans: Sequence[_S]) -> None:
        self.items: list[_S] = sorted(spans, key=lambda s: (s.start_ns, -s.end_ns))
        self.starts: list[int] = [s.start_ns for s in self.items]
        self.parent: list[int] = []  # index of each one's innermost enclosing one, -1 for none
        stack: list[int] = []
        for i, span in enumerate(self.items):
            while stack and self.items[stack[-1]].end_ns < span.start_ns:
                stack.pop()
            self.parent.append(stack[-1] if stack else -1)
            stack.append(i)

    def innermost(self, t_ns: int) -> int:
        """Index of the innermost one open at ``t_ns`` (start <= t <= end), -1 for none."""
        i = bisect.bisect_right(self.starts, t_ns) - 1
        while i >= 0 and self.items[i].end_ns < t_ns:
            i = self.parent[i]
        return i

    def chain(self, t_ns: int) -> list[_S]:
        """The ones open at ``t_ns``, outermost first (an enclosing one that ended as its last
        child began, ends touching, is walked past)."""
        out: list[_S] = []
        i = self.innermost(t_ns)
        while i >= 0:
            if self.items[i].end_ns >= t_ns:
                out.append(self.items[i])
            i = self.parent[i]
        return out[::-1]


def nested_by_thread(spans: Iterable[_S]) -> dict[int, Nested[_S]]:
    """``spans`` grouped by thread, each thread's as one :class:`Nested`."""
    by_tid: dict[int, list[_S]] = defaultdict(list)
    for span in spans:
        by_tid[span.tid].append(span)
    return {tid: Nested(items) for tid, items in by_tid.items()}


class Enclosing:
    """Per thread, the ops of one kind: which of them encloses a time, innermost."""

    def __init__(self, ops: Sequence[CpuOp]) -> None:
        self.by_tid = nested_by_thread(ops)

    def innermost(self, tid: int, t_ns: int) -> CpuOp | None:
        nested = self.by_tid.get(tid)
        i = nested.innermost(t_ns) if nested is not None else -1
        return nested.items[i] if nested is not None and i >= 0 else None


def link_paths(launch_ops: Sequence[CpuOp | None], kineto: KinetoTrace, paths: list[str | None],
               span_path: Callable[[CpuOp], str | None] | None = None) -> int:
    """Fill ``paths[j]`` (None ones only) of kernels launched by ``launch_ops[j]``; returns how many."""
    ops = kineto.cpu_ops
    backward = Enclosing([op for op in ops if is_backward_op(op)])
    optim = Enclosing([op for op in ops if op.category == "user_annotation" and optimizer_path(op.name)])
    forward: dict[int, list[CpuOp]] = defaultdict(list)
    for fop in ops:
        if fop.category == "cpu_op" and fop.sequence_number is not None and fop.sequence_number >= 0 \
                and not fop.fwd_thread_id:
            forward[fop.sequence_number].append(fop)
    owner: dict[int, list[int]] = defaultdict(list)  # id(launch op) -> kernel indices
    for j, lop in enumerate(launch_ops):
        if lop is not None:
            owner[id(lop)].append(j)
    # kernels' launching ops, to read what a forward op launched
    launched = Enclosing(list({id(o): o for o in launch_ops if o is not None}.values()))
    forward_paths: dict[int, str | None] = {}

    def forward_path(seq: int) -> str | None:
        if seq not in forward_paths:
            found: list[str] = []
            for fop in forward.get(seq, ()):
                path = span_path(fop) if span_path is not None else None
                if path is None:
                    path = _launched_path(fop, launched, owner, paths)
                if path is not None:
                    found.append(path)
            forward_paths[seq] = common_module(found) if found else None
        return forward_paths[seq]

    filled = 0
    for j, op in enumerate(launch_ops):
        if op is None or paths[j] is not None:
            continue
        path: str | None = None
        bwd = backward.innermost(op.tid, op.start_ns)
        if bwd is not None and bwd.sequence_number is not None:
            path = forward_path(bwd.sequence_number)
        if path is None:
            rng = optim.innermost(op.tid, op.start_ns)
            path = optimizer_path(rng.name) if rng is not None else None
        if path is not None:
            paths[j] = path
            filled += 1
    return filled


def _launched_path(fop: CpuOp, launched: Enclosing, owner: dict[int, list[int]],
                   paths: list[str | None]) -> str | None:
    """The deepest module enclosing the paths of the kernels ``fop`` (or an op inside it) launched."""
    nested = launched.by_tid.get(fop.tid)
    if nested is None:
        return None
    lo, hi = bisect.bisect_left(nested.starts, fop.start_ns), bisect.bisect_right(nested.starts, fop.end_ns)
    found = [p for op in nested.items[lo:hi] for j in owner[id(op)] if (p := paths[j]) is not None]
    return common_module(found) if found else None
