"""Which ``nn.Module`` each kernel ran under: its module path (``h.3.attn``; ``""`` is the model).

Two sources, one per way the code ran:

* eager code: torch.profiler's Python tracer (``with_stack=True``) records every module call as
  ``nn.Module: Linear_4``; the capture's ``modules.json`` (the harness reads each call's module
  off the profiler's record) names ``Linear_4`` ``h.0.mlp.c_fc``. A kernel's launching operator (its CUPTI
  correlation) started inside the innermost module call open on its thread;
* compiled graphs: Inductor's provenance maps each kernel call of ``call()`` to pre-grad FX nodes,
  whose module is read off the parameters they use (ingest/torch_trace.py); a backward graph's
  calls, which it does not map, are placed by the forward's parameters and saved activations
  they read. Kernels are matched
  to calls in launch order: a generated kernel to the next call of that name, a library kernel to
  the next extern call (a call launching several kernels keeps the ones that follow it).

Kernels neither speaks for are linked (attribution/module_links.py): a backward kernel to its
forward op's module through autograd's sequence numbers, an optimizer kernel to
``optimizer.<class>``. A kernel nothing speaks for keeps ``module_path`` None. An operator's path is the deepest
module enclosing all of its kernels'.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from profiler_core.attribution.module_links import link_paths, nested_by_thread
from profiler_core.attribution.names import is_generated_kernel_name
from profiler_core.confinement import read_input
from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest.torch_trace import common_module, record_key
from profiler_core.records import CpuOp, InductorArtifacts, KinetoTrace, ModuleSpan
from profiler_core.schema import ExecutionContext, Profile, Tier

_T = TypeVar("_T")


def _read_map(path: str | os.PathLike[str], part: Callable[[Any], _T]) -> _T:
    """``part`` of ``modules.json``; anything malformed is one error naming the file and the fix."""
    p = Path(path)
    try:
        return part(json.loads(read_input(p, what="module map", max_bytes=256 * 1024 * 1024)))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise ArtifactFormatError(
            f"{p}: not a module map ({type(err).__name__}: {err}); the capture writes it beside kineto.json "
            "when code ran eagerly: re-capture, or delete it to attribute without module paths") from err


def read_module_map(path: str | os.PathLike[str]) -> dict[str, str]:
    """``modules.json`` -> tracer label to module path: ``{"Linear_4": "h.0.mlp.c_fc", ...}``."""
    return _read_map(path, lambda data: {f"{cls}_{int(index)}": str(mpath) for cls, index, mpath in data["modules"]})


def read_module_methods(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """``modules.json``'s ``methods``: the model's own methods as ``(file, name)`` (none in older maps)."""
    return _read_map(path, lambda data: [(str(file), str(name)) for file, name in data.get("methods", [])])


def _tracer_function(name: str) -> tuple[str, str]:
    """The Python tracer's ``transformers/generation/utils.py(2394): generate`` as (file, function)."""
    where, _, function = name.rpartition("): ")
    return where.rpartition("(")[0], function


def model_calls(calls: Sequence[ModuleSpan], methods: Sequence[tuple[str, str]]) -> list[ModuleSpan]:
    """The traced calls that are calls of the model's own methods: same function name, and the
    tracer's (shortened) file name ends the method's file."""
    files: dict[str, list[str]] = defaultdict(list)
    for file, name in methods:
        files[name].append(file.replace(os.sep, "/"))
    found = []
    for call in calls:
        file, function = _tracer_function(call.name)
        if file and any(f == file or f.endswith("/" + file) for f in files.get(function, ())):
            found.append(call)
    return found


class ModuleSpans:
    """Innermost module call open at a time on a thread (the Python tracer's spans).

    ``model_calls``: calls of the model's own methods (``generate``); a time inside one of them and
    outside every module call is the model's own work, path ``""``.
    """

    def __init__(self, spans: Sequence[ModuleSpan], names: Mapping[str, str] | None = None,
                 model_calls: Sequence[ModuleSpan] = ()) -> None:
        self.names = names or {}
        self.by_tid = nested_by_thread(spans)
        self.model_calls = nested_by_thread(model_calls)

    def __bool__(self) -> bool:
        return bool(self.by_tid)

    def path_at(self, tid: int, t_ns: int) -> str | None:
        """The module path at ``t_ns`` on ``tid``: mapped name of the innermost open call, else the chain."""
        calls = self.by_tid.get(tid)
        chain = calls.chain(t_ns) if calls is not None else []  # outermost first
        if not chain:
            return "" if self._in_model_call(tid, t_ns) else None
        inner = chain[-1].name
        if inner in self.names:
            return self.names[inner]
        if self.names:
            return None  # a module the map does not know: not a guess
        return ".".join(s.name for s in chain[1:]) if len(chain) > 1 else ""  # labels below the root

    def _in_model_call(self, tid: int, t_ns: int) -> bool:
        calls = self.model_calls.get(tid)
        return calls is not None and calls.innermost(t_ns) >= 0

    def op_path(self, op: CpuOp) -> str | None:
        return self.path_at(op.tid, op.start_ns)


