"""BF16 promotion: run float32 GEMM-family operators in bfloat16 on tensor cores, keep fp32 elsewhere.

Each float32 ``linear / matmul / mm / bmm / addmm / baddbmm / scaled_dot_product_attention``
and convolution (``conv1d/2d/3d`` and their transposes: cuDNN's tensor-core kernels) gets
its float inputs cast to bf16 and its output cast back to fp32, so every other operator
(LayerNorm, BatchNorm, softmax, residual adds) still sees fp32. In a training step this is
an autocast-style plan: the parameters (the optimizer's master weights) stay float32, and
their gradients come back through the casts in float32. Casts between back-to-back GEMMs then
cancel (see cast_cancellation), at Level 1 across layout-only ops and at Level 2 on the ATen
graph::

    before:  y = linear(x, w, b)
    after:   y = linear(x.to(bf16), w.to(bf16), b.to(bf16)).to(f32)

Outer products (matmuls with a reduction of length 1) stay float32: nothing for the Tensor
Cores, and bf16 would round every product. GEMMs inside a region the model runs with autocast
disabled (``with torch.autocast(..., enabled=False)``) stay float32, as autocast leaves them:
the model's authors marked them
precision-sensitive. Rotary position embeddings are the common case: ``transformers``
computes the angles ``inv_freq @ positions`` so, and in bf16 an angle of 255 rad is off by
up to 0.54 rad, which turns every key and query past the first few positions.

Weight casts run every call unless the ``freezing`` pass folds them into constants.
Accumulation stays fp32 (cuBLAS and Inductor accumulate bf16 GEMMs in fp32); validation uses
the bfloat16 tolerance.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.fx import GraphModule, Node

from profiler_core.passes.cast_cancellation import CastCancellation, cancel_round_trips, dynamo_cast_dtype
from profiler_core.passes.contract import GraphChange, GraphInfo, PassContext, PassEffect
from profiler_core.passes.fx_nodes import (
    ADDMM_FUNCTIONS,
    ADDMM_METHODS,
    CONV_FUNCTIONS,
    LINEAR_FUNCTIONS,
    MATMUL_FUNCTIONS,
    MATMUL_METHODS,
    SDPA_FUNCTIONS,
    copy_provenance,
    is_call,
    node_dtype,
    node_shape,
    op_label,
    refresh_meta,
)
from profiler_core.passes.registry import PassLevel, register_pass

GEMM_FUNCTIONS = LINEAR_FUNCTIONS | MATMUL_FUNCTIONS | ADDMM_FUNCTIONS | SDPA_FUNCTIONS | CONV_FUNCTIONS
GEMM_METHODS = MATMUL_METHODS | ADDMM_METHODS
# A matmul whose reduction is this short is an outer product: memory-bound, nothing for the Tensor
# Cores, so it stays float32 (bf16 would only round every product). ``transformers``
# computes rotary angles as ``inv_freq (d/2, 1) @ positions (1, seq)``; at position 4095 bf16's
# 8-bit mantissa is off by up to 8 rad, and transformers 5's ``maybe_autocast(enabled=False)``
# leaves no autocast block in the graph to say so.
OUTER_PRODUCT_MAX_K = 1


DtypeOf = Callable[[Node], "torch.dtype | None"]

_ENTER_AUTOCAST = "_enter_autocast"
_EXIT_AUTOCAST = "_exit_autocast"


def _autocast_call(node: Node) -> str | None:
    """``_enter_autocast`` / ``_exit_autocast`` for dynamo's trace of a ``torch.autocast`` block, else None."""
    if node.op != "call_function":
        return None
    name = getattr(node.target, "__name__", "")
    return name if name in (_ENTER_AUTOCAST, _EXIT_AUTOCAST) else None


def _autocast_disabled(node: Node) -> bool:
    """True for an ``_enter_autocast(device, dtype, enabled, cache)`` that turns autocast off."""
    enabled = node.args[2] if len(node.args) > 2 else node.kwargs.get("enabled", True)
    return enabled is False


def _tensor_operands(node: Node, dtype_of: DtypeOf) -> list[tuple[int | str, Node]]:
    """(position or keyword, node) for every tensor operand of a GEMM call."""
    operands: list[tuple[int | str, Node]] = []
    for index, value in enumerate(node.args):
        if isinstance(value, Node) and dtype_of(value) is not None:
            operands.append((index, value))
    for key, value in node.kwargs.items():
        if isinstance(value, Node) and dtype_of(value) is not None:
            operands.append((key, value))
    return operands


def _inner_dim(node: Node) -> int | None:
    """The reduction length K of a ``matmul / mm / bmm / @`` call, where its first operand's shape is known."""
    if not is_call(node, MATMUL_FUNCTIONS, MATMUL_METHODS) or not node.args:
        return None
    shape = node_shape(node.args[0])
    if not shape or len(shape) < 2:
        return None  # a vector operand: a dot product or a matrix-vector product, left to the rule above
    k = shape[-1]
    return k if isinstance(k, int) else None


def _promotable(node: Node, dtype_of: DtypeOf) -> str | None:
    """None if ``node`` may run in bf16, else why not."""
    if dtype_of(node) != torch.float32:
        return f"output is {dtype_of(node)}, not float32"
    k = _inner_dim(node)
    if k is not None and k <= OUTER_PRODUCT_MAX_K:
        return (f"an outer product (inner dimension {k}): no tensor-core work to gain, and bf16 would round "
                "every product (rotary angles inv_freq @ positions are one)")
    for _, operand in _tensor_operands(node, dtype_of):
        dtype = dtype_of(operand)
        if dtype == torch.bool:
            continue  # an attention mask: dtype-free
        if dtype != torch.float32:
            return f"an operand is {dtype}, not float32"
    return None


