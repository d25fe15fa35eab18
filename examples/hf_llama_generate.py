"""A transformers Llama decoding with ``generate()``: a serving workload file, random init, FP32.

4 layers, hidden 512, 8 query heads sharing 4 key/value heads, SwiGLU MLP of width 1408,
vocabulary 32000; a batch of 8 prompts of 64 random token ids, 32 new tokens by greedy
decoding (no sampling, so two runs give the same tokens). One step is one whole
``model.generate(...)`` call: a prefill forward over the prompt, then one forward per new
token with a growing KV cache. That decode loop is what serving users profile: many small
launches per token, the GPU idle between them.

The model is built from a config written here (nothing is downloaded). Needs the ``examples``
extra. Set OPROF_EXAMPLE_SMALL=1 (or call get_model_and_inputs(device, small=True)) for a
2-layer, hidden-64 configuration with 8-token prompts and 4 new tokens that runs in a second
on a CPU.
"""

from __future__ import annotations

import os

import torch
from torch import nn

LAYERS, HIDDEN, HEADS, KV_HEADS, MLP, VOCAB = 4, 512, 8, 4, 1408, 32000
BATCH, PROMPT, NEW_TOKENS = 8, 64, 32
SMALL = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "mlp": 128, "vocab": 256,
         "batch": 2, "prompt": 8, "new_tokens": 4}


def _small(small: bool | None) -> bool:
    return small if small is not None else os.environ.get("OPROF_EXAMPLE_SMALL") == "1"


def build_config(small: bool = False) -> object:
    """The model's ``LlamaConfig`` (full size, or the small CPU one)."""
    from transformers import LlamaConfig

    s = SMALL if small else {"layers": LAYERS, "hidden": HIDDEN, "heads": HEADS, "kv_heads": KV_HEADS,
                             "mlp": MLP, "vocab": VOCAB}
    return LlamaConfig(
        vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["mlp"],
        num_hidden_layers=s["layers"], num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"],
        max_position_embeddings=2048, tie_word_embeddings=False, use_cache=True,
        attention_dropout=0.0, pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )


def get_model_and_inputs(device: str = "cuda", small: bool | None = None) -> tuple[nn.Module, tuple]:
    """The Llama in eval mode, a (batch, prompt) tensor of token ids and the number of new tokens."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    is_small = _small(small)
    config = build_config(is_small)
    model = LlamaForCausalLM(config).to(device=device, dtype=torch.float32).eval()
    batch, prompt, new = ((SMALL["batch"], SMALL["prompt"], SMALL["new_tokens"]) if is_small
                          else (BATCH, PROMPT, NEW_TOKENS))
    # Token ids 3.. so that no prompt token is the pad, bos or eos id.
    ids = torch.randint(3, config.vocab_size, (batch, prompt), device=device)  # type: ignore[attr-defined]
    return model, (ids, new)


def step(model: nn.Module, inputs: tuple) -> object:
    """One greedy ``generate()`` call; returns the generated token ids (prompt included) and each
    step's scores, so that where a plan's tokens diverge, validation can check each side's token
    against the other's top-k (``output_scores=True, return_dict_in_generate=True``)."""
    ids, new_tokens = inputs
    with torch.no_grad():
        out = model.generate(  # type: ignore[operator]
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens, min_new_tokens=new_tokens,
            do_sample=False, num_beams=1, pad_token_id=0, output_scores=True, return_dict_in_generate=True,
        )
    # the tokens and their scores; not the KV cache, whose kind (dynamic, static) is a plan's to choose
    return {"sequences": out.sequences, "scores": out.scores}
