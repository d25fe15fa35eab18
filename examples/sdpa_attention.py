"""One multi-head attention layer with a hand-written softmax, FP32: a workload file.

Batch 8, 512 tokens, width 512, 8 heads: LayerNorm, then separate Q/K/V linear projections
of the normalised input, manual attention (q @ k^T / sqrt(d), softmax, @ v, no mask), and an
output projection. The shared LayerNorm -> Q/K/V structure is what qkv_fusion needs, and the
manual attention is what sdpa rewrites.

Set OPROF_EXAMPLE_SMALL=1 (or call get_model_and_inputs(device, small=True)) for a batch of
2 x 16 tokens of width 32 that compiles in seconds on a CPU.
"""

from __future__ import annotations

import math
import os

import torch
from torch import nn


class ManualAttention(nn.Module):
    """LayerNorm -> separate Q/K/V projections -> softmax(QK^T/sqrt(d))V -> output projection."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.norm = nn.LayerNorm(d_model)
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        head_dim = D // self.n_heads
        h = self.norm(x)
        q = self.q_proj(h).view(B, T, self.n_heads, head_dim).transpose(1, 2)
        k = self.k_proj(h).view(B, T, self.n_heads, head_dim).transpose(1, 2)
        v = self.v_proj(h).view(B, T, self.n_heads, head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(head_dim)
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(B, T, D)
        return self.out_proj(out)


def get_model_and_inputs(device: str = "cuda", small: bool | None = None) -> tuple[nn.Module, tuple]:
    """The attention layer in eval mode and one (8, 512, 512) FP32 input on ``device``."""
    torch.manual_seed(0)
    if small if small is not None else os.environ.get("OPROF_EXAMPLE_SMALL") == "1":
        batch, seq_len, d_model, n_heads = 2, 16, 32, 4
    else:
        batch, seq_len, d_model, n_heads = 8, 512, 512, 8
    model = ManualAttention(d_model, n_heads).to(device).eval()
    x = torch.randn(batch, seq_len, d_model, device=device)
    return model, (x,)
