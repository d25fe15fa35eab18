"""One training step of a BERT masked language model from Hugging Face ``transformers``, with AdamW.

6 layers, hidden 512, 8 heads, FFN width 2048, vocabulary 30522, random init, FP32, train
mode; a batch of 16 x 128 random token ids of which 15% carry labels. One step is forward,
masked-LM loss, ``loss.backward()`` and ``AdamW.step()``, and returns the loss.

The optimizer travels with the inputs (``(input_ids, labels, optimizer)``); validation builds
baseline and candidate each from its own seeded call of ``get_model_and_inputs``, so each
build's optimizer steps that build's parameters, and compares the loss, every gradient and
every updated parameter. Dropout is off: a step that draws random numbers cannot be matched
by a compiled model, which draws them differently.

Needs the ``examples`` extra. Set OPROF_EXAMPLE_SMALL=1 (or call
get_model_and_inputs(device, small=True)) for a 2-layer, hidden-64 configuration.
"""

from __future__ import annotations

import os

import torch
from torch import nn

LAYERS, HIDDEN, HEADS, FFN, VOCAB = 6, 512, 8, 2048, 30522
BATCH, SEQ = 16, 128
SMALL = {"layers": 2, "hidden": 64, "heads": 4, "ffn": 128, "vocab": 256, "batch": 2, "seq": 16}
LEARNING_RATE = 1e-4
MASKED_FRACTION = 0.15


def _small(small: bool | None) -> bool:
    return small if small is not None else os.environ.get("OPROF_EXAMPLE_SMALL") == "1"


def build_config(small: bool = False) -> object:
    """The model's ``BertConfig`` (full size, or the small CPU one), dropout off."""
    from transformers import BertConfig

    s = SMALL if small else {"layers": LAYERS, "hidden": HIDDEN, "heads": HEADS, "ffn": FFN, "vocab": VOCAB}
    return BertConfig(
        vocab_size=s["vocab"], hidden_size=s["hidden"], num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"], intermediate_size=s["ffn"], max_position_embeddings=512,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )


def get_model_and_inputs(device: str = "cuda", small: bool | None = None) -> tuple[nn.Module, tuple]:
    """BERT-MLM in train mode, and (input_ids, labels, AdamW over its parameters) on ``device``."""
    from transformers import BertForMaskedLM

    torch.manual_seed(0)
    is_small = _small(small)
    config = build_config(is_small)
    model = BertForMaskedLM(config).to(device=device, dtype=torch.float32).train()
    batch, seq = (SMALL["batch"], SMALL["seq"]) if is_small else (BATCH, SEQ)
    vocab = config.vocab_size  # type: ignore[attr-defined]
    ids = torch.randint(0, vocab, (batch, seq), device=device)
    labeled = torch.rand(batch, seq, device=device) < MASKED_FRACTION
    labels = torch.where(labeled, torch.randint(0, vocab, (batch, seq), device=device), -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    return model, (ids, labels, optimizer)


def step(model: nn.Module, inputs: tuple) -> torch.Tensor:
    """Forward, masked-LM loss, backward, AdamW step; returns the loss."""
    ids, labels, optimizer = inputs
    optimizer.zero_grad(set_to_none=True)
    loss = model(input_ids=ids, labels=labels).loss
    loss.backward()
    optimizer.step()
    return loss.detach()
