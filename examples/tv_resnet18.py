"""torchvision's ResNet-18, random init, FP32, eval, batch 64 of 3 x 160 x 160 images: a workload file.

The model as ``torchvision.models.resnet18(weights=None)`` builds it (nothing is downloaded):
convolutions each followed by an eval-mode BatchNorm, in PyTorch's default NCHW layout, so
conv-BN folding, channels_last and bf16 convolutions all have something to change.

Needs the ``examples`` extra with a torchvision build that matches the installed torch (the
CUDA wheels from PyPI do not load into a CPU-only torch). Set OPROF_EXAMPLE_SMALL=1 (or call
get_model_and_inputs(device, small=True)) for a batch of 2 images of 32 x 32 on a CPU.
"""

from __future__ import annotations

import os

import torch
from torch import nn

BATCH, SIZE = 64, 160
SMALL_BATCH, SMALL_SIZE = 2, 32


def _small(small: bool | None) -> bool:
    return small if small is not None else os.environ.get("OPROF_EXAMPLE_SMALL") == "1"


def get_model_and_inputs(device: str = "cuda", small: bool | None = None) -> tuple[nn.Module, tuple]:
    """ResNet-18 in eval mode and a (64, 3, 160, 160) batch of images on ``device``."""
    from torchvision.models import resnet18

    torch.manual_seed(0)
    batch, size = (SMALL_BATCH, SMALL_SIZE) if _small(small) else (BATCH, SIZE)
    model = resnet18(weights=None).to(device).eval()
    images = torch.randn(batch, 3, size, size, device=device)
    return model, (images,)
