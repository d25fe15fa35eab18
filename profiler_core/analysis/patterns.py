"""Structural patterns over the operator sequence: manual attention, parallel projections, GEMM loops.

Each function takes operators in launch order (``ProfileView.ops_in_order``) and returns
index groups into that list; rules turn them into findings and the aligner uses the
attention groups to recognise a matmul-softmax-matmul that a pass replaced with SDPA.

    ops:    aten::bmm  triton_per_fused__softmax_..  aten::mm  aten::bmm
    manual_attention_groups(...) -> [[0, 1, 3]]   (the mm in between is a projection)
"""

from __future__ import annotations

import functools
from bisect import bisect_right
from collections.abc import Callable, Sequence

import numpy as np

from profiler_core.analysis.profile_view import CLASS_CODES, ProfileView
from profiler_core.attribution.columns import unique_ints
from profiler_core.attribution.operator_class import aten_short, is_batched_gemm, is_softmax
from profiler_core.schema import Operator, OperatorClass

_SCALE_OPS = frozenset({"div", "mul", "div_", "mul_", "true_divide"})
_PROJECTION_OPS = frozenset({"mm", "addmm", "linear", "matmul", "_addmm_activation"})
# Operators that may sit between parallel projections without consuming one of them:
# views, copies and the bias-add epilogues Inductor splits off cuBLAS GEMMs.
_PASS_THROUGH_CLASSES = frozenset({OperatorClass.CAST_COPY, OperatorClass.OTHER})


def manual_attention_groups(view: ProfileView, ops: Sequence[Operator], window: int) -> list[list[int]]:
    """Index groups [score GEMM, scale ops..., softmax, value GEMM] of a hand-written attention."""
    key = (id(ops), window)
    known = view.attention_groups.get(key)
    if known is not None and known[0] is ops:
        return [list(group) for group in known[1]]
    groups = _attention_groups(view, ops, window)
    view.attention_groups[key] = (ops, groups)
    return [list(group) for group in groups]


def _class_of(view: ProfileView, ops: Sequence[Operator]) -> Callable[[int], OperatorClass]:
    """The work class of ``ops[i]``: read at once for the view's operators in launch order, else asked
    operator by operator."""
    if ops is view.ops_in_order:
        return view.work_classes_in_order.__getitem__
    return lambda i: view.work_class(ops[i])


def _attention_groups(view: ProfileView, ops: Sequence[Operator], window: int) -> list[list[int]]:
    groups: list[list[int]] = []
    used: set[int] = set()
    class_of = _class_of(view, ops)
    names = view.op_column("name", ops)
    # the softmaxes and batched GEMMs, each distinct (name, fused ops) tested once
    softmax = _flags(view, ops, is_softmax)
    bgemm = _flags(view, ops, is_batched_gemm)
    for s in np.flatnonzero(softmax).tolist():
        if class_of(s) is OperatorClass.ATTENTION:
            continue
        before = _nearest(bgemm, range(s - 1, max(s - 1 - window, -1), -1), used)
        after = _nearest(bgemm, range(s + 1, min(s + 1 + window, len(ops))), used)
        if before is None or after is None:
            continue
        scale = [i for i in range(before + 1, s) if aten_short(names[i]) in _SCALE_OPS]
        group = [before, *scale, s, after]
        groups.append(group)
        used.update(group)
    return groups


def _flags(view: ProfileView, ops: Sequence[Operator], test: Callable[[str, list[str]], bool]) -> np.ndarray:
    """``test(op.name, op.fused_with)`` of each of ``ops`` (:meth:`ProfileView.op_flags`)."""
    return view.op_flags(ops, ("name", "fused_with"), test)


def _nearest(bgemm: np.ndarray, indices: range, used: set[int]) -> int | None:
    for i in indices:
        if i not in used and bgemm[i]:
            return i
    return None


