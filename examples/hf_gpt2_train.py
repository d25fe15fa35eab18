"""One training step of a GPT-2 language model from Hugging Face ``transformers``, with AdamW on the model.

4 layers, hidden 768, 12 heads, vocabulary 50257, 1024 positions, random init (nothing is
downloaded), FP32, train mode; a batch of 8 x 256 random token ids that are also the labels
(next-token loss). One step is forward, loss, ``loss.backward()`` and ``model._opt.step()``
and returns the loss.

The optimizer is kept where many training scripts keep it: as an attribute of the model
(``model._opt``), not among the inputs. Validation builds baseline and candidate from their
own calls of ``get_model_and_inputs``, so each build's ``model._opt`` steps that build's
parameters; the call seeds its random initialisation so the builds are identical. Dropout is
off: a step that draws random numbers cannot be matched by a compiled model.

Needs the ``examples`` extra. Set OPROF_EXAMPLE_SMALL=1 (or call
get_model_and_inputs(device, small=True)) for a 2-layer, hidden-64 configuration.
"""

from __future__ import annotations

import os

import torch
from torch import nn

LAYERS, HIDDEN, HEADS, VOCAB, POSITIONS = 4, 768, 12, 50257, 1024
BATCH, SEQ = 8, 256
SMALL = {"layers": 2, "hidden": 64, "heads": 4, "vocab": 256, "positions": 64, "batch": 2, "seq": 16}
LEARNING_RATE = 1e-4


def _small(small: bool | None) -> bool:
    return small if small is not None else os.environ.get("OPROF_EXAMPLE_SMALL") == "1"


def build_config(small: bool = False) -> object:
    """The model's ``GPT2Config`` (full size, or the small CPU one), dropout off."""
    from transformers import GPT2Config

    s = SMALL if small else {"layers": LAYERS, "hidden": HIDDEN, "heads": HEADS, "vocab": VOCAB,
                             "positions": POSITIONS}
    return GPT2Config(
        n_layer=s["layers"], n_embd=s["hidden"], n_head=s["heads"], vocab_size=s["vocab"],
        n_positions=s["positions"], bos_token_id=0, eos_token_id=0,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )


def get_model_and_inputs(device: str = "cuda", small: bool | None = None) -> tuple[nn.Module, tuple]:
    """GPT-2 LM in train mode with its AdamW as ``model._opt``, and (input_ids,) on ``device``."""
    from transformers import GPT2LMHeadModel

    torch.manual_seed(0)
    is_small = _small(small)
    config = build_config(is_small)
    model = GPT2LMHeadModel(config).to(device=device, dtype=torch.float32).train()
    model._opt = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    batch, seq = (SMALL["batch"], SMALL["seq"]) if is_small else (BATCH, SEQ)
    ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)  # type: ignore[attr-defined]
    return model, (ids,)


def step(model: nn.Module, inputs: tuple) -> torch.Tensor:
    """Forward, next-token loss, backward, AdamW step through ``model._opt``; returns the loss."""
    (ids,) = inputs
    optimizer = model._opt
    optimizer.zero_grad(set_to_none=True)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    return loss.detach()
