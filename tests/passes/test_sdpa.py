"""sdpa: manual softmax(QK^T * scale + mask) V becomes scaled_dot_product_attention; other shapes are left."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from profiler_core.passes.sdpa import canonicalize_attention
from tests.passes.models import MLP, TinyAttention, calls, capture, run_graph

SDPA = F.scaled_dot_product_attention
SOFTMAX = (F.softmax, torch.softmax, "softmax")


@pytest.mark.parametrize(("causal", "mask"), [(False, "none"), (True, "causal")], ids=["unmasked", "causal"])
def test_rewrites_manual_attention(causal: bool, mask: str) -> None:
    torch.manual_seed(0)
    model, x = TinyAttention(causal=causal).eval(), torch.randn(2, 8, 16)
    expected = model(x)
    got = capture(model, x, rewrite=canonicalize_attention)
    assert got.change is not None and got.change.applied
    assert got.change.details["blocks"] == [{"output": "matmul_1", "scale": 1 / math.sqrt(8), "mask": mask}]
    (fused,) = calls(got.gm, SDPA)
    assert fused.kwargs["is_causal"] is causal
    assert fused.kwargs["attn_mask"] is None  # causal: the tril buffer became is_causal=True
    assert not calls(got.gm, *SOFTMAX) and not calls(got.gm, "masked_fill")
    torch.testing.assert_close(run_graph(got.gm, got.example), expected)


class _Masked(nn.Module):
    """q, k, v given; scaled by multiplication; masked by a buffer (not causal) or by an additive input."""

    def __init__(self, additive: bool) -> None:
        super().__init__()
        self.additive = additive
        keep = torch.rand(1, 1, 6, 6) > 0.3
        keep[..., 0] = True  # every row keeps at least one key
        self.register_buffer("keep", keep)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        scores = q @ k.transpose(-1, -2) * 0.25
        scores = scores + bias if self.additive else scores.masked_fill(~self.keep, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v


@pytest.mark.parametrize("additive", [False, True], ids=["bool-buffer-mask", "additive-input-mask"])
def test_explicit_masks_are_passed_as_attn_mask(additive: bool) -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 6, 4) for _ in range(3))
    bias = torch.randn(2, 3, 6, 6)
    model = _Masked(additive).eval()
    expected = model(q, k, v, bias)
    got = capture(model, q, k, v, bias, rewrite=canonicalize_attention)
    assert got.change is not None and got.change.applied
    (fused,) = calls(got.gm, SDPA)
    assert fused.kwargs["scale"] == 0.25 and fused.kwargs["is_causal"] is False
    mask = fused.kwargs["attn_mask"]
    assert mask is not None
    assert (mask.op == "placeholder") if additive else (mask.target is torch.logical_not)
    assert got.change.details["blocks"][0]["mask"] == ("additive" if additive else "masked_fill")
    torch.testing.assert_close(run_graph(got.gm, got.example), expected)


class _ReturnsProbs(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        probs = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
        return probs @ v, probs


class _FiniteFill(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = (q @ k.transpose(-2, -1)).masked_fill(q[..., :1] > 0, -1e9)
        return torch.softmax(scores, dim=-1) @ v


class _SoftmaxOverQueries(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.transpose(-2, -1), dim=-2) @ v


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        (MLP(4), "no softmax(q @ k^T) @ v pattern in the graph"),
        (_ReturnsProbs(), "is also used outside the attention block"),
        (_FiniteFill(), "mask fill value -1000000000.0 is not -inf"),
        (_SoftmaxOverQueries(), "softmax is not over the last dimension"),
    ],
    ids=["no-attention", "probs-returned", "finite-fill", "softmax-dim"],
)
def test_not_applied(model: nn.Module, reason: str) -> None:
    q, k, v = (torch.randn(2, 3, 6, 4) for _ in range(3))
    inputs = (q,) if isinstance(model, MLP) else (q, k, v)
    got = capture(model.eval(), *inputs, rewrite=canonicalize_attention)
    assert got.change is not None and not got.change.applied
    assert reason in got.change.reason
    assert str(got.gm.graph) == got.before
