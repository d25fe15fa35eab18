"""Record a torch.profiler trace with the CUPTI range profiler: per-kernel counters, one process.

    python scripts/record_cupti_range_trace.py OUT_DIR [--device cuda:0]

Writes OUT_DIR/cupti_range_trace.json.gz: a Kineto trace whose kernels are
``cuda_profiler_range`` events carrying the counters below in their args, plus the launching
operators (ProfilerActivity.CPU). ``oprof attribute --kineto OUT_DIR/cupti_range_trace.json.gz``
reads it as timeline and counter source. The range profiler serialises and replays each kernel,
so keep the model small; ``gpu__time_duration.sum`` gives each range a measured duration.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

METRICS = [
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--device", default="cuda:0")
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.LayerNorm(512),
                                torch.nn.Linear(512, 256)).to(args.device).eval()
    x = torch.randn(64, 256, device=args.device)
    with torch.no_grad():
        model(x)  # warm-up outside the profiled region: cuBLAS handles, lazy init
    torch.cuda.synchronize()
    config = torch.profiler._ExperimentalConfig(profiler_metrics=METRICS, profiler_measure_per_kernel=True)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities, record_shapes=True, experimental_config=config) as prof:
        with torch.no_grad():
            for _ in range(2):
                model(x)
        torch.cuda.synchronize()
    out = args.out_dir / "cupti_range_trace.json.gz"
    prof.export_chrome_trace(str(out))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
