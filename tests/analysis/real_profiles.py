"""Profiles of the real H200 captures in tests/data, attributed by the engine itself.

The analysis and report tests read the profiles the attribution engine makes from the raw
artifacts (Kineto trace, ncu CSV, Inductor's output code), so a change in the engine shows in
them; what a run directory's manifest would hold (workload, iterations, the clocks NVML saw)
comes from the capture notes beside the files (tests/data/h200_pair/README.md).

    base = pair_profile("base")    # FP32, separate Q/K/V, manual attention (44 kernels)
    opt = pair_profile("opt")      # BF16, fused QKV, SDPA, casts in the graph
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from profiler_core.attribution import attribute_files
from profiler_core.schema import CaptureMeta, ClockSample, Profile

DATA = Path(__file__).parent.parent / "data"
PAIR = DATA / "h200_pair"
JOINABLE = DATA / "h200_joinable"


def _capture(workload: str, clocks: Path | None = None) -> CaptureMeta:
    """What the capture recorded (capture_pair.sh: 2 warmup + 2 measured iterations, full counters)."""
    samples = []
    if clocks is not None:
        seen = json.loads(clocks.read_text())
        samples = [ClockSample(phase="kineto", **{k: v for k, v in seen.items() if k != "gpu_name"})]
    return CaptureMeta(workload=workload, warmup_iterations=2, measured_iterations=2, compile_mode="default",
                       clock_policy="observe", clocks=samples, counter_mode="full")


@cache
def _pair(variant: str) -> Profile:
    return attribute_files(kineto=PAIR / f"{variant}_kineto.json", ncu=PAIR / f"{variant}_ncu_raw.csv",
                           inductor=PAIR / f"{variant}_fusion_comments.txt",
                           capture=_capture(f"pair_attention.py {variant}", PAIR / f"{variant}_clocks.json"))


def pair_profile(variant: str) -> Profile:
    """The baseline ("base") or optimized ("opt") half of the H200 pair (a fresh copy: tests may edit it)."""
    return _pair(variant).model_copy(deep=True)


@cache
def _joinable() -> Profile:
    return attribute_files(kineto=JOINABLE / "kineto.json", ncu=JOINABLE / "ncu_full_raw.csv",
                           inductor=JOINABLE / "output_code.log", capture=_capture("tiny_attention.py"))


def joinable_profile() -> Profile:
    """The h200_joinable capture (same model as the pair's baseline, another run)."""
    return _joinable().model_copy(deep=True)