def assign_module_paths(profile: Profile, *, kineto: KinetoTrace | None = None,
                        inductor: InductorArtifacts | None = None,
                        module_map: Mapping[str, str] | None = None,
                        methods: Sequence[tuple[str, str]] = ()) -> int:
    """Fill ``module_path`` on kernels and operators in place; returns how many kernels got one.

    A large profile's kernels and operators are columns (attribution/kernel_table.py): their
    module-path columns are filled instead.
    """
    kernels = _KernelFacts.of(profile)
    paths = list(kernels.given)  # set by attribution itself: a step graph's optimizer launches its recording traced
    spans = (ModuleSpans(kineto.module_spans, module_map, model_calls(kineto.python_calls, methods))
             if kineto is not None and kineto.module_spans else None)
    calls = _cpu_calls(kineto) if kineto is not None else {}
    launches = [calls.get(op_id) if op_id is not None else None for op_id in kernels.t1_op_id]
    if spans is not None:
        _eager_paths(launches, spans, paths)
    if inductor is not None and inductor.call_modules:
        _compiled_paths(profile, kernels, inductor.call_modules, paths)
    if kineto is not None and any(p is not None for p in paths):  # a capture with modules
        link_paths(launches, kineto, paths, spans.op_path if spans is not None else None)
    if spans is not None:
        _copy_paths(profile, kernels, calls, spans, paths)
    if isinstance(profile.kernels, list):
        for k, path in zip(profile.kernels, paths, strict=True):
            k.module_path = path
    else:
        profile.kernels.module_path = profile.kernels.strings.encode(paths)
    operators = profile.operators
    if all(p is None for p in paths):  # a capture without modules: no operator has one either
        if isinstance(operators, list):
            for op in operators:
                op.module_path = None
        else:
            operators.module_path = [None] * len(operators)
        return 0
    for g in range(len(operators)):
        ids = operators.kernel_ids(g) if not isinstance(operators, list) else operators[g].kernel_ids
        known = [paths[i] for i in ids if i < len(paths) and paths[i] is not None]
        path = common_module(known) if known else None  # type: ignore[arg-type]
        if isinstance(operators, list):
            operators[g].module_path = path
        else:
            operators.module_path[g] = path
    return sum(p is not None for p in paths)


class _KernelFacts:
    """What module assignment reads of each kernel, from the models or straight from the columns."""

    def __init__(self, t1_op_id: list[int | None], kinds: list[str], names: list[str], keys: list[str | None],
                 given: list[str | None]) -> None:
        self.t1_op_id, self.kinds, self.names, self.keys, self.given = t1_op_id, kinds, names, keys, given

    @classmethod
    def of(cls, profile: Profile) -> _KernelFacts:
        ks = profile.kernels
        if isinstance(ks, list):
            t1 = [next((e.op_id for e in k.attribution.evidence if e.tier is Tier.CUPTI_CORRELATION
                        and e.op_id is not None), None) for k in ks]
            return cls(t1, [k.kind for k in ks], [k.name for k in ks], [k.attribution.operator_key for k in ks],
                       [k.module_path for k in ks])
        ev = ks.evidence[0]  # TIER_ORDER starts with the CUPTI correlation
        t1 = [None if (not h or i < 0) else i for h, i in zip(ev.has.tolist(), ev.op_id.tolist(), strict=True)]
        s = ks.strings.values
        return cls(t1, [s[c] for c in ks.kind.tolist()], ks.names(), ks.operator_key_list(),
                   [s[c] for c in ks.module_path.tolist()])


def _cpu_calls(kineto: KinetoTrace) -> dict[int, CpuOp]:
    """Kineto's ``cpu_op`` calls by their id: a kernel's launching call (its CUPTI correlation) and an
    operator's own call (its ``op_id``) are looked up here."""
    return {op.external_id: op for op in kineto.cpu_ops if op.external_id is not None and op.category == "cpu_op"}


def _copy_paths(profile: Profile, kernels: _KernelFacts, calls: Mapping[int, CpuOp], spans: ModuleSpans,
                paths: list[str | None]) -> None:
    """A memcpy or memset no launch speaks for takes the module its operator's own call ran under.

    With an nsys timeline, copies are filed to their operator by NVTX range, not by a CUPTI
    correlation, so the launch-based rule above leaves them out; the operator's ``op_id`` is its
    Kineto call, which the module spans place (a router's ``.tolist()`` copy under its MoE block).
    """
    ops = profile.operators
    for g in range(len(ops)):
        ids = ops.kernel_ids(g) if not isinstance(ops, list) else ops[g].kernel_ids
        todo = [i for i in ids if i < len(paths) and paths[i] is None and kernels.kinds[i] in ("memcpy", "memset")]
        if not todo:
            continue
        op_id = int(ops.op_id[g]) if not isinstance(ops, list) else ops[g].op_id
        call = calls.get(op_id) if op_id is not None and op_id >= 0 else None  # columns hold -1 for none
        path = spans.op_path(call) if call is not None else None
        for i in todo:
            paths[i] = path