def promote_gemms(gm: GraphModule, info: GraphInfo) -> GraphChange:
    """Level-1 rewrite: cast float32 GEMM operands to bf16 and results back, then cancel round trips."""
    graph = gm.graph
    promoted: Counter[str] = Counter()
    skipped: dict[str, str] = {}
    inserted = 0
    casts: dict[Node, Node] = {}  # one bf16 copy per source value, shared by its GEMM users
    # Nodes made here have no fake tensor until the graph is re-propagated: track their dtype.
    made: dict[Node, torch.dtype] = {}

    def dtype_of(node: Node) -> torch.dtype | None:
        return made.get(node) or node_dtype(node)

    regions: dict[Node, bool] = {}  # open autocast blocks: enter node -> disabled
    for node in list(graph.nodes):
        marker = _autocast_call(node)
        if marker == _ENTER_AUTOCAST:
            regions[node] = _autocast_disabled(node)
        elif marker == _EXIT_AUTOCAST and node.args and isinstance(node.args[0], Node):
            regions.pop(node.args[0], None)
        if not is_call(node, GEMM_FUNCTIONS, GEMM_METHODS):
            continue
        label = op_label(node) or "gemm"
        innermost_disabled = next(reversed(regions.values()), False)
        reason = ("inside a torch.autocast(enabled=False) block: the model keeps it float32"
                  if innermost_disabled else _promotable(node, dtype_of))
        if reason is not None:
            skipped[f"{node.name} ({label})"] = reason
            continue
        for position, operand in _tensor_operands(node, dtype_of):
            if dtype_of(operand) != torch.float32:
                continue
            cast = casts.get(operand)
            if cast is None:
                with graph.inserting_before(node):
                    cast = graph.call_method("to", (operand, torch.bfloat16))
                copy_provenance(node, cast)
                casts[operand] = cast
                made[cast] = torch.bfloat16
                inserted += 1
            if isinstance(position, int):
                node.update_arg(position, cast)
            else:
                node.update_kwarg(position, cast)
        with graph.inserting_after(node):
            back = graph.call_method("to", (node, torch.float32))
        copy_provenance(node, back)
        made[back] = torch.float32
        node.replace_all_uses_with(back, delete_user_cb=lambda user, back=back: user is not back)
        inserted += 1
        promoted[label] += 1
    if not promoted:
        reason = ("no GEMM-family operator (linear, matmul, mm, bmm, addmm, baddbmm, "
                  "scaled_dot_product_attention, convolution) in the graph")
        if skipped:
            reason = "no float32 GEMM: " + "; ".join(f"{k}: {v}" for k, v in sorted(skipped.items()))
        return GraphChange(False, reason)
    gm.recompile()
    kept = refresh_meta(gm)
    cancelled = cancel_round_trips(graph, dynamo_cast_dtype, through_layout=True)
    details: dict[str, Any] = {
        "gemms_promoted": dict(promoted), "casts_inserted": inserted, "casts_cancelled": cancelled,
    }
    if skipped:
        details["gemms_skipped"] = skipped
    if kept:
        details["recorded_values_kept"] = kept  # ops fake tensors cannot run (e.g. a traced cuDNN LSTM)
    return GraphChange(True, details=details)


def bf16_applicable(ctx: PassContext) -> str | None:
    """A model already in 16-bit floats has no float32 GEMM left to promote."""
    params = [p for p in getattr(ctx.model, "parameters", lambda: [])() if p.is_floating_point()]
    if params and all(p.dtype in (torch.bfloat16, torch.float16) for p in params):
        return f"every floating parameter is already {params[0].dtype}: the precision change is in place"
    if ctx.on_cuda and not torch.cuda.is_bf16_supported():
        return f"{torch.cuda.get_device_name(ctx.device)} has no bfloat16 tensor cores; try 'tf32'"
    return None


@register_pass(
    "bf16_promotion",
    level=PassLevel.DYNAMO_FX,
    symptom="float32 GEMMs or convolutions dominate kernel time with little tensor-core activity",
    order=90,  # after the rewrites that create GEMMs (qkv_fusion, sdpa), so those get promoted too
    aliases=("bf16", "bfloat16"),
    applicable=bf16_applicable,
    # what autocast + compile(reduce-overhead) combines (for a training step, over the whole step),
    # and the layout bf16 convolutions want
    suggests=("cuda_graphs", "whole_step_cuda_graphs", "channels_last"),
)
def bf16_promotion(ctx: PassContext) -> PassEffect:
    """Run float32 GEMM-family operators in bfloat16 (fp32 accumulate), cancelling round-trip casts."""
    if ctx.on_cuda and not torch.cuda.is_bf16_supported():
        return PassEffect.not_applied(
            f"{torch.cuda.get_device_name(ctx.device)} has no bfloat16 tensor cores; try 'tf32'")
    return PassEffect(
        graph_rewrite=promote_gemms,
        post_grad_passes=(CastCancellation(),),
        compute_precision="bfloat16",
        details={"weight_casts": "per call unless 'freezing' folds them"},
    )
