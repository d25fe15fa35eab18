"""GPT-2 small (124M), written from scratch in plain PyTorch, random init, FP32: a workload file.

12 layers, d_model 768, 12 heads, vocabulary 50257, 1024 positions; batch 4 x 128 tokens of
random ids; returns the logits. Attention is written by hand (q @ k^T / sqrt(d), causal
masked_fill with a tril buffer, softmax, @ v) with separate q/k/v projections, as many model
files do, so the qkv_fusion, sdpa and bf16_promotion passes have something to change.

Set OPROF_EXAMPLE_SMALL=1 (or call get_model_and_inputs(device, small=True)) for a 2-layer,
d=64 configuration that builds and compiles in seconds on a CPU.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class GPT2Config:
    """Model and batch sizes."""

    n_layer: int = 12
    n_embd: int = 768
    n_head: int = 12
    vocab_size: int = 50257
    n_positions: int = 1024
    dropout: float = 0.1
    batch: int = 4
    seq_len: int = 128


SMALL = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=64, batch=2, seq_len=16)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with separate q/k/v projections and a manual softmax."""

    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.q_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.k_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.v_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.attn_dropout = nn.Dropout(cfg.dropout)
        self.resid_dropout = nn.Dropout(cfg.dropout)
        mask = torch.tril(torch.ones(cfg.n_positions, cfg.n_positions))
        self.register_buffer("bias", mask.view(1, 1, cfg.n_positions, cfg.n_positions), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        head_dim = C // self.n_head
        q = self.q_proj(x).view(B, T, self.n_head, head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_head, head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_head, head_dim).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """Position-wise feed-forward: 4x expansion, tanh-approximated GELU."""

    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.act = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class Block(nn.Module):
    """Pre-LayerNorm transformer block."""

    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    """Token + position embeddings, n_layer blocks, final LayerNorm, tied LM head."""

    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying, as in GPT-2
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def _small(small: bool | None) -> bool:
    return small if small is not None else os.environ.get("OPROF_EXAMPLE_SMALL") == "1"


def get_model_and_inputs(device: str = "cuda", small: bool | None = None) -> tuple[nn.Module, tuple]:
    """GPT-2 small in eval mode and a (4, 128) batch of token ids on ``device``."""
    torch.manual_seed(0)
    cfg = SMALL if _small(small) else GPT2Config()
    model = GPT2(cfg).to(device).eval()
    idx = torch.randint(0, cfg.vocab_size, (cfg.batch, cfg.seq_len), device=device)
    return model, (idx,)