def gemm_signature(view: ProfileView, op: Operator,
                   memo: dict[tuple[str, int], tuple[object, tuple | None]] | None = None,
                   work_class: OperatorClass | None = None) -> tuple | None:
    """What a projection GEMM reads: (activation shape, weight shape), else its kernels' launch shapes.

    ``memo``: the shapes' part by (name, shapes list) for a pass over many operators (the operators
    of a profile read from tables share one shapes list per distinct signature); ``work_class``:
    the operator's work class where it is already read."""
    return _signature(view, op.name, op.input_shapes, lambda: op, memo, work_class)


def _signature(view: ProfileView, name: str, listed: list | None, op_of: Callable[[], Operator],
               memo: dict[tuple[str, int], tuple[object, tuple | None]] | None,
               work_class: OperatorClass | None) -> tuple | None:
    """:func:`gemm_signature` of the operator named ``name`` with input shapes ``listed``; ``op_of``
    gives its model, asked for only where its class or kernels are read."""
    short = aten_short(name)
    if short not in _PROJECTION_OPS:
        return None  # not a projection
    if (view.work_class(op_of()) if work_class is None else work_class) is not OperatorClass.GEMM:
        return None  # only its epilogue: the GEMM ran under another operator
    hit = memo.get((name, id(listed))) if memo is not None else None
    if hit is not None and hit[0] is listed:
        by_shapes = hit[1]
    else:
        by_shapes = _shapes_signature(short, listed)
        if memo is not None:
            memo[(name, id(listed))] = (listed, by_shapes)  # the list is held: its id is not reused
    if by_shapes is not None:
        return by_shapes
    return _launch_signature(view, op_of())


def _shapes_signature(short: str, listed: list | None) -> tuple | None:
    """A projection's (activation shape, weight shape) from its input shapes, None where they do not
    give both."""
    shapes = [tuple(s) for s in (listed or []) if isinstance(s, list)]
    if shapes:
        # mm(a, b), addmm(bias, a, b), linear(x, w, b): the activation and the weight.
        pair = shapes[1:3] if short in ("addmm", "_addmm_activation") else shapes[:2]
        if len(pair) == 2 and all(pair):
            return ("shapes", *pair)
    return None


def _launch_signature(view: ProfileView, op: Operator) -> tuple | None:
    """A projection's signature from its kernels' launches, for one whose shapes give none."""
    kernels = view.kernels_of(op)
    if not kernels:
        return None
    return ("launch", *((k.name, k.grid, k.block) for k in kernels))


