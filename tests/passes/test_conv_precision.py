"""cuDNN's TF32 convolutions set the tolerance of a plan on a convolution network."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from profiler_core.passes.convolution import cudnn_conv_precision


def _net(dtype: torch.dtype = torch.float32) -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()).to(dtype).eval()


@pytest.fixture
def cudnn_flags():  # type: ignore[no-untyped-def]
    saved = torch.backends.cudnn.enabled, torch.backends.cudnn.allow_tf32
    yield
    torch.backends.cudnn.enabled, torch.backends.cudnn.allow_tf32 = saved


def test_float32_convolutions_on_cuda_are_tf32_by_default(cudnn_flags: None) -> None:
    torch.backends.cudnn.enabled, torch.backends.cudnn.allow_tf32 = True, True
    assert cudnn_conv_precision(_net(), "cuda") == "tf32"
    assert cudnn_conv_precision(_net(), "cuda:1") == "tf32"


def test_cpu_a_flag_turned_off_or_no_float32_convolution_keeps_float32(cudnn_flags: None) -> None:
    torch.backends.cudnn.enabled, torch.backends.cudnn.allow_tf32 = True, True
    assert cudnn_conv_precision(_net(), "cpu") is None
    assert cudnn_conv_precision(_net(torch.float64), "cuda") is None
    assert cudnn_conv_precision(nn.Linear(4, 4), "cuda") is None
    torch.backends.cudnn.allow_tf32 = False
    assert cudnn_conv_precision(_net(), "cuda") is None
