"""QKV fusion: parallel linears that read one input become one GEMM on concatenated weights.

Small Q/K/V projection GEMMs leave most SMs idle (low achieved occupancy); one GEMM with
three times the columns fills them. The structure (one LayerNorm output feeding three
linears) exists only before AOTAutograd, so this is a Level-1 rewrite on the Dynamo graph::

    before:  q = linear(h, wq, bq); k = linear(h, wk, bk); v = linear(h, wv, bv)
    after:   qkv = linear(h, cat([wq, wk, wv]), cat([bq, bk, bv]))
             q, k, v = split(qkv, [dq, dk, dv], dim=-1)

Legal only when every linear reads the very same input node, weights share dtype and device
with the input, and either all or none have a bias. The weight concatenation runs every call
unless the ``freezing`` pass folds it into a constant.
"""

from __future__ import annotations

import operator
import re
from typing import Any

import torch
from torch.fx import Graph, GraphModule, Node

from profiler_core.passes.contract import GraphChange, GraphInfo, PassContext, PassEffect
from profiler_core.passes.fx_nodes import (
    LINEAR_FUNCTIONS,
    argument,
    copy_provenance,
    graph_source_name,
    is_call,
    node_dtype,
    node_shape,
    tensor_meta,
)
from profiler_core.passes.registry import PassLevel, register_pass

_MODULE_SEGMENT = re.compile(r"_modules\['([^']+)'\]")


def linear_parts(node: Node) -> tuple[Node, Node, Node | None] | None:
    """(input, weight, bias) of a linear call whose operands are graph values; None otherwise."""
    x, weight, bias = argument(node, 0, "input"), argument(node, 1, "weight"), argument(node, 2, "bias")
    if not isinstance(x, Node) or not isinstance(weight, Node):
        return None
    if bias is not None and not isinstance(bias, Node):
        return None
    return x, weight, bias


def describe_linear(node: Node) -> str:
    """A readable name for a linear: the module path of its weight (``h.0.attn.q_proj``) if known."""
    parts = linear_parts(node)
    weight = parts[1] if parts else None
    source = graph_source_name(weight) if weight is not None else None
    path = _MODULE_SEGMENT.findall(source) if source is not None else []
    return ".".join(path) if path else node.name


def _illegal(group: list[Node], position: dict[Node, int]) -> str | None:
    """None if the linears in ``group`` may be fused, else the reason they may not."""
    x = linear_parts(group[0])[0]  # type: ignore[index]
    x_meta = tensor_meta(x)
    first = min(position[n] for n in group)
    with_bias = [linear_parts(n)[2] is not None for n in group]  # type: ignore[index]
    if any(with_bias) and not all(with_bias):
        have = [describe_linear(n) for n, b in zip(group, with_bias, strict=True) if b]
        lack = [describe_linear(n) for n, b in zip(group, with_bias, strict=True) if not b]
        return f"{', '.join(have)} have a bias and {', '.join(lack)} do not"
    for node in group:
        _, weight, bias = linear_parts(node)  # type: ignore[misc]
        w_meta = tensor_meta(weight)
        if w_meta is None or x_meta is None or w_meta.dim() != 2:
            return f"{describe_linear(node)}: weight shape unknown or not 2-D"
        if not isinstance(w_meta.shape[0], int):
            return f"{describe_linear(node)}: output width is symbolic"
        if w_meta.dtype != x_meta.dtype:
            return f"{describe_linear(node)}: weight is {w_meta.dtype} but its input is {x_meta.dtype}"
        if w_meta.dtype != tensor_meta(linear_parts(group[0])[1]).dtype:  # type: ignore[union-attr,index]
            return "the weights have different dtypes"
        if w_meta.device != x_meta.device:
            return f"{describe_linear(node)}: weight on {w_meta.device}, input on {x_meta.device}"
        if bias is not None and node_dtype(bias) != w_meta.dtype:
            return f"{describe_linear(node)}: bias is {node_dtype(bias)}, weight {w_meta.dtype}"
        for operand in (weight, bias):
            if operand is not None and position[operand] > first:
                return f"{describe_linear(node)}: its weight is computed after the first projection"
    return None


