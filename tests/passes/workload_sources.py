"""Workload files the pass tests write out: small real library models, built on a CPU in a second."""

from __future__ import annotations

# transformers' ResNetForImageClassification, two tiny stages, with BatchNorm statistics that are
# not the identity, so folding them changes the convolution weights.
TINY_RESNET = '''
import torch
import transformers

def get_model_and_inputs(device="cpu"):
    torch.manual_seed(0)
    config = transformers.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=5)
    model = transformers.ResNetForImageClassification(config).to(device).eval()
    for m in model.modules():  # statistics that are not the identity, so folding changes the weights
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    return model, (torch.randn(2, 3, 32, 32, device=device),)
'''