def _eager_paths(launches: Sequence[CpuOp | None], spans: ModuleSpans, paths: list[str | None]) -> None:
    for j, op in enumerate(launches):
        if op is not None:
            paths[j] = spans.op_path(op)


_GENERIC_WORDS = frozenset({"", "default", "forward", "out", "cudnn", "miopen", "aten", "torch", "ops",
                            "extern", "kernels"})


def _op_words(name: str) -> frozenset[str]:
    """The words naming what an operator or extern call does, library and call index left out:
    ``extern_kernels.convolution:3`` -> {convolution}; ``aten::cudnn_convolution`` -> {convolution};
    ``torch.ops.aten._scaled_dot_product_cudnn_attention.default:5`` -> {scaled, dot, product, attention}."""
    text = name.partition(":")[0] if "::" not in name else name.rpartition("::")[2]
    words = {w for part in text.split(".") for w in part.split("_")}
    return frozenset(words - _GENERIC_WORDS)


def _is_custom_op_call(name: str) -> bool:
    """An extern call of an operator outside ATen and prims: ``torch.ops.transformers.grouped_mm_fallback``."""
    return name.startswith("torch.ops.") and not name.startswith(("torch.ops.aten.", "torch.ops.prims."))


def _compiled_paths(profile: Profile, kernels: _KernelFacts, calls: Sequence[tuple[str, str | None]],
                    paths: list[str | None]) -> None:
    ops = profile.operators
    contexts = ops.context if not isinstance(ops, list) else [op.execution_context for op in ops]
    op_keys = ops.keys if not isinstance(ops, list) else [op.key for op in ops]
    compiled = {key for key, ctx in zip(op_keys, contexts, strict=True) if ctx in (
        ExecutionContext.COMPILED_GRAPH, ExecutionContext.CUDA_GRAPH_REPLAY)}
    # a library call (cuDNN) that an extern call of a compiled graph made: ``extern_kernels.convolution``
    # launches ``aten::cudnn_convolution``, filed as an opaque library call; it takes the extern call
    # whose name it carries, never another
    op_names = ops.names if not isinstance(ops, list) else [op.name for op in ops]
    library = {key: _op_words(name) for key, name, ctx in zip(op_keys, op_names, contexts, strict=True)
               if ctx is ExecutionContext.OPAQUE_LIBRARY}
    names = [record_key(handle) for handle, _ in calls]
    triton = [is_generated_kernel_name(n) for n in names]
    extern_op = [_op_words(n) for n in names]
    pos = 0
    last_extern: int | None = None
    last_key: str | None = None
    n = len(calls)
    custom = [_is_custom_op_call(name) for name in names]
    for kid, (kind, kname, key) in enumerate(zip(kernels.kinds, kernels.names, kernels.keys, strict=True)):
        in_custom = last_extern is not None and custom[last_extern]
        if kind != "kernel":
            if in_custom:  # a custom op's own copy (a host read of its counts)
                paths[kid] = calls[last_extern][1]  # type: ignore[index]
            continue  # a memset or copy inside another call: its operator's path, below
        if (in_custom and key in compiled and not is_generated_kernel_name(kname)
                and (triton[pos % n] or not extern_op[pos % n] & _op_words(key.rpartition("#")[0] if key else ""))):
            # a custom op (``torch.ops.transformers.grouped_mm_fallback``) runs ATen ops of its own, each an
            # operator of its own: its kernels stay with it until a generated kernel or the next extern
            # call that names their operation
            paths[kid] = calls[last_extern][1]  # type: ignore[index]
            last_key = key
            continue
        if key not in compiled:
            words = library.get(key) if key is not None else None
            in_call = key == last_key and last_extern is not None  # the extern call in hand
            named_next = not triton[pos % n] and bool(words and extern_op[pos % n] & words)
            if words is None or not (in_call or named_next):
                last_extern = None
                continue
        if is_generated_kernel_name(kname):
            hit = next((j % n for j in range(pos, pos + n) if triton[j % n] and names[j % n] == kname), None)
            last_extern = None
            if hit is None:
                continue
            paths[kid] = calls[hit][1]
            pos = hit + 1
        elif last_extern is not None and key == last_key:  # one library call, several kernels
            paths[kid] = calls[last_extern][1]
        elif not triton[pos % n]:
            last_extern = pos % n
            paths[kid] = calls[last_extern][1]
            pos = last_extern + 1
        else:
            last_extern = None
        last_key = key
    by_key = {key: path for key, path in zip(kernels.keys, paths, strict=True)
              if path is not None and (key in compiled or key in library)}
    for kid, (kind, key) in enumerate(zip(kernels.kinds, kernels.keys, strict=True)):
        if kind != "kernel" and paths[kid] is None and key in by_key:
            paths[kid] = by_key[key]
