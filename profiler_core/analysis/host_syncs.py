"""Data-dependent dispatch in a profile: where the step waits for the GPU to hand the host a value.

A mixture-of-experts router picks experts per token and the host reads the choice back
(``nonzero``, ``.tolist()``, ``.item()``) before it launches each expert's GEMMs. Each read is
a device-to-host copy the host waits on, and a CUDA graph cannot hold one (capture fails with
"Cannot copy between CPU and CUDA tensors during CUDA graph capture"). The profile shows them
as memcpy activities named device-to-host, and as the operators that issue them, each with the
module it ran under when the capture recorded module stacks::

    Memcpy DtoH (Device -> Pageable)   aten::_local_scalar_dense   model.layers.0.mlp
    (kernels)                          aten::nonzero               model.layers.0.mlp

Expert GEMMs are filed per expert where the module path names one (``experts.3``); the rows of
the first GEMM an expert runs are the tokens routed to it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from profiler_core.analysis.patterns import gemm_rows, gemm_rows_of
from profiler_core.analysis.profile_view import CLASS_CODES, ProfileView
from profiler_core.attribution.operator_class import aten_short
from profiler_core.schema import ExecutionContext, Kernel, Operator, OperatorClass

# Operators whose result size or value the host needs before it can go on.
SYNC_OPS = frozenset({"nonzero", "_local_scalar_dense", "item", "masked_select", "unique", "_unique2",
                      "unique_consecutive", "bincount", "nonzero_static"})
_DTOH = re.compile(r"dtoh|device\s*->\s*(pageable|pinned)|device-to-host", re.I)
_EXPERT = re.compile(r"(?:^|\.)experts?\.(\d+)(?:\.|$)")
_EXPERTS_MODULE = re.compile(r"(?:^|\.)experts?(?:\.|$)")


def is_device_to_host(kernel: Kernel) -> bool:
    """A memcpy activity copying device memory to the host."""
    return kernel.kind == "memcpy" and bool(_DTOH.search(kernel.name))


UNKNOWN_MODULE = "?"  # a sync the capture recorded no module for
ROOT_MODULE = "the model's own code"  # module path "": outside every submodule (a loss, generate()'s loop)


@dataclass
class HostSyncs:
    """The host syncs of a profile, by module (``UNKNOWN_MODULE`` where the capture recorded none)."""

    copies: list[Kernel] = field(default_factory=list)  # device-to-host memcpys
    sync_ops: list[Operator] = field(default_factory=list)  # operators that read a value back
    by_module: Counter[str] = field(default_factory=Counter)  # module -> syncs (copies + sync ops)
    by_operator: Counter[str] = field(default_factory=Counter)  # operator name -> syncs
    iterations: int = 1
    in_graphs: int = 0  # syncs issued inside compiled graphs (an opaque custom op's host read, say)
    compiled: bool = False  # whether the capture ran compiled graphs at all

    def __bool__(self) -> bool:
        return bool(self.copies or self.sync_ops)

    @property
    def block_graphs(self) -> bool:
        """Whether the syncs keep CUDA graphs off: some run inside the compiled graphs, or nothing was compiled.

        Inductor's CUDA graphs (mode reduce-overhead) record the compiled regions and run the eager
        code between them (graph breaks) as it is, so a sync there leaves capture possible; one
        inside a compiled region fails it ("Cannot copy between CPU and CUDA tensors during CUDA
        graph capture"). In a capture that compiled nothing, the plan would compile the syncs too.
        """
        return bool(self) and (self.in_graphs > 0 or not self.compiled)

    def evidence(self, limit: int = 4) -> list[str]:
        """Short sentences naming the syncs by module and operator, per measured step."""
        n = self.iterations
        out = [f"{len(self.copies) // n} device-to-host copies and {len(self.sync_ops) // n} value-reading "
               f"operators per step ({', '.join(f'{c // n} x {name}' for name, c in self.by_operator.most_common(4))})"]
        out.extend(f"{count // n} per step under {module}" if module != UNKNOWN_MODULE else
                   f"{count // n} per step in code the capture recorded no module for (eager code outside the "
                   "compiled graphs, such as generate()'s loop or a router's dispatch; `oprof capture "
                   "--compile-mode eager` records its modules)"
                   for module, count in self.by_module.most_common(limit))
        return out


def _module(view: ProfileView, op: Operator | None, kernel: Kernel | None = None) -> str:
    path = kernel.module_path if kernel is not None else None
    if path is None and op is not None:
        path = op.module_path
    return UNKNOWN_MODULE if path is None else path or ROOT_MODULE


def find_host_syncs(view: ProfileView, ops: Sequence[Operator]) -> HostSyncs:
    """Device-to-host copies and value-reading operators in the profile, attributed to their modules."""
    found = HostSyncs(iterations=max(view.profile.capture.measured_iterations or 1, 1),
                      compiled=bool(view.op_flags(ops, "execution_context",
                                                  lambda c: c is ExecutionContext.COMPILED_GRAPH).any()))
    seen_ops: set[str] = set()
    owners, kernels = view.kernel_owner_rows, view.kernels
    # only the kernels named as a device-to-host copy (a few distinct names) are looked at one by one
    for p in np.flatnonzero(view.name_matches(_DTOH)[view.kernel_name_codes]).tolist():
        k = kernels[p]
        if not is_device_to_host(k):
            continue
        op = view.operators[owners[p]] if owners[p] >= 0 else None
        found.copies.append(k)
        found.in_graphs += op is not None and op.execution_context is ExecutionContext.COMPILED_GRAPH
        found.by_module[_module(view, op, k)] += 1
        found.by_operator[op.name if op is not None else k.name] += 1
        if op is not None:
            seen_ops.add(op.key)
    for i in np.flatnonzero(view.op_flags(ops, "name", lambda name: aten_short(name) in SYNC_OPS)).tolist():
        op = ops[i]
        if op.key not in seen_ops:
            found.sync_ops.append(op)
            found.in_graphs += op.execution_context is ExecutionContext.COMPILED_GRAPH
            found.by_module[_module(view, op)] += 1
            found.by_operator[op.name] += 1
    return found


@dataclass(frozen=True)
class ExpertGemms:
    """GEMM time and routed tokens per expert module."""

    gemm_ns: dict[str, int]  # expert module path -> GEMM kernel time
    tokens: dict[str, list[int]]  # expert module path -> rows of its first GEMM, per call
    ops: tuple[Operator, ...]
    pooled: bool  # True when no module path names an expert (the experts run under one module)


def expert_gemms(view: ProfileView, ops: Sequence[Operator]) -> ExpertGemms | None:
    """GEMMs under an experts module, filed per expert where the path names one."""
    gemm_ns: Counter[str] = Counter()
    tokens: dict[str, list[int]] = {}
    picked: list[Operator] = []
    last_expert: str | None = None
    # the GEMMs under an experts module, selected on the view's columns where they are its own
    under = view.op_flags(ops, "module_path", lambda path: _EXPERTS_MODULE.search(path or "") is not None)
    for i in _gemm_positions(view, ops, np.flatnonzero(under)):
        op = ops[i]
        path = op.module_path or ""
        match = _EXPERT.search(path)
        expert = path[: match.end(1)].rstrip(".") if match else path
        picked.append(op)
        gemm_ns[expert] += view.gemm_kernel_ns(view.kernels_of(op))
        if expert != last_expert or not match:  # an expert's first GEMM reads its routed tokens (pooled: each)
            rows = gemm_rows(op)
            if rows is not None:
                tokens.setdefault(expert, []).append(rows)
        last_expert = expert
    if not picked:
        return None
    pooled = not any(_EXPERT.search(op.module_path or "") for op in picked)
    return ExpertGemms(dict(gemm_ns), tokens, tuple(picked), pooled)


def _gemm_positions(view: ProfileView, ops: Sequence[Operator], among: np.ndarray | None = None) -> list[int]:
    """The positions in ``ops`` (of ``among``, default all) of the operators working as GEMMs: their
    work classes read at once for the view's operators in launch order, else asked one by one."""
    at = np.arange(len(ops)) if among is None else among
    if ops is view.ops_in_order:
        gemm = view.work_class_codes[view.op_order[at]] == CLASS_CODES[OperatorClass.GEMM]
        return at[gemm].tolist()
    return [i for i in at.tolist() if view.work_class(ops[i]) is OperatorClass.GEMM]


def _weight_shape(name: str, input_shapes: list | None) -> tuple[int, ...] | None:
    """The shape of a GEMM's weight operand (mm/bmm: the second input; addmm: the third)."""
    shapes = [sh for sh in (input_shapes or []) if isinstance(sh, list)]
    index = 2 if aten_short(name) in ("addmm", "_addmm_activation") else 1
    if len(shapes) <= index or not all(isinstance(d, int) for d in shapes[index]):
        return None
    return tuple(shapes[index])


MIN_EXPERT_RUN = 4  # GEMMs in a run before it reads as one per expert
MIN_DISTINCT_ROWS = 3  # distinct row counts in it (tokens routed per expert)


def per_expert_gemm_runs(view: ProfileView, ops: Sequence[Operator]) -> list[tuple[Operator, ...]]:
    """GEMMs launched one per expert, as a grouped GEMM's fallback loop launches them.

    Consecutive GEMM operators (other work between them ignored) that share their weight's shape
    while their row counts differ: each expert's slice of stacked weights applied to the tokens
    the router sent it. A run needs ``MIN_EXPERT_RUN`` GEMMs with ``MIN_DISTINCT_ROWS`` row counts;
    a projection repeated over layers keeps its rows and never qualifies.
    """
    runs: list[tuple[Operator, ...]] = []
    current: list[int] = []  # positions in ``ops``: a model is built only for a run kept
    key: tuple[int, ...] | None = None
    names, shapes = view.op_column("name", ops), view.op_column("input_shapes", ops)

    def close() -> None:
        rows = {gemm_rows_of(names[i], shapes[i]) for i in current}
        if len(current) >= MIN_EXPERT_RUN and len(rows - {None}) >= MIN_DISTINCT_ROWS:
            runs.append(tuple(ops[i] for i in current))

    for i in _gemm_positions(view, ops):
        weight = _weight_shape(names[i], shapes[i])
        if weight is None or weight != key:
            close()
            current, key = [], weight
        if weight is not None:
            current.append(i)
    close()
    return runs
