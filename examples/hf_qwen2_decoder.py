"""A Qwen2-family decoder from Hugging Face ``transformers``, random init, FP32, eval: a workload file.

6 layers, hidden 1024, 16 query heads sharing 4 key/value heads (grouped-query attention),
SwiGLU MLP of width 2816, vocabulary 32000; a batch of 8 x 256 random token ids. The model
is built from a config written here (nothing is downloaded) and returns what a user's model
returns: a ``CausalLMOutputWithPast`` holding the logits and a ``DynamicCache`` with every
layer's keys and values, so validation compares all of them.

Needs the ``examples`` extra (``pip install -e '.[examples]'``). Set OPROF_EXAMPLE_SMALL=1
(or call get_model_and_inputs(device, small=True)) for a 2-layer, hidden-64 configuration
that builds and compiles in seconds on a CPU.
"""

from __future__ import annotations

import os

import torch
from torch import nn

LAYERS, HIDDEN, HEADS, KV_HEADS, MLP, VOCAB = 6, 1024, 16, 4, 2816, 32000
BATCH, SEQ = 8, 256
SMALL = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "mlp": 128, "vocab": 256, "batch": 2, "seq": 16}


def _small(small: bool | None) -> bool:
    return small if small is not None else os.environ.get("OPROF_EXAMPLE_SMALL") == "1"


def build_config(small: bool = False) -> object:
    """The model's ``Qwen2Config`` (full size, or the small CPU one)."""
    from transformers import Qwen2Config

    s = SMALL if small else {"layers": LAYERS, "hidden": HIDDEN, "heads": HEADS, "kv_heads": KV_HEADS,
                             "mlp": MLP, "vocab": VOCAB}
    return Qwen2Config(
        vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["mlp"],
        num_hidden_layers=s["layers"], num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"],
        max_position_embeddings=4096, tie_word_embeddings=False, use_cache=True,
        attention_dropout=0.0, torch_dtype="float32",
    )


def get_model_and_inputs(device: str = "cuda", small: bool | None = None) -> tuple[nn.Module, tuple]:
    """The decoder in eval mode and a (8, 256) batch of token ids on ``device``."""
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(0)
    is_small = _small(small)
    config = build_config(is_small)
    model = Qwen2ForCausalLM(config).to(device=device, dtype=torch.float32).eval()
    batch, seq = (SMALL["batch"], SMALL["seq"]) if is_small else (BATCH, SEQ)
    ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)  # type: ignore[attr-defined]
    return model, (ids,)
