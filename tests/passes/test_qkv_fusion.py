"""qkv_fusion: parallel linears on one input become one GEMM + split; illegal groups are left alone."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.nn.functional as F
from torch import fx, nn

from profiler_core.passes.contract import GraphInfo
from profiler_core.passes.fx_nodes import LINEAR_FUNCTIONS
from profiler_core.passes.qkv_fusion import fuse_parallel_linears
from tests.passes.models import TinyAttention, calls, capture, run_graph


def _linears(gm: fx.GraphModule) -> list[fx.Node]:
    return calls(gm, *LINEAR_FUNCTIONS)


def test_fuses_qkv_into_one_gemm_and_keeps_outputs() -> None:
    torch.manual_seed(0)
    model, x = TinyAttention().eval(), torch.randn(2, 8, 16)
    expected = model(x)
    got = capture(model, x, rewrite=fuse_parallel_linears)
    assert got.before.count("torch._C._nn.linear") == 4
    assert got.change is not None and got.change.applied
    assert got.change.details["groups_fused"] == [{"linears": ["q", "k", "v"], "out_features": [16, 16, 16]}]
    assert (got.change.details["linears_before"], got.change.details["linears_after"]) == (4, 2)
    assert len(_linears(got.gm)) == 2  # fused q/k/v + the output projection
    assert len(calls(got.gm, torch.cat)) == 2  # weights and biases
    (split,) = calls(got.gm, torch.split)
    assert split.args[1] == [16, 16, 16]
    assert len([u for u in split.users if u.target is operator.getitem]) == 3
    torch.testing.assert_close(run_graph(got.gm, got.example), expected)


class _DifferentInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q, self.k = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.q(x) * self.k(y)


class _MixedBias(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q, self.k = nn.Linear(8, 8), nn.Linear(8, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.q(x) + self.k(x)


@pytest.mark.parametrize(
    ("model", "inputs", "reason"),
    [
        (_DifferentInputs(), (torch.randn(2, 8), torch.randn(2, 8)),
         "no two linear layers read the same input"),
        (_MixedBias(), (torch.randn(2, 8),), "q have a bias and k do not"),
    ],
    ids=["different-inputs", "mixed-bias"],
)
def test_not_applied_when_illegal(model: nn.Module, inputs: tuple, reason: str) -> None:
    got = capture(model.eval(), *inputs, rewrite=fuse_parallel_linears)
    assert got.change is not None and not got.change.applied
    assert reason in got.change.reason
    assert str(got.gm.graph) == got.before  # untouched


def test_not_applied_when_weight_dtypes_differ() -> None:
    # Hand-built graph (meta tensors stand in for Dynamo's fake values): one input, fp32 and bf16 weights.
    graph = fx.Graph()
    x = graph.placeholder("x")
    x.meta["example_value"] = torch.empty(2, 8, device="meta")
    outs = []
    for name, dtype in (("wq", torch.float32), ("wk", torch.bfloat16)):
        w = graph.placeholder(name)
        w.meta["example_value"] = torch.empty(8, 8, dtype=dtype, device="meta")
        outs.append(graph.call_function(F.linear, (x, w)))
    graph.output(tuple(outs))
    gm = fx.GraphModule(torch.nn.Module(), graph)
    change = fuse_parallel_linears(gm, GraphInfo(0, (), False, False, "cpu"))
    assert not change.applied
    assert "linear_1: weight is torch.bfloat16 but its input is torch.float32" in change.reason


class _FlatViews(nn.Module):
    """Projections reshaped with view() across the column dimension: a column slice cannot do that."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B = x.shape[0]
        return self.q(x).view(B, -1) @ self.k(x).view(B, -1).t()


def test_fused_slices_made_contiguous_where_a_view_needs_it() -> None:
    torch.manual_seed(0)
    model, x = _FlatViews().eval(), torch.randn(2, 3, 8)
    expected = model(x)
    got = capture(model, x, rewrite=fuse_parallel_linears)
    assert got.change is not None and got.change.applied
    assert len(calls(got.gm, "contiguous")) == 2
    torch.testing.assert_close(run_graph(got.gm, got.example), expected)
