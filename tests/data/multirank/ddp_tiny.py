"""A two-layer MLP trained one step per iteration under DDP (CPU or GPU)."""

import torch

DISTRIBUTED = "ddp"


def get_model_and_inputs(device="cuda"):
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
    model.train()
    return model, (torch.randn(8, 16, device=device),)


def step(model, inputs):
    model(*inputs).sum().backward()
