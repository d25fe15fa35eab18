"""GPT-2 (examples/gpt2.py) trained one step per iteration under DDP, for multi-GPU captures.

    oprof capture examples/gpt2_ddp.py --nproc-per-node 2 --attribute

``DISTRIBUTED = "ddp"`` asks the harness to wrap the model in DistributedDataParallel;
the step runs a backward pass so DDP's reducer all-reduces the gradients (NCCL kernels
that overlap the remaining backward compute).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

DISTRIBUTED = "ddp"

_spec = importlib.util.spec_from_file_location("oprof_example_gpt2", Path(__file__).with_name("gpt2.py"))
_gpt2 = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _gpt2  # its dataclasses look their module up while being defined
_spec.loader.exec_module(_gpt2)


def get_model_and_inputs(device: str = "cuda"):
    model, inputs = _gpt2.get_model_and_inputs(device)
    model.train()
    return model, inputs


def step(model, inputs):
    out = model(*inputs)
    loss = (out if not isinstance(out, (tuple, list)) else out[0]).float().mean()
    loss.backward()
