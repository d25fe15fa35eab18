"""Baseline and optimized variants of a small attention block, for a baseline/optimized profile pair.

base: FP32, separate Q/K/V projections, manual matmul-softmax-matmul attention (as h200_joinable).
opt:  the same weights promoted to BF16, Q/K/V fused into one projection, SDPA attention; the FP32
      input is cast to BF16 inside the graph and the output cast back (the cast overhead compare prices).

    python3 pair_attention.py {base|opt} kineto OUT.json CLOCKS.json   # torch.profiler trace + NVML clocks
    python3 pair_attention.py {base|opt} region                        # cudaProfilerStart/Stop (for ncu)
"""
import json
import statistics
import sys
import threading

import torch
import torch.nn as nn
import torch.nn.functional as F


class Base(nn.Module):
    def __init__(self, d=256, h=4):
        super().__init__()
        self.h = h
        self.ln = nn.LayerNorm(d)
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.o = nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, D = x.shape
        y = self.ln(x)
        q, k, v = (p(y).view(B, T, self.h, D // self.h).transpose(1, 2) for p in (self.q, self.k, self.v))
        att = torch.softmax(q @ k.transpose(-2, -1) / (D // self.h) ** 0.5, dim=-1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(B, T, D))
        return x + self.fc2(torch.relu(self.fc1(x)))


class Opt(nn.Module):
    def __init__(self, base: Base):
        super().__init__()
        self.h = base.h
        self.ln, self.o, self.fc1, self.fc2 = base.ln, base.o, base.fc1, base.fc2
        d = base.q.in_features
        self.qkv = nn.Linear(d, 3 * d)
        with torch.no_grad():
            self.qkv.weight.copy_(torch.cat([base.q.weight, base.k.weight, base.v.weight]))
            self.qkv.bias.copy_(torch.cat([base.q.bias, base.k.bias, base.v.bias]))

    def forward(self, x):
        B, T, D = x.shape
        x = x.to(torch.bfloat16)
        y = self.ln(x)
        q, k, v = self.qkv(y).view(B, T, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v)
        x = x + self.o(att.transpose(1, 2).reshape(B, T, D))
        x = x + self.fc2(torch.relu(self.fc1(x)))
        return x.float()


def get_model_and_inputs(variant="base", device="cuda"):
    torch.manual_seed(0)
    base = Base().to(device).eval()
    model = base if variant == "base" else Opt(base).to(device).to(torch.bfloat16).eval()
    return model, (torch.randn(4, 128, 256, device=device),)


class ClockSampler:
    """Samples the SM and memory clocks with NVML every 2 ms while the measured loop runs."""

    def __init__(self):
        import pynvml
        pynvml.nvmlInit()
        self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
        self.sm, self.mem, self.stop = [], [], threading.Event()

    def _run(self):
        while not self.stop.is_set():
            self.sm.append(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))
            self.mem.append(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_MEM))
            self.stop.wait(0.002)

    def __enter__(self):
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def summary(self):
        return {"gpu_name": self.nvml.nvmlDeviceGetName(self.handle),
                "sm_mhz_median": statistics.median(self.sm), "sm_mhz_min": min(self.sm),
                "sm_mhz_max": max(self.sm), "memory_mhz_median": statistics.median(self.mem),
                "samples": len(self.sm)}


def main(variant, mode, out=None, clocks_out=None):
    m, (x,) = get_model_and_inputs(variant)
    m = torch.compile(m)
    with torch.no_grad():
        for _ in range(2):
            m(x)
        torch.cuda.synchronize()
        if mode == "kineto":
            from torch.profiler import ProfilerActivity, profile
            with ClockSampler() as clocks, profile(
                    activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as p:
                for _ in range(2):
                    m(x)
                torch.cuda.synchronize()
            p.export_chrome_trace(out)
            with open(clocks_out, "w") as f:
                json.dump(clocks.summary(), f)
        else:
            torch.cuda.profiler.start()
            for _ in range(2):
                m(x)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
