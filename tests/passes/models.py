"""Small models and a Dynamo-graph capture helper shared by the pass tests (all CPU)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from profiler_core.passes.contract import GraphChange, GraphInfo, GraphRewrite
from profiler_core.passes.fx_nodes import refresh_meta

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class TinyAttention(nn.Module):
    """LayerNorm -> q/k/v linears on one input -> manual (optionally causal) attention -> out proj."""

    def __init__(self, d: int = 16, heads: int = 2, causal: bool = False, t_max: int = 8) -> None:
        super().__init__()
        self.heads, self.causal = heads, causal
        self.ln = nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.register_buffer("bias", torch.tril(torch.ones(t_max, t_max)).view(1, 1, t_max, t_max))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        h = self.ln(x)
        q, k, v = (p(h).view(B, T, self.heads, C // self.heads).transpose(1, 2)
                   for p in (self.q, self.k, self.v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.heads)
        if self.causal:
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        return self.o((att @ v).transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    """Linear -> GELU -> Linear: GEMMs, no attention, no shared input."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


@dataclass
class Captured:
    """One Dynamo graph as a backend saw it: before and after an optional rewrite."""

    gm: torch.fx.GraphModule
    example: list
    info: GraphInfo
    before: str  # the graph's text before the rewrite
    change: GraphChange | None


def capture(model: nn.Module, *inputs: torch.Tensor, rewrite: GraphRewrite | None = None) -> Captured:
    """The single Dynamo graph of ``model(*inputs)`` under no_grad, with ``rewrite`` run inside the backend.

    The rewrite must run there: Dynamo drops placeholder metadata (``grapharg``) after the backend returns.
    """
    graphs: list[Captured] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        info = GraphInfo(index=0, example_inputs=tuple(example_inputs), grad_enabled=torch.is_grad_enabled(),
                         training=False, device="cpu")
        before = str(gm.graph)
        change = rewrite(gm, info) if rewrite is not None else None
        if change is not None and change.applied:
            gm.graph.lint()
            gm.recompile()
            refresh_meta(gm)
        graphs.append(Captured(gm, list(example_inputs), info, before, change))
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=backend)(*inputs)
    assert len(graphs) == 1, f"expected one Dynamo graph, got {len(graphs)}"
    return graphs[0]


def run_graph(gm: torch.fx.GraphModule, example: list) -> torch.Tensor:
    """Run a (rewritten) Dynamo graph on its example inputs; return its single output."""
    gm.recompile()
    with torch.no_grad():
        out = gm(*example)
    return out[0] if isinstance(out, tuple | list) else out


def calls(gm: torch.fx.GraphModule, *targets: object) -> list[torch.fx.Node]:
    """The call nodes of ``gm`` whose target is one of ``targets`` (functions or method names)."""
    return [n for n in gm.graph.nodes if n.op.startswith("call") and n.target in targets]
