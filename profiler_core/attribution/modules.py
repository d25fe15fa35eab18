"""Which ``nn.Module`` each kernel ran under: its module path (``h.3.attn``; ``""`` is the model).

Two sources, one per way the code ran:

* eager code: torch.profiler's Python tracer (``with_stack=True``) records every module call as
  ``nn.Module: Linear_4``; the capture's ``modules.json`` (the harness's first-call order of the
  model's modules) names ``Linear_4`` ``h.0.mlp.c_fc``. A kernel's launching operator (its CUPTI
  correlation) started inside the innermost module call open on its thread;
* compiled graphs: Inductor's provenance maps each kernel call of ``call()`` to pre-grad FX nodes,
  whose module is read off the parameters they use (ingest/torch_trace.py). Kernels are matched
  to calls in launch order: a generated kernel to the next call of that name, a library kernel to
  the next extern call (a call launching several kernels keeps the ones that follow it).

A kernel neither source speaks for keeps ``module_path`` None. An operator's path is the deepest
module enclosing all of its kernels'.
"""

from __future__ import annotations

import bisect
import json
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

from profiler_core.attribution.names import is_generated_kernel_name
from profiler_core.confinement import read_input
from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest.torch_trace import common_module, record_key
from profiler_core.records import CpuOp, InductorArtifacts, KinetoTrace, ModuleSpan
from profiler_core.schema import ExecutionContext, Profile, Tier


def read_module_map(path: str | os.PathLike[str]) -> dict[str, str]:
    """``modules.json`` -> tracer label to module path: ``{"Linear_4": "h.0.mlp.c_fc", ...}``."""
    p = Path(path)
    try:
        data = json.loads(read_input(p, what="module map", max_bytes=256 * 1024 * 1024))
        rows = data["modules"]
        return {f"{cls}_{int(index)}": str(mpath) for cls, index, mpath in rows}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ArtifactFormatError(
            f"{p}: not a module map ({type(err).__name__}: {err}); the capture writes it beside kineto.json "
            "in eager mode: re-capture, or delete it to attribute without module paths") from err


class ModuleSpans:
    """Innermost module call open at a time on a thread (the Python tracer's spans)."""

    def __init__(self, spans: Sequence[ModuleSpan], names: Mapping[str, str] | None = None) -> None:
        self.names = names or {}
        self.by_tid: dict[int, list[ModuleSpan]] = defaultdict(list)
        for span in sorted(spans, key=lambda s: (s.start_ns, -s.end_ns)):
            self.by_tid[span.tid].append(span)
        self.starts = {tid: [s.start_ns for s in items] for tid, items in self.by_tid.items()}

    def __bool__(self) -> bool:
        return bool(self.by_tid)

    def path_at(self, tid: int, t_ns: int) -> str | None:
        """The module path at ``t_ns`` on ``tid``: mapped name of the innermost open call, else the chain."""
        items = self.by_tid.get(tid)
        if not items:
            return None
        i = bisect.bisect_right(self.starts[tid], t_ns)
        chain = [s for s in items[max(0, i - 512):i] if s.end_ns >= t_ns]  # enclosing calls, outermost first
        if not chain:
            return None
        inner = chain[-1].name
        if inner in self.names:
            return self.names[inner]
        if self.names:
            return None  # a module the map does not know: not a guess
        return ".".join(s.name for s in chain[1:]) if len(chain) > 1 else ""  # labels below the root

    def op_path(self, op: CpuOp) -> str | None:
        return self.path_at(op.tid, op.start_ns)


def assign_module_paths(profile: Profile, *, kineto: KinetoTrace | None = None,
                        inductor: InductorArtifacts | None = None,
                        module_map: Mapping[str, str] | None = None) -> int:
    """Fill ``module_path`` on kernels and operators in place; returns how many kernels got one."""
    paths: list[str | None] = [None] * len(profile.kernels)
    if kineto is not None and kineto.module_spans:
        _eager_paths(profile, kineto, ModuleSpans(kineto.module_spans, module_map), paths)
    if inductor is not None and inductor.call_modules:
        _compiled_paths(profile, inductor.call_modules, paths)
    for k, path in zip(profile.kernels, paths, strict=True):
        k.module_path = path
    for op in profile.operators:
        known = [paths[i] for i in op.kernel_ids if i < len(paths) and paths[i] is not None]
        op.module_path = common_module(known) if known else None  # type: ignore[arg-type]
    return sum(p is not None for p in paths)


def _eager_paths(profile: Profile, kineto: KinetoTrace, spans: ModuleSpans, paths: list[str | None]) -> None:
    ops = {op.external_id: op for op in kineto.cpu_ops if op.external_id is not None and op.category == "cpu_op"}
    for k in profile.kernels:
        ev = next((e for e in k.attribution.evidence if e.tier is Tier.CUPTI_CORRELATION and e.op_id is not None),
                  None)
        op = ops.get(ev.op_id) if ev is not None and ev.op_id is not None else None
        if op is not None:
            paths[k.id] = spans.op_path(op)


def _compiled_paths(profile: Profile, calls: Sequence[tuple[str, str | None]], paths: list[str | None]) -> None:
    compiled = {op.key for op in profile.operators if op.execution_context in (
        ExecutionContext.COMPILED_GRAPH, ExecutionContext.CUDA_GRAPH_REPLAY)}
    names = [record_key(handle) for handle, _ in calls]
    triton = [is_generated_kernel_name(n) for n in names]
    pos = 0
    last_extern: int | None = None
    last_key: str | None = None
    n = len(calls)
    for k in profile.kernels:
        key = k.attribution.operator_key
        if k.kind != "kernel" or key not in compiled:
            last_extern = None
            continue
        if is_generated_kernel_name(k.name):
            hit = next((j % n for j in range(pos, pos + n) if triton[j % n] and names[j % n] == k.name), None)
            last_extern = None
            if hit is None:
                continue
            paths[k.id] = calls[hit][1]
            pos = hit + 1
        elif last_extern is not None and key == last_key:  # one library call, several kernels
            paths[k.id] = calls[last_extern][1]
        elif not triton[pos % n]:
            last_extern = pos % n
            paths[k.id] = calls[last_extern][1]
            pos = last_extern + 1
        else:
            last_extern = None
        last_key = key
