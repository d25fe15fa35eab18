"""SDPA canonicalisation: a hand-written softmax(QK^T * scale + mask) V becomes one fused kernel.

The manual form materialises the (L x S) score matrix in memory and runs four or five kernels;
``F.scaled_dot_product_attention`` dispatches to flash / memory-efficient / cuDNN attention.
Level-1 rewrite on the Dynamo graph::

    before:  a = softmax(masked_fill(q @ k.transpose(-2, -1) / c, keep == 0, -inf), -1); y = a @ v
    after:   y = scaled_dot_product_attention(q, k, v, attn_mask=keep != 0, scale=1 / c)

Recognised: scale by ``/ c`` or ``* c`` (a constant) or none; mask by ``masked_fill(cond,
-inf)`` or by adding a float mask after scaling; dropout between softmax and the second matmul
only when inactive (eval). A mask that depends on module state alone (a tril buffer) is
evaluated once: if it is the square lower-triangular mask, the rewrite uses ``is_causal=True``
(no mask tensor, flash-eligible); like freezing, this assumes the buffer does not change after
compilation. Legal only when q, k, v share dtype and batch dimensions and
no intermediate (scores, probabilities) is used elsewhere.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx import GraphModule, Node
from torch.utils._pytree import tree_map

from profiler_core.passes.contract import GraphChange, GraphInfo, PassContext, PassEffect
from profiler_core.passes.fx_nodes import (
    DROPOUT_FUNCTIONS,
    MATMUL_FUNCTIONS,
    SOFTMAX_FUNCTIONS,
    SOFTMAX_METHODS,
    TRANSPOSE_FUNCTIONS,
    TRANSPOSE_METHODS,
    argument,
    copy_provenance,
    erase_unused,
    graph_source_name,
    is_call,
    module_attribute,
    node_dtype,
    node_shape,
    operand,
)
from profiler_core.passes.registry import PassLevel, register_pass

_ATTN_MATMUL_FUNCTIONS = MATMUL_FUNCTIONS - {torch.mm}
_ATTN_MATMUL_METHODS = frozenset({"matmul", "bmm", "__matmul__"})
_MODULE_STATE = re.compile(r"\._(parameters|buffers)\[|^L\['self'\]\.")


class _NoMatch(Exception):
    """The candidate is not (or not legally) an attention block; the message says why."""


@dataclass
class _Attention:
    out: Node
    q: Node
    k: Node
    v: Node
    scale: float
    mask: Node | None = None  # boolean keep-mask source (cond of masked_fill) or additive mask
    mask_kind: str = "none"  # "none" | "masked_fill" | "additive"
    chain: list[Node] = field(default_factory=list)  # the nodes the rewrite replaces


def _single_user(node: Node, user: Node) -> None:
    if list(node.users) != [user]:
        raise _NoMatch(f"{node.name} is also used outside the attention block")


def _last_two_swapped(node: Node, rank: int) -> Node | None:
    """k if ``node`` is k with its last two dimensions swapped, else None."""
    if is_call(node, TRANSPOSE_FUNCTIONS, TRANSPOSE_METHODS) and len(node.args) == 3:
        swapped = {d % rank for d in node.args[1:] if isinstance(d, int)}
        return operand(node, 0) if swapped == {rank - 2, rank - 1} else None
    if is_call(node, {torch.permute}, {"permute"}):
        order: Any = operand(node, 1) if len(node.args) == 2 else node.args[1:]
        expected = [*range(rank - 2), rank - 1, rank - 2]
        if isinstance(order, list | tuple) and [d % rank for d in order] == expected:
            return operand(node, 0)
    return None


def _scale(node: Node) -> tuple[Node, float]:
    """(scores node, scale) for ``scores / c``, ``scores * c``, ``c * scores`` or plain scores."""
    if is_call(node, {operator.truediv, torch.div}, {"div"}) and not node.kwargs:
        divisor = operand(node, 1)
        if isinstance(divisor, int | float) and divisor != 0:
            return operand(node, 0), 1.0 / float(divisor)
        raise _NoMatch(f"{node.name}: scores divided by a non-constant")
    if is_call(node, {operator.mul, torch.mul}, {"mul"}) and not node.kwargs:
        a, b = operand(node, 0), operand(node, 1)
        if isinstance(b, int | float):
            return a, float(b)
        if isinstance(a, int | float):
            return b, float(a)
        raise _NoMatch(f"{node.name}: scores multiplied by a non-constant")
    return node, 1.0


def match_attention(out: Node) -> _Attention | None:
    """The attention block ending at matmul ``out``; None if ``out`` ends no softmax chain."""
    if not is_call(out, _ATTN_MATMUL_FUNCTIONS, _ATTN_MATMUL_METHODS) or out.kwargs or len(out.args) != 2:
        return None
    probs, v = operand(out, 0), operand(out, 1)
    if not isinstance(probs, Node) or not isinstance(v, Node):
        return None
    chain = [out]
    if is_call(probs, DROPOUT_FUNCTIONS, {"dropout"}):
        rate, training = argument(probs, 1, "p", 0.5), argument(probs, 2, "training", True)
        if training and rate:
            raise _NoMatch(f"{probs.name}: attention dropout is active (train mode)")
        _single_user(probs, out)
        chain.append(probs)
        probs_in = operand(probs, 0)
        out_user, probs = probs, probs_in
    else:
        out_user = out
    if not is_call(probs, SOFTMAX_FUNCTIONS, SOFTMAX_METHODS):
        return None
    rank = len(node_shape(probs) or ())
    dim = argument(probs, 1, "dim")
    if probs.kwargs.get("dtype") is not None or len(probs.args) > 3:
        raise _NoMatch(f"{probs.name}: softmax with a dtype argument")
    if not isinstance(dim, int) or rank < 3 or dim % rank != rank - 1:
        raise _NoMatch(f"{probs.name}: softmax is not over the last dimension of a >=3-D tensor")
    _single_user(probs, out_user)
    chain.append(probs)
    scores = operand(probs, 0)
    mask, mask_kind = None, "none"
    if is_call(scores, {torch.masked_fill}, {"masked_fill"}):
        fill = argument(scores, 2, "value")
        if not (isinstance(fill, float) and math.isinf(fill) and fill < 0):
            raise _NoMatch(f"{scores.name}: mask fill value {fill!r} is not -inf")
        _single_user(scores, probs)
        chain.append(scores)
        mask, mask_kind, user = argument(scores, 1, "mask"), "masked_fill", scores
        scores = operand(scores, 0)
    elif is_call(scores, {operator.add, torch.add}, {"add"}) and not scores.kwargs:
        _single_user(scores, probs)
        chain.append(scores)
        user = scores
        a, b = operand(scores, 0), operand(scores, 1)
        scores, mask = (a, b) if _ends_in_matmul(a) else (b, a)
        mask_kind = "additive"
        if node_shape(user) != node_shape(scores):
            raise _NoMatch(f"{user.name}: the additive mask broadcasts the scores to a larger shape")
    else:
        user = probs
    raw, scale = _scale(scores)
    if raw is not scores:
        _single_user(scores, user)
        chain.append(scores)
        user = scores
    if not is_call(raw, _ATTN_MATMUL_FUNCTIONS, _ATTN_MATMUL_METHODS) or len(raw.args) != 2:
        raise _NoMatch(f"{raw.name}: the softmax input is not a (scaled, masked) q @ k^T")
    _single_user(raw, user)
    chain.append(raw)
    q, k_t = operand(raw, 0), operand(raw, 1)
    k = _last_two_swapped(k_t, rank) if isinstance(k_t, Node) else None
    if k is None or not isinstance(q, Node):
        raise _NoMatch(f"{raw.name}: second operand is not k with its last two dimensions swapped")
    chain.append(k_t)
    _check_operands(q, k, v, mask, mask_kind)
    return _Attention(out=out, q=q, k=k, v=v, scale=scale, mask=mask, mask_kind=mask_kind, chain=chain)


def _ends_in_matmul(node: Any) -> bool:
    if not isinstance(node, Node):
        return False
    raw, _ = _scale(node) if is_call(node, {operator.truediv, torch.div, operator.mul, torch.mul},
                                      {"div", "mul"}) else (node, 1.0)
    return is_call(raw, _ATTN_MATMUL_FUNCTIONS, _ATTN_MATMUL_METHODS)


def _check_operands(q: Node, k: Node, v: Node, mask: Any, mask_kind: str) -> None:
    qs, ks, vs = (node_shape(n) for n in (q, k, v))
    if qs is None or ks is None or vs is None:
        raise _NoMatch("q, k or v has no recorded shape")
    if not len(qs) == len(ks) == len(vs) or len(qs) < 3:
        raise _NoMatch(f"q, k, v ranks differ or are below 3: {len(qs)}, {len(ks)}, {len(vs)}")
    if not qs[:-2] == ks[:-2] == vs[:-2]:
        raise _NoMatch(f"q, k, v batch dimensions differ: {qs[:-2]}, {ks[:-2]}, {vs[:-2]}")
    if qs[-1] != ks[-1] or ks[-2] != vs[-2]:
        raise _NoMatch(f"q/k head dims or k/v lengths differ: q {qs}, k {ks}, v {vs}")
    dtypes = {node_dtype(n) for n in (q, k, v)}
    if len(dtypes) != 1 or not next(iter(dtypes)).is_floating_point:  # type: ignore[union-attr]
        raise _NoMatch(f"q, k, v dtypes differ or are not floating point: {dtypes}")
    if mask_kind == "masked_fill" and node_dtype(mask) != torch.bool:
        raise _NoMatch("masked_fill condition is not a bool tensor")
    if mask_kind == "additive" and node_dtype(mask) not in dtypes:
        raise _NoMatch(f"additive mask is {node_dtype(mask)}, q is {next(iter(dtypes))}")


def _is_causal_keep(block: _Attention, gm: GraphModule, info: GraphInfo) -> bool:
    """Whether the masked_fill condition is a constant that leaves exactly the lower triangle."""
    shape_q, shape_k = node_shape(block.q), node_shape(block.k)
    if block.mask_kind != "masked_fill" or shape_q is None or shape_k is None:
        return False
    length, source = shape_q[-2], shape_k[-2]
    if not isinstance(length, int) or not isinstance(source, int) or length != source:
        return False
    try:
        with torch.no_grad():
            dropped = _constant(block.mask, gm, info.placeholder_values(gm), {})  # type: ignore[arg-type]
        keep = torch.broadcast_to(~dropped.bool(), (*dropped.shape[:-2], length, source))
    except (_NoMatch, RuntimeError, TypeError, ValueError, IndexError):
        return False
    expected = torch.ones(length, source, dtype=torch.bool, device=keep.device).tril()
    return all(torch.equal(m, expected) for m in keep.reshape(-1, length, source))


def _constant(node: Node, gm: GraphModule, values: dict[Node, Any], memo: dict[Node, Any]) -> Any:
    """The value of ``node`` if it depends on module state and constants only; _NoMatch otherwise."""
    if node in memo:
        return memo[node]
    if node.op == "get_attr":
        value: Any = module_attribute(gm, str(node.target))
    elif node.op == "placeholder":
        source = graph_source_name(node) or ""
        value = values.get(node)
        if not (isinstance(value, torch.nn.Parameter) or _MODULE_STATE.search(source)):
            raise _NoMatch(f"{node.name} is a model input")
        if not isinstance(value, torch.Tensor):
            raise _NoMatch(f"{node.name} is not a tensor")
    elif node.op in ("call_function", "call_method"):
        def resolve(arg: Any) -> Any:
            return _constant(arg, gm, values, memo) if isinstance(arg, Node) else arg

        args = tree_map(resolve, node.args)
        kwargs = tree_map(resolve, dict(node.kwargs))
        if node.op == "call_function":
            value = node.target(*args, **kwargs)  # type: ignore[operator]
        else:
            value = getattr(args[0], str(node.target))(*args[1:], **kwargs)
    else:
        raise _NoMatch(f"{node.name}: cannot evaluate a {node.op} node")
    memo[node] = value
    return value


def _rewrite(block: _Attention, gm: GraphModule, causal: bool) -> None:
    graph = gm.graph
    with graph.inserting_before(block.out):
        attn_mask = None
        if block.mask_kind == "masked_fill" and not causal:
            attn_mask = graph.call_function(torch.logical_not, (block.mask,))
            copy_provenance(block.out, attn_mask)
        elif block.mask_kind == "additive":
            attn_mask = block.mask
        fused = graph.call_function(
            F.scaled_dot_product_attention, (block.q, block.k, block.v),
            {"attn_mask": attn_mask, "dropout_p": 0.0, "is_causal": causal, "scale": block.scale},
        )
    copy_provenance(block.out, fused)
    block.out.replace_all_uses_with(fused)
    dead = list(block.chain)
    if causal and isinstance(block.mask, Node):
        dead.append(block.mask)
        dead.extend(_ancestors(block.mask))
    erase_unused(dead)


def _ancestors(node: Node) -> list[Node]:
    seen: list[Node] = []
    stack = list(node.all_input_nodes)
    while stack:
        parent = stack.pop()
        if parent not in seen and parent.op in ("call_function", "call_method", "get_attr"):
            seen.append(parent)
            stack.extend(parent.all_input_nodes)
    return seen


def canonicalize_attention(gm: GraphModule, info: GraphInfo) -> GraphChange:
    """Level-1 rewrite: replace every legal manual attention block with scaled_dot_product_attention."""
    blocks: list[dict[str, Any]] = []
    refused: dict[str, str] = {}
    for node in list(gm.graph.nodes):
        if getattr(node, "_erased", False):
            continue  # removed by an earlier rewrite in this loop
        try:
            block = match_attention(node)
        except _NoMatch as why:
            refused[node.name] = str(why)
            continue
        if block is None:
            continue
        causal = _is_causal_keep(block, gm, info)
        _rewrite(block, gm, causal)
        blocks.append({"output": node.name, "scale": block.scale,
                       "mask": "causal" if causal else block.mask_kind})
    if not blocks:
        if refused:
            return GraphChange(False, "; ".join(f"{k}: {v}" for k, v in refused.items()),
                               {"not_rewritten": refused})
        return GraphChange(False, "no softmax(q @ k^T) @ v pattern in the graph")
    details: dict[str, Any] = {
        "attention_blocks": len(blocks), "causal": sum(b["mask"] == "causal" for b in blocks),
        "blocks": blocks,
    }
    if refused:
        details["not_rewritten"] = refused
    return GraphChange(True, details=details)


@register_pass(
    "sdpa",
    level=PassLevel.DYNAMO_FX,
    symptom="attention as separate matmul / softmax / matmul kernels with an L x S score matrix in DRAM",
    order=20,
    aliases=("sdpa_canonicalization", "scaled_dot_product_attention"),
)
def sdpa(ctx: PassContext) -> PassEffect:
    """Replace manual softmax(QK^T/sqrt(d))V with F.scaled_dot_product_attention."""
    return PassEffect(graph_rewrite=canonicalize_attention)
