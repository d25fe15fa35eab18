"""End-to-end wall time of a workload's step, timed with CUDA events over many iterations.

Profiled kernel time says what the GPU did; this says what the user waits for. Each run is
its own process (the same harness contract as capture), so compile and allocator state do
not leak between the baseline and the optimized model:

    python -m profiler_core.optimize.walltime WORKLOAD --iters 30 --warmup 5 [--compile-mode default]

prints one JSON line: per-iteration milliseconds, median, p10/p90, min/max.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from profiler_core.errors import ToolFailedError, WorkloadError


@dataclass(frozen=True)
class WallTime:
    """Per-iteration wall times (ms) of one workload, and their spread."""

    iterations_ms: tuple[float, ...]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.iterations_ms)

    def quantile_ms(self, q: float) -> float:
        xs = sorted(self.iterations_ms)
        return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]

    def as_dict(self) -> dict[str, float | int]:
        return {"iterations": len(self.iterations_ms), "median_ms": self.median_ms,
                "p10_ms": self.quantile_ms(0.1), "p90_ms": self.quantile_ms(0.9),
                "min_ms": min(self.iterations_ms), "max_ms": max(self.iterations_ms)}


def measure_in_process(workload: Path, *, iters: int, warmup: int, compile_mode: str, device: str = "cuda") -> WallTime:
    """Time ``iters`` steps after ``warmup`` in this process (CUDA events around each step)."""
    import torch

    from profiler_core.capture.config import CompileMode
    from profiler_core.capture.harness import _compiled
    from profiler_core.workload import load_workload

    torch.manual_seed(0)
    wl = load_workload(workload, device=device)
    model = _compiled(wl.model, CompileMode(compile_mode), wl.path)
    for _ in range(warmup):
        wl.step(model, wl.inputs)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        wl.step(model, wl.inputs)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return WallTime(tuple(times))


def measure(workload: Path, *, iters: int = 30, warmup: int = 5, compile_mode: str = "default",
            python: str = sys.executable, timeout_s: float = 900) -> WallTime:
    """Run :func:`measure_in_process` in a fresh interpreter and return its figures."""
    cmd = [python, "-m", "profiler_core.optimize.walltime", str(workload), "--iters", str(iters),
           "--warmup", str(warmup), "--compile-mode", compile_mode]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as err:
        raise ToolFailedError(f"{workload}: wall-time run exceeded {timeout_s:.0f} s") from err
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise WorkloadError(f"{workload}: wall-time run failed: {tail}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return WallTime(tuple(data["iterations_ms"]))


def main() -> None:
    ap = argparse.ArgumentParser(description="Time a workload's step with CUDA events.")
    ap.add_argument("workload", type=Path)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--compile-mode", default="default")
    args = ap.parse_args()
    try:
        wt = measure_in_process(args.workload, iters=args.iters, warmup=args.warmup, compile_mode=args.compile_mode)
    except WorkloadError as err:
        print(str(err), file=sys.stderr)
        sys.exit(3)
    print(json.dumps({"iterations_ms": list(wt.iterations_ms), **wt.as_dict()}))


if __name__ == "__main__":
    main()
