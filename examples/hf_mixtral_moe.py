"""A Mixtral-style sparse mixture-of-experts decoder from ``transformers``, random init, FP32, eval: a workload file.

4 layers, hidden 1024, 16 query heads sharing 4 key/value heads, 8 SwiGLU experts of width
2048 with top-2 routing, vocabulary 32000; a batch of 8 x 256 random token ids. The model is
built from a config written here (nothing is downloaded) and returns its router logits beside
the logits and the KV cache, so validation can count the tokens whose choice of experts a
plan changes (bf16 rounding flips a few near-tied routers) next to the next-token agreement.

Needs the ``examples`` extra (``pip install -e '.[examples]'``). Set OPROF_EXAMPLE_SMALL=1
(or call get_model_and_inputs(device, small=True)) for a 2-layer, hidden-64 configuration
that builds and runs in seconds on a CPU.
"""

from __future__ import annotations

import os

import torch
from torch import nn

LAYERS, HIDDEN, HEADS, KV_HEADS, EXPERT_MLP, EXPERTS, TOP_K, VOCAB = 4, 1024, 16, 4, 2048, 8, 2, 32000
BATCH, SEQ = 8, 256
SMALL = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "mlp": 128, "experts": 8, "vocab": 256,
         "batch": 2, "seq": 16}


def _small(small: bool | None) -> bool:
    return small if small is not None else os.environ.get("OPROF_EXAMPLE_SMALL") == "1"


def build_config(small: bool = False) -> object:
    """The model's ``MixtralConfig`` (full size, or the small CPU one)."""
    from transformers import MixtralConfig

    s = SMALL if small else {"layers": LAYERS, "hidden": HIDDEN, "heads": HEADS, "kv_heads": KV_HEADS,
                             "mlp": EXPERT_MLP, "experts": EXPERTS, "vocab": VOCAB}
    return MixtralConfig(
        vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["mlp"],
        num_hidden_layers=s["layers"], num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"],
        num_local_experts=s["experts"], num_experts_per_tok=TOP_K, router_jitter_noise=0.0,
        output_router_logits=True, max_position_embeddings=4096, tie_word_embeddings=False, use_cache=True,
        attention_dropout=0.0, torch_dtype="float32",
    )


def get_model_and_inputs(device: str = "cuda", small: bool | None = None) -> tuple[nn.Module, tuple]:
    """The MoE decoder in eval mode and a (8, 256) batch of token ids on ``device``."""
    from transformers import MixtralForCausalLM

    torch.manual_seed(0)
    is_small = _small(small)
    config = build_config(is_small)
    model = MixtralForCausalLM(config).to(device=device, dtype=torch.float32).eval()
    batch, seq = (SMALL["batch"], SMALL["seq"]) if is_small else (BATCH, SEQ)
    ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)  # type: ignore[attr-defined]
    return model, (ids,)
