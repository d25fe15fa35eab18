"""torchvision's ResNet-50, random init, FP32, eval, batch 32 of 3 x 224 x 224 images: a workload file.

The model as ``torchvision.models.resnet50(weights=None)`` builds it (nothing is downloaded):
53 convolutions each followed by an eval-mode BatchNorm, in PyTorch's default NCHW layout.
On a GPU, cuDNN runs its float32 convolutions in TF32 by default, so the baseline itself
carries TF32 rounding; validation measures that against a float64 run of the same step and
holds a plan (conv-BN folding, CUDA graphs) to a small multiple of it.

Needs the ``examples`` extra with a torchvision build that matches the installed torch (the
CUDA wheels from PyPI do not load into a CPU-only torch). Set OPROF_EXAMPLE_SMALL=1 (or call
get_model_and_inputs(device, small=True)) for a batch of 2 images of 64 x 64 on a CPU.
"""

from __future__ import annotations

import os

import torch
from torch import nn

BATCH, SIZE = 32, 224
SMALL_BATCH, SMALL_SIZE = 2, 64


def _small(small: bool | None) -> bool:
    return small if small is not None else os.environ.get("OPROF_EXAMPLE_SMALL") == "1"


def get_model_and_inputs(device: str = "cuda", small: bool | None = None) -> tuple[nn.Module, tuple]:
    """ResNet-50 in eval mode and a (32, 3, 224, 224) batch of images on ``device``."""
    from torchvision.models import resnet50

    torch.manual_seed(0)
    batch, size = (SMALL_BATCH, SMALL_SIZE) if _small(small) else (BATCH, SIZE)
    model = resnet50(weights=None).to(device).eval()
    images = torch.randn(batch, 3, size, size, device=device)
    return model, (images,)
