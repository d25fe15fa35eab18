"""A 2-layer LSTM sequence encoder with a linear head, FP32: a workload file.

nn.LSTM(256 -> 512, 2 layers, batch_first), batch 32 x 128 time steps, then a Linear(512 ->
256) on every step's output. The recurrent layer is what rnn_reroute keeps on cuDNN's fused
kernels, outside the compiled region; none of the graph rewrites apply here.

By default Dynamo stops at the LSTM (a graph break) and the recurrence runs eagerly in cuDNN.
Set OPROF_LSTM_UNROLL=1 (or pass unroll=True) to let Dynamo trace it instead
(torch._dynamo.config.allow_rnn): Inductor then unrolls it into one small GEMM per time step
and layer, the slow shape rnn_reroute undoes.

Set OPROF_EXAMPLE_SMALL=1 (or call get_model_and_inputs(device, small=True)) for a
16 -> 32 LSTM on a batch of 2 x 8 steps.
"""

from __future__ import annotations

import os

import torch
from torch import nn


class LSTMEncoder(nn.Module):
    """LSTM over the sequence, then a per-step linear projection of its outputs."""

    def __init__(self, input_size: int, hidden_size: int, out_features: int, num_layers: int = 2) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=num_layers, batch_first=True)
        self.head = nn.Linear(hidden_size, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs, _ = self.lstm(x)
        return self.head(outputs)


def get_model_and_inputs(device: str = "cuda", small: bool | None = None,
                         unroll: bool | None = None) -> tuple[nn.Module, tuple]:
    """The encoder in eval mode and one (32, 128, 256) FP32 input on ``device``."""
    torch.manual_seed(0)
    if unroll if unroll is not None else os.environ.get("OPROF_LSTM_UNROLL") == "1":
        torch._dynamo.config.allow_rnn = True  # trace nn.LSTM; Inductor unrolls it per time step
    if small if small is not None else os.environ.get("OPROF_EXAMPLE_SMALL") == "1":
        batch, steps, input_size, hidden, out = 2, 8, 16, 32, 16
    else:
        batch, steps, input_size, hidden, out = 32, 128, 256, 512, 256
    model = LSTMEncoder(input_size, hidden, out).to(device).eval()
    x = torch.randn(batch, steps, input_size, device=device)
    return model, (x,)
