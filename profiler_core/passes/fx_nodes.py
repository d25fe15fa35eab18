"""FX node vocabulary shared by the Level-1 rewrites: which targets mean what, and node metadata.

A Dynamo graph spells one operation several ways (``operator.matmul``, ``torch.matmul``,
``x.matmul``); the sets here name them once. Metadata comes from Dynamo's fake tensors
(``node.meta["example_value"]``), refreshed after each rewrite so the next rewrite, and
Inductor's own pre-grad passes, see correct shapes and dtypes.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx import GraphModule, Node

LINEAR_FUNCTIONS = frozenset({torch._C._nn.linear, F.linear})
MATMUL_FUNCTIONS = frozenset({operator.matmul, torch.matmul, torch.mm, torch.bmm})
MATMUL_METHODS = frozenset({"matmul", "mm", "bmm", "__matmul__"})
ADDMM_FUNCTIONS = frozenset({torch.addmm, torch.baddbmm})
ADDMM_METHODS = frozenset({"addmm", "baddbmm"})
SDPA_FUNCTIONS = frozenset({F.scaled_dot_product_attention})
CONV_FUNCTIONS = frozenset({torch.conv1d, torch.conv2d, torch.conv3d, torch.conv_transpose1d,
                            torch.conv_transpose2d, torch.conv_transpose3d})  # F.conv2d is torch.conv2d
SOFTMAX_FUNCTIONS = frozenset({F.softmax, torch.softmax, torch.Tensor.softmax})
SOFTMAX_METHODS = frozenset({"softmax"})
DROPOUT_FUNCTIONS = frozenset({F.dropout, torch.dropout})
TRANSPOSE_FUNCTIONS = frozenset({torch.transpose, torch.swapaxes})
TRANSPOSE_METHODS = frozenset({"transpose", "swapaxes"})

# Ops that only move or reinterpret elements: they give the same values whatever the dtype,
# so a cast may be moved across them. A cast pair separated only by these cancels.
LAYOUT_FUNCTIONS = frozenset({
    torch.reshape, torch.transpose, torch.permute, torch.flatten, torch.squeeze, torch.unsqueeze,
    torch.split, torch.chunk, torch.narrow, torch.t, torch.swapaxes, torch.unflatten,
    operator.getitem,
})
LAYOUT_METHODS = frozenset({
    "view", "reshape", "transpose", "permute", "contiguous", "flatten", "unflatten", "squeeze",
    "unsqueeze", "expand", "split", "chunk", "t", "narrow", "swapaxes",
})

# Node metadata worth carrying to a replacement node: it is how Inductor's provenance, and so
# the profiler's attribution, names the source line and module of a fused kernel.
_PROVENANCE_KEYS = ("stack_trace", "nn_module_stack")


def is_call(node: Any, functions: Iterable[Any] = (), methods: Iterable[str] = ()) -> bool:
    """Whether ``node`` calls one of ``functions`` or one of the Tensor ``methods``."""
    if not isinstance(node, Node):
        return False
    if node.op == "call_function":
        return node.target in functions
    if node.op == "call_method":
        return isinstance(node.target, str) and node.target in set(methods)
    return False


def is_layout(node: Any) -> bool:
    """Whether ``node`` only moves elements (view, transpose, split, getitem, ...)."""
    return is_call(node, LAYOUT_FUNCTIONS, LAYOUT_METHODS)


def operand(node: Node, index: int) -> Any:
    """Positional argument ``index`` of a call node (typed Any: FX's Argument union is too wide to use)."""
    return node.args[index]


def argument(node: Node, index: int, name: str, default: Any = None) -> Any:
    """Argument ``name`` of a call node, given positionally at ``index`` or by keyword."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def tensor_meta(node: Any) -> torch.Tensor | None:
    """The fake tensor Dynamo recorded for ``node`` (None for non-tensors and non-nodes)."""
    if not isinstance(node, Node):
        return None
    value = node.meta.get("example_value", node.meta.get("val"))
    return value if isinstance(value, torch.Tensor) else None


def node_dtype(node: Any) -> torch.dtype | None:
    """dtype of the tensor ``node`` produces, if known."""
    meta = tensor_meta(node)
    return meta.dtype if meta is not None else None


def node_shape(node: Any) -> tuple[Any, ...] | None:
    """Shape of the tensor ``node`` produces, if known (entries may be SymInts)."""
    meta = tensor_meta(node)
    return tuple(meta.shape) if meta is not None else None


def graph_source_name(node: Node) -> str | None:
    """Dynamo's name for where a graph input came from (``L['self']._modules['q']._parameters['weight']``)."""
    grapharg = node.meta.get("grapharg")
    name = getattr(getattr(grapharg, "source", None), "name", None)
    if callable(name):  # older Dynamo: Source.name() is a method
        name = name()
    return name if isinstance(name, str) else None


_MISSING: Any = object()


def module_attribute(gm: torch.nn.Module, target: str, default: Any = _MISSING) -> Any:
    """The attribute a dotted ``get_attr`` target names; ``default`` if missing (AttributeError without one)."""
    value: Any = gm
    for part in target.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            if default is _MISSING:
                raise
            return default
    return value


def copy_provenance(source: Node, target: Node) -> None:
    """Give ``target`` the source location and module path of ``source``."""
    for key in _PROVENANCE_KEYS:
        if key in source.meta:
            target.meta[key] = source.meta[key]


def op_label(node: Node) -> str | None:
    """A short name for what a call node does (``linear``, ``Tensor.view``); None otherwise."""
    if node.op == "call_function":
        target = node.target
        if isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
            return str(target)
        return getattr(target, "__name__", str(target))
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.op == "call_module":
        return f"module:{node.target}"
    return None


def op_histogram(gm: GraphModule) -> Counter[str]:
    """How many call nodes of each kind the graph holds."""
    counts: Counter[str] = Counter()
    for node in gm.graph.nodes:
        label = op_label(node)
        if label is not None:
            counts[label] += 1
    return counts


def call_node_count(gm: GraphModule) -> int:
    """Number of call nodes (the graph's operations, without placeholders and output)."""
    return sum(1 for n in gm.graph.nodes if n.op.startswith("call_"))


def erase_unused(nodes: Iterable[Node]) -> int:
    """Erase those of ``nodes`` left without users (repeatedly, newest first); return the count."""
    pending = list(nodes)
    erased = 0
    changed = True
    while changed:
        changed = False
        for node in reversed(pending):
            if node.graph is not None and not node.users and node in node.graph.nodes:
                node.graph.erase_node(node)
                pending.remove(node)
                erased += 1
                changed = True
    return erased


def refresh_meta(gm: GraphModule) -> list[str]:
    """Recompute every node's fake tensor after a rewrite, from the placeholders' fake inputs.

    Some operators cannot run on fake tensors although Dynamo recorded them (a traced
    ``torch.lstm`` on CUDA reaches cuDNN, which asks for a data pointer). Such a node keeps the
    value Dynamo recorded, which a rewrite made elsewhere does not change; the names of the nodes
    kept that way are returned. A node with no recorded value still fails.
    """
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    values = [n.meta.get("example_value", n.meta.get("val")) for n in placeholders]
    fake_mode = next((getattr(v, "fake_mode", None) for v in values if hasattr(v, "fake_mode")), None)
    if fake_mode is None:
        return []  # not a Dynamo graph: nothing recorded to keep current
    kept: list[str] = []

    class _KeepRecorded(FakeTensorProp):
        def get_attr(self, target: Any, args: Any, kwargs: Any) -> Any:
            value = super().get_attr(target, args, kwargs)  # a frozen parameter is a real tensor
            if isinstance(value, torch.Tensor) and not isinstance(value, FakeTensor):
                return self._mode.from_tensor(value, static_shapes=True)
            return value

        def run_node(self, n: Node) -> Any:
            try:
                return super().run_node(n)
            except Exception:
                recorded = n.meta.get("example_value", n.meta.get("val"))
                if recorded is None:
                    raise
                n.meta["val"] = recorded
                kept.append(n.name)
                return recorded

    _KeepRecorded(gm, fake_mode).propagate_dont_convert_inputs(*values)
    for node in gm.graph.nodes:
        if node.op != "placeholder" and "val" in node.meta:
            node.meta["example_value"] = node.meta["val"]
    return kept