def _needs_contiguous(piece_shape: tuple[Any, ...], fused_width: int, user: Node) -> bool:
    """Whether ``user`` (a ``view``) would fail on a column slice of the fused output."""
    if user.op != "call_method" or user.target != "view":
        return False
    sizes: Any = user.args[1:]
    if len(sizes) == 1 and isinstance(sizes[0], list | tuple):
        sizes = tuple(sizes[0])
    if not all(isinstance(s, int) for s in (*sizes, *piece_shape)):
        return True  # symbolic sizes: cannot check here, so make the slice contiguous
    # A column slice keeps the fused tensor's strides.
    strides = torch.empty((*piece_shape[:-1], fused_width), device="meta").stride()
    try:
        torch.empty_strided(piece_shape, strides, device="meta").view(*sizes)
    except RuntimeError:
        return True
    return False


def _fuse(graph: Graph, group: list[Node]) -> None:
    x = linear_parts(group[0])[0]  # type: ignore[index]
    weights = [linear_parts(n)[1] for n in group]  # type: ignore[index]
    biases = [linear_parts(n)[2] for n in group]  # type: ignore[index]
    widths = [int(tensor_meta(w).shape[0]) for w in weights]  # type: ignore[union-attr]
    with graph.inserting_before(group[0]):
        weight = graph.call_function(torch.cat, (weights,), {"dim": 0})
        bias = graph.call_function(torch.cat, (biases,), {"dim": 0}) if biases[0] is not None else None
        fused = graph.call_function(torch._C._nn.linear, (x, weight, bias))
        pieces = graph.call_function(torch.split, (fused, widths), {"dim": -1})
        for new in (weight, bias, fused, pieces):
            if new is not None:
                copy_provenance(group[0], new)
        for index, linear in enumerate(group):
            piece = graph.call_function(operator.getitem, (pieces, index))
            copy_provenance(linear, piece)
            shape = node_shape(linear)
            if shape is not None and any(_needs_contiguous(shape, sum(widths), u) for u in linear.users):
                piece = graph.call_method("contiguous", (piece,))
                copy_provenance(linear, piece)
            linear.replace_all_uses_with(piece)
    for linear in group:
        graph.erase_node(linear)


def _hoist_attributes(graph: Any) -> None:
    """Move get_attr nodes (frozen parameters: Dynamo emits each before its first use) up to the
    placeholders. They read nothing, so the order is free, and every weight is then defined
    before the first projection of its group."""
    attrs = [n for n in graph.nodes if n.op == "get_attr"]
    anchor = next((n for n in graph.nodes if n.op != "placeholder"), None)
    if anchor is None:
        return
    for node in attrs:
        if node is not anchor:
            anchor.prepend(node)


def fuse_parallel_linears(gm: GraphModule, info: GraphInfo) -> GraphChange:
    """Level-1 rewrite: fuse every legal group of linears that share an input node."""
    graph = gm.graph
    _hoist_attributes(graph)
    position = {node: i for i, node in enumerate(graph.nodes)}
    groups: dict[Node, list[Node]] = {}
    linears = 0
    for node in graph.nodes:
        if is_call(node, LINEAR_FUNCTIONS) and (parts := linear_parts(node)) is not None:
            groups.setdefault(parts[0], []).append(node)
            linears += 1
    candidates = [g for g in groups.values() if len(g) >= 2]
    if not candidates:
        return GraphChange(False, "no two linear layers read the same input",
                           {"linears": linears})
    fused: list[dict[str, Any]] = []
    refused: dict[str, str] = {}
    for group in candidates:
        names = [describe_linear(n) for n in group]
        reason = _illegal(group, position)
        if reason is not None:
            refused["+".join(names)] = reason
            continue
        widths = [int(tensor_meta(linear_parts(n)[1]).shape[0]) for n in group]  # type: ignore[union-attr,index]
        _fuse(graph, group)
        fused.append({"linears": names, "out_features": widths})
    if not fused:
        return GraphChange(False, "; ".join(f"{k}: {v}" for k, v in refused.items()), {"not_fused": refused})
    details: dict[str, Any] = {
        "groups_fused": fused, "linears_before": linears,
        "linears_after": linears - sum(len(g["linears"]) - 1 for g in fused),
    }
    if refused:
        details["not_fused"] = refused
    return GraphChange(True, details=details)


@register_pass(
    "qkv_fusion",
    level=PassLevel.DYNAMO_FX,
    symptom="several small projection GEMMs on one input, each at low achieved occupancy",
    order=10,
    aliases=("qkv", "parallel_linear_fusion"),
)
def qkv_fusion(ctx: PassContext) -> PassEffect:
    """Fuse parallel linears that read one input (Q/K/V) into one GEMM plus a split."""
    return PassEffect(graph_rewrite=fuse_parallel_linears)
