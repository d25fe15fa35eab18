"""End-to-end wall time of a workload's step, timed over many iterations.

On CUDA each step is timed with CUDA events (the GPU's own clock, from the first launch to
the last kernel's end); on any other device with ``time.perf_counter`` around a step that
is synchronous there.

Profiled kernel time says what the GPU did; this says what the user waits for. Each run is
its own process (the same harness contract as capture), so compile and allocator state do
not leak between the baseline and the optimized model:

    python -m profiler_core.optimize.walltime WORKLOAD --iters 30 --warmup 5 [--compile-mode default] \
        [--device cuda]

prints one JSON line: per-iteration milliseconds, median, p10/p90, min/max. With
``--recipe NAME [--backend inductor]`` it runs the workload as a yardstick recipe writes it
(:mod:`profiler_core.optimize.yardstick`) and validates it first; the line then also holds
``validation``, and no timings when validation failed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from profiler_core.capture.phases import ENV_INDUCTOR_CACHE
from profiler_core.errors import ProfilerError, ToolFailedError, WorkloadError


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

    def __post_init__(self) -> None:
        if not self.iterations_ms:
            raise ValueError("a WallTime needs at least one iteration")

    def as_dict(self) -> dict[str, float | int]:
        return {"iterations": len(self.iterations_ms), "median_ms": self.median_ms,
                "p10_ms": self.quantile_ms(0.1), "p90_ms": self.quantile_ms(0.9),
                "min_ms": min(self.iterations_ms), "max_ms": max(self.iterations_ms)}


def measure_in_process(workload: Path, *, iters: int, warmup: int, compile_mode: str, device: str = "cuda") -> WallTime:
    """Time ``iters`` steps after ``warmup`` in this process (CUDA events on CUDA, else perf_counter)."""
    import torch

    from profiler_core.capture.config import CompileMode
    from profiler_core.compile_mode import compile_model
    from profiler_core.workload import load_workload

    if iters < 1:
        raise WorkloadError(f"{workload}: --iters is {iters}; time at least one iteration")
    try:
        mode = CompileMode(compile_mode)
    except ValueError as err:
        raise WorkloadError(f"unknown compile mode '{compile_mode}'; use one of "
                            f"{', '.join(m.value for m in CompileMode)}") from err
    torch.manual_seed(0)
    wl = load_workload(workload, device=device)
    model = compile_model(wl.model, mode, wl.path)
    return time_steps(lambda: wl.step(model, wl.inputs), iters=iters, warmup=warmup, device=device)


def time_steps(step: Callable[[], object], *, iters: int, warmup: int, device: str) -> WallTime:
    """``warmup`` calls of ``step``, then ``iters`` timed ones (CUDA events on CUDA, else perf_counter)."""
    import torch

    for _ in range(warmup):
        step()
    if torch.device(device).type != "cuda":
        return WallTime(tuple(_host_times_ms(step, iters)))
    with torch.cuda.device(torch.device(device)):  # events on the workload's device (cuda:N)
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return WallTime(tuple(times))


def recipe_in_process(workload: Path, recipe: str, *, iters: int, warmup: int, device: str = "cuda",
                      backend: str = "inductor") -> dict[str, object]:
    """Validate the yardstick recipe ``recipe`` on ``workload``, then time it: what the child prints."""
    import torch

    from profiler_core.optimize.yardstick import RecipeStep, recipe_named, validate_recipe
    from profiler_core.passes.step_run import copy_state
    from profiler_core.workload import load_workload

    if iters < 1:
        raise WorkloadError(f"{workload}: --iters is {iters}; time at least one iteration")
    chosen = recipe_named(recipe)
    torch.manual_seed(0)
    wl = load_workload(workload, device=device)
    step = RecipeStep(wl, chosen, device=device, backend=backend)
    model, inputs = copy_state(wl.model, wl.inputs) if step.training else (wl.model, wl.inputs)
    target = step.target(model)
    try:
        validation = validate_recipe(wl, step, target, inputs)
    except ProfilerError:
        raise
    except Exception as err:  # the recipe itself broke: that is its outcome
        raise WorkloadError(f"{workload}: recipe {chosen.name} raised {type(err).__name__}: {err}") from err
    if not validation["passed"]:
        return {"recipe": chosen.name, "validation": validation, "iterations_ms": []}
    try:
        figures = time_steps(lambda: step(target, inputs), iters=iters, warmup=warmup, device=device)
    except Exception as err:
        raise WorkloadError(f"{workload}: recipe {chosen.name} raised {type(err).__name__}: {err}") from err
    return {"recipe": chosen.name, "validation": validation, "iterations_ms": list(figures.iterations_ms),
            **figures.as_dict()}


def _host_times_ms(step: Callable[[], object], iters: int) -> list[float]:
    """perf_counter around each call: on a CPU the step is done when the call returns."""
    times = []
    for _ in range(iters):
        start_s = time.perf_counter()
        step()
        times.append((time.perf_counter() - start_s) * 1e3)
    return times


def _child_env() -> dict[str, str]:
    """This environment, with this profiler_core importable in the child wherever it is run from."""
    import profiler_core

    env = dict(os.environ)
    root = str(Path(profiler_core.__file__).resolve().parent.parent)
    paths = [root, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def measure(workload: Path, *, iters: int = 30, warmup: int = 5, compile_mode: str = "default",
            device: str = "cuda", python: str = sys.executable, timeout_s: float = 900,
            inductor_cache: Path | None = None) -> WallTime:
    """Run :func:`measure_in_process` in a fresh interpreter and return its figures.

    ``inductor_cache``: an Inductor cache directory to compile from (a capture's, kept for this),
    so the timing run loads the kernels the capture compiled instead of compiling them again.
    """
    data = run_child(workload, iters=iters, warmup=warmup, compile_mode=compile_mode, device=device,
                     python=python, timeout_s=timeout_s, inductor_cache=inductor_cache)
    try:
        return WallTime(tuple(float(x) for x in data["iterations_ms"]))
    except (ValueError, KeyError, TypeError) as err:
        raise WorkloadError(f"{workload}: the wall-time run printed no timings ({type(err).__name__}: {err})"
                            ) from err


def run_child(workload: Path, *, iters: int, warmup: int, compile_mode: str, device: str, python: str,
              timeout_s: float = 900, inductor_cache: Path | None = None,
              extra: list[str] | None = None) -> dict:
    """Run this module on ``workload`` in a fresh interpreter and return the JSON object it printed last."""
    cmd = [python, "-m", "profiler_core.optimize.walltime", str(workload), "--iters", str(iters),
           "--warmup", str(warmup), "--compile-mode", compile_mode, "--device", device, *(extra or [])]
    try:
        env = _child_env()
        if inductor_cache is not None and inductor_cache.is_dir():
            env[ENV_INDUCTOR_CACHE] = str(inductor_cache)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False, env=env)
    except subprocess.TimeoutExpired as err:
        raise ToolFailedError(f"{workload}: wall-time run exceeded {timeout_s:.0f} s") from err
    except OSError as err:
        raise ToolFailedError(f"{workload}: cannot start the wall-time run with {python} ({err}); "
                              "check the interpreter path") from err
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise WorkloadError(f"{workload}: wall-time run failed: {tail}")
    try:
        data = json.loads((out.stdout.strip().splitlines() or [""])[-1])
    except ValueError as err:
        raise WorkloadError(f"{workload}: the wall-time run printed no timings on its last line "
                            f"({type(err).__name__}: {err}); does the workload print to stdout at exit?"
                            ) from err
    if not isinstance(data, dict):
        raise WorkloadError(f"{workload}: the wall-time run's last line is not a JSON object; does the workload "
                            "print to stdout at exit?")
    return data


def main() -> None:
    ap = argparse.ArgumentParser(description="Time a workload's step (CUDA events on CUDA, else perf_counter).")
    ap.add_argument("workload", type=Path)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--compile-mode", default="default")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--recipe", default=None, help="Time a yardstick recipe (validated first) instead.")
    ap.add_argument("--backend", default="inductor", help="torch.compile backend of the recipe.")
    args = ap.parse_args()
    try:
        if args.recipe:
            print(json.dumps(recipe_in_process(args.workload, args.recipe, iters=args.iters, warmup=args.warmup,
                                               device=args.device, backend=args.backend)))
            return
        wt = measure_in_process(args.workload, iters=args.iters, warmup=args.warmup,
                                compile_mode=args.compile_mode, device=args.device)
    except ProfilerError as err:
        print(str(err), file=sys.stderr)
        sys.exit(3)
    print(json.dumps({"iterations_ms": list(wt.iterations_ms), **wt.as_dict()}))


if __name__ == "__main__":
    main()