def gemm_signatures(view: ProfileView, ops: Sequence[Operator]) -> list[tuple | None]:
    """:func:`gemm_signature` of each of ``ops``, worked out once per view and list of operators
    (the projection and recurrence rules both read them)."""
    known = view.gemm_signatures.get(id(ops))
    if known is not None and known[0] is ops:
        return known[1]
    sigs: list[tuple | None] = [None] * len(ops)  # None: not a projection
    projections = np.flatnonzero(view.op_flags(ops, "name", lambda name: aten_short(name) in _PROJECTION_OPS))
    names = view.op_codes_in_order("name") if ops is view.ops_in_order else None
    shapes = view.op_codes_in_order("input_shapes") if names is not None else None
    if names is not None and shapes is not None:
        # read off the table: the shapes' part once per distinct (name, shapes), the class off the codes
        (name_codes, name_values), (shape_codes, shape_values) = names, shapes
        width = max(len(shape_values), 1)
        combos, combo_of = unique_ints(name_codes[projections] * width + shape_codes[projections], inverse=True)
        by_combo = [_shapes_signature(aten_short(name_values[k // width]), shape_values[k % width])
                    for k in combos.tolist()]
        gemm = view.work_class_codes[view.op_order[projections]] == CLASS_CODES[OperatorClass.GEMM]
        for i, j, is_gemm in zip(projections.tolist(), combo_of.tolist(), gemm.tolist(), strict=True):
            if is_gemm:
                sig = by_combo[j]
                sigs[i] = sig if sig is not None else _launch_signature(view, ops[i])
    else:
        memo: dict[tuple[str, int], tuple[object, tuple | None]] = {}
        classes = view.work_classes_in_order if ops is view.ops_in_order else [None] * len(ops)
        name_list, shape_list = view.op_column("name", ops), view.op_column("input_shapes", ops)
        for i in projections.tolist():
            sigs[i] = _signature(view, name_list[i], shape_list[i], functools.partial(ops.__getitem__, i), memo,
                                 classes[i])
    view.gemm_signatures[id(ops)] = (ops, sigs)
    return sigs


def gemm_input_signature(view: ProfileView, op: Operator) -> tuple | None:
    """What a projection GEMM reads, without its weight: (activation shape), else its launch shapes.

    Projections that read one input may differ in width: a grouped-query attention's Q projection
    is wider than its K and V ones, a Llama's gate and up projections match each other only.
    """
    return _input_signature(gemm_signature(view, op))


def _input_signature(sig: tuple | None) -> tuple | None:
    if sig is not None and sig[0] == "shapes":
        # an outer product (K = 1: a rotary embedding's inv_freq x positions) projects nothing
        return None if sig[1] and sig[1][-1] == 1 else ("shapes", sig[1])
    return sig


def parallel_projection_groups(view: ProfileView, ops: Sequence[Operator], *, min_size: int,
                               max_size: int) -> list[list[int]]:
    """Runs of projection GEMMs reading one input (its shape: gemm_input_signature), of any size
    from ``min_size`` to ``max_size``.

    Between two members only views, copies and bias epilogues may run, or the score half of an
    attention that the earlier members feed: a hand-written attention launches Q and K, its
    score GEMM and softmax, and only then V, which reads the same input. The value GEMM (a
    batched GEMM after the softmax) ends the run: what follows it reads the attention's output.

        mm(x)  mm(x)  bmm  softmax  mm(x)  bmm  mm(y)   -> [[0, 1, 4]]

    Where the capture names each projection's module (Inductor's provenance), the members share
    their parent module (``layers.3.self_attn``), and work of that module or of a module above it
    may run between them: the rotary embedding Inductor schedules between K and V, the position
    table the model computes before layer 0's K. A projection of another parent starts a new run.

    In a training step's backward, GEMMs of one shape follow each other without sharing an input
    (GPT-2's MLP: the weight gradients of ``c_fc`` and ``c_proj``). A backward run counts only as
    the backward of projections the forward grouped: its members' modules are among those of one
    forward group (the weight gradients of Q, K and V read the same saved input); without module
    paths it does not count. Operators of no known phase are read as forward.
    """
    groups: list[list[int]] = []
    run: list[int] = []
    signature: tuple | None = None
    parent: str | None = None
    score_path = softmax_seen = False

    def close() -> None:
        if min_size <= len(run) <= max_size:
            groups.append(list(run))

    class_of = _class_of(view, ops)
    # what the scan reads of each operator, off the view's columns where they are its own
    paths = view.op_column("module_path", ops)
    bgemm, softmax, adds_bias = (_flags(view, ops, test).tolist()
                                 for test in (is_batched_gemm, is_softmax, _adds_bias_only))
    inputs: dict[int, tuple] = {}
    of_full: dict[int, tuple | None] = {}  # operators of one (name, shapes) share one signature object
    for i, full in enumerate(gemm_signatures(view, ops)):
        if full is not None:
            if id(full) in of_full:
                sig = of_full[id(full)]
            else:
                sig = of_full[id(full)] = _input_signature(full)
            if sig is not None:
                inputs[i] = sig
    # With no run open, an operator that is not a projection changes nothing (a run of none is not
    # kept): the scan goes from one projection to the next until a run opens.
    starts = sorted(inputs) if min_size > 0 else list(range(len(ops)))
    n = len(ops)
    i = starts[0] if starts else n
    while i < n:
        sig = inputs.get(i)
        if sig is not None:
            if sig == signature and _parent(paths[i]) == parent:
                run.append(i)
            else:
                close()
                run, signature, parent, score_path, softmax_seen = [i], sig, _parent(paths[i]), False, False
        else:
            cls = class_of(i)
            if cls in _PASS_THROUGH_CLASSES or (cls in _EPILOGUE_CLASSES and adds_bias[i]):
                pass
            elif (run and parent is not None and cls is not OperatorClass.ATTENTION and _within(paths[i], parent)
                    and not bgemm[i] and not softmax[i]):
                pass  # the parent module's own work (or its caller's) between its projections
            elif run and bgemm[i] and not softmax_seen:
                score_path = True  # the score GEMM of the attention the members feed
            elif score_path and cls is not OperatorClass.ATTENTION and not bgemm[i]:
                softmax_seen = softmax_seen or bool(softmax[i])  # scale, mask, softmax between the GEMMs
            else:
                close()
                run, signature, parent, score_path, softmax_seen = [], None, None, False, False
        if run or min_size <= 0:
            i += 1
        else:
            k = bisect_right(starts, i)
            i = starts[k] if k < len(starts) else n
    close()
    return _backward_of_forward_groups(paths, view.op_column("phase", ops), groups)


_NOT_FORWARD = ("backward", "optimizer")


def _backward_of_forward_groups(paths: Sequence[str | None], phases: Sequence[str | None],
                                groups: list[list[int]]) -> list[list[int]]:
    """``groups`` less the backward runs that are not the backward of a forward group (its modules);
    ``paths`` and ``phases``: each operator's module path and phase."""
    if not any(phase in _NOT_FORWARD for phase in set(phases)):
        return groups  # no backward or optimizer operator (inference): every run is a forward one
    forward = {frozenset(paths[i] for i in g) for g in groups
               if not any(phases[i] in _NOT_FORWARD for i in g)}
    kept = []
    for g in groups:
        if any(phases[i] in _NOT_FORWARD for i in g):
            modules = frozenset(paths[i] for i in g)
            if None in modules or not any(modules <= group for group in forward):
                continue
        kept.append(g)
    return kept


def _parent(path: str | None) -> str | None:
    """The module a projection of module ``path`` belongs to (``layers.3.self_attn`` of
    ``layers.3.self_attn.q_proj``)."""
    return path.rsplit(".", 1)[0] if path and "." in path else None


def _within(path: str | None, parent: str) -> bool:
    """Whether an operator of module ``path`` is the parent's own work or its callers' (not a sibling's)."""
    if not path:
        return False
    return path == parent or path.startswith(parent + ".") or parent.startswith(path + ".")


_EPILOGUE_CLASSES = (OperatorClass.ELEMENTWISE, OperatorClass.CAST_COPY)  # a bias epilogue's classes


def _adds_bias_only(name: str, fused_with: list[str]) -> bool:
    """Whether an operator of a :data:`_EPILOGUE_CLASSES` class with this name and these fused ops
    is an Inductor pointwise kernel that only adds a GEMM's bias (and reshapes).

    Spelled ``triton_poi_fused_addmm_clone_..`` when the operator is named after its kernel, or
    ``aten::addmm`` with ``fused_with`` [clone, transpose, view] when it is filed under its op.
    """
    fused = {aten_short(f) for f in fused_with} | {aten_short(name)} | set(name.split("_"))
    return bool(fused & {"addmm", "linear"}) and not fused & {"relu", "gelu", "silu", "tanh", "sigmoid",
                                                              "add", "mul"}


def same_shape_gemm_runs(view: ProfileView, ops: Sequence[Operator]) -> dict[tuple, list[int]]:
    """Projection GEMMs grouped by signature over the whole profile (for recurrence detection)."""
    out: dict[tuple, list[int]] = {}
    for i, sig in enumerate(gemm_signatures(view, ops)):
        if sig is not None:
            out.setdefault(sig, []).append(i)
    return out


def gemm_rows(op: Operator) -> int | None:
    """M of a projection GEMM from its input shapes (product of the activation's leading dims)."""
    return gemm_rows_of(op.name, op.input_shapes)


def gemm_rows_of(name: str, input_shapes: list | None) -> int | None:
    """:func:`gemm_rows` of an operator named ``name`` with ``input_shapes``."""
    shapes = [s for s in (input_shapes or []) if isinstance(s, list) and s]
    short = aten_short(name)
    if not shapes:
        return None
    act = shapes[1] if short in ("addmm", "_addmm_activation") and len(shapes) > 1 else shapes[0]
    rows = 1
    for dim in act[:-1]:
        if not isinstance(dim, int):
            return None
        rows *= dim
    return rows
