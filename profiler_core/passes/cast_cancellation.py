"""Cast cancellation: drop round-trip casts (bf16 -> fp32 -> bf16) that only cost memory traffic.

A widening cast followed by the narrowing cast back is the identity when the wide type holds
every value of the narrow one exactly (bf16/fp16 in fp32 or fp64, fp32 in fp64). Promoting
GEMMs one by one creates such pairs between back-to-back GEMMs; left in, they eat the gain::

    before:  y16 = mm(a16, b16); y32 = y16.to(f32); v = y32.view(...); z16 = v.to(bf16); mm(z16, ..)
    after:   y16 = mm(a16, b16); v = y16.view(...);                                     mm(v, ..)

Level 1 (Dynamo graph) cancels across layout-only ops (view, transpose, split, ...), which
give the same values in any dtype; Level 2 (post-grad ATen graph) cancels adjacent pairs only,
so every node Inductor lowers keeps correct metadata.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.fx import Graph, Node

from profiler_core.passes.contract import GraphChange, PassContext, PassEffect
from profiler_core.passes.fx_nodes import is_layout, node_dtype, operand
from profiler_core.passes.post_grad import RecordedGraphPass
from profiler_core.passes.registry import PassLevel, register_pass

# (narrow, wide): the wide type represents every narrow value exactly.
EXACT_WIDENINGS = frozenset({
    (torch.bfloat16, torch.float32), (torch.float16, torch.float32),
    (torch.bfloat16, torch.float64), (torch.float16, torch.float64),
    (torch.float32, torch.float64),
})

_METHOD_DTYPES = {"float": torch.float32, "bfloat16": torch.bfloat16, "half": torch.float16,
                  "double": torch.float64}

_SHAPE_QUERIES = frozenset({"size", "dim", "numel", "stride"})

CastDtype = Callable[[Node], "torch.dtype | None"]


def dynamo_cast_dtype(node: Node) -> torch.dtype | None:
    """Target dtype if ``node`` is a pure dtype cast in a Dynamo graph (``x.to(dtype)``, ``x.float()``)."""
    if node.op != "call_method":
        return None
    if node.target in _METHOD_DTYPES and len(node.args) == 1 and not node.kwargs:
        return _METHOD_DTYPES[str(node.target)]
    if node.target != "to":
        return None
    extra = set(node.kwargs) - {"dtype"}
    if extra:
        return None  # copy=, non_blocking=, memory_format= or a device: not a plain cast
    target = operand(node, 1) if len(node.args) == 2 else None
    if isinstance(target, torch.dtype) and "dtype" not in node.kwargs:
        return target
    keyword = node.kwargs.get("dtype")
    if len(node.args) == 1 and isinstance(keyword, torch.dtype):
        return keyword
    return None


def aten_cast_dtype(node: Node) -> torch.dtype | None:
    """Target dtype if ``node`` is a pure dtype cast in a post-grad ATen graph."""
    if node.op != "call_function":
        return None
    if node.target is torch.ops.prims.convert_element_type.default:
        return operand(node, 1) if isinstance(operand(node, 1), torch.dtype) else None
    if node.target is torch.ops.aten._to_copy.default and set(node.kwargs) <= {"dtype"}:
        dtype = node.kwargs.get("dtype")
        return dtype if isinstance(dtype, torch.dtype) else None
    return None


def cancel_round_trips(graph: Graph, cast_dtype: CastDtype, *, through_layout: bool) -> int:
    """Remove every widening cast whose value only reaches narrowing casts back; return casts removed."""
    removed = 0
    gone: set[Node] = set()
    for widen in list(graph.nodes):
        if widen in gone:
            continue
        wide = cast_dtype(widen)
        if wide is None or not widen.args or not isinstance(operand(widen, 0), Node):
            continue
        source = operand(widen, 0)
        narrow = node_dtype(source)
        if narrow is None or (narrow, wide) not in EXACT_WIDENINGS:
            continue
        ends = _narrowing_ends(widen, narrow, cast_dtype, through_layout)
        if not ends:
            continue
        widen.replace_all_uses_with(source)
        graph.erase_node(widen)
        for end in ends:
            end.replace_all_uses_with(operand(end, 0))
            graph.erase_node(end)
        gone.update(ends)
        removed += 1 + len(ends)
    return removed


def _narrowing_ends(widen: Node, narrow: torch.dtype, cast_dtype: CastDtype,
                    through_layout: bool) -> list[Node]:
    """The narrowing casts that consume ``widen``'s value; [] if anything else consumes it."""
    ends: list[Node] = []
    region = {widen}
    stack = list(widen.users)
    while stack:
        user = stack.pop()
        if user in region or user in ends:
            continue
        if not user.args or operand(user, 0) not in region:
            return []  # the value enters as a non-first argument: not a layout-only use
        if user.op == "call_method" and user.target in _SHAPE_QUERIES:
            continue  # reads shape only: the same answer in any dtype
        if cast_dtype(user) == narrow:
            ends.append(user)
        elif through_layout and is_layout(user):
            region.add(user)
            stack.extend(user.users)
        else:
            return []
    return ends


class CastCancellation(RecordedGraphPass):
    """Post-grad pass: remove adjacent widening/narrowing cast pairs in the ATen graph."""

    name = "cast_cancellation"

    def transform(self, graph: Graph) -> GraphChange:
        """Cancel round trips; report how many casts went."""
        removed = cancel_round_trips(graph, aten_cast_dtype, through_layout=False)
        if not removed:
            return GraphChange(False, "no round-trip casts in the post-grad graph", {"casts_cancelled": 0})
        return GraphChange(True, details={"casts_cancelled": removed})


@register_pass(
    "cast_cancellation",
    level=PassLevel.POST_GRAD,
    symptom="cast/copy kernels between back-to-back low-precision operators",
    order=50,
)
def cast_cancellation(ctx: PassContext) -> PassEffect:
    """Remove bf16/fp16 -> fp32 -> bf16/fp16 round trips from the post-grad ATen graph."""
    return PassEffect(post_grad_passes=(CastCancellation(),))
