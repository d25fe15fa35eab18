"""One call, one operator: a ResNet-50 captured on the H200 with an nsys timeline.

cuDNN zeroes a workspace with a memset before some convolutions (and cuBLAS before a split-K
GEMM); with an nsys timeline the memset is filed by NVTX range and its kernel by CUPTI
correlation. The reference below is the raw Kineto trace of the same capture: every GPU
activity names its launching call by ``External id``; the attributed operators must partition
the activities exactly as those calls do.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from profiler_core.attribution import attribute_run

RUN = Path(__file__).resolve().parents[2] / "examples" / "captures" / "h200" / "tv_resnet50" / "baseline_nsys"


def _raw_calls() -> list[list[int]]:
    """Activity positions (per stream, in start order) grouped by their launching call, from Kineto alone."""
    events = json.loads(gzip.decompress((RUN / "kineto.json.gz").read_bytes()))["traceEvents"]
    gpu = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")),
                 key=lambda e: (e["args"]["stream"], e["ts"]))
    calls: dict[int, list[int]] = defaultdict(list)
    for i, e in enumerate(gpu):
        calls[e["args"]["External id"]].append(i)
    return sorted(calls.values())


@pytest.fixture(scope="module")
def profile() -> object:
    return attribute_run(RUN)


def test_the_capture_has_memsets_that_share_a_call_with_a_kernel() -> None:
    calls = _raw_calls()
    assert len(calls) == 244 and sum(map(len, calls)) == 300  # 250 kernels and 50 memsets
    assert sum(1 for c in calls if len(c) == 2) == 52  # 50 a memset and its kernel, 2 two kernels


def test_operators_partition_the_activities_as_the_calls_do(profile: object) -> None:
    kernels = sorted(profile.kernels, key=lambda k: (k.stream, k.start_ns))  # type: ignore[attr-defined]
    position = {k.id: i for i, k in enumerate(kernels)}
    ops = [sorted(position[i] for i in op.kernel_ids) for op in profile.operators]  # type: ignore[attr-defined]
    assert sorted(ops) == _raw_calls()
    assert len(profile.operators) == 244  # type: ignore[attr-defined]


def test_a_call_with_a_memset_is_named_and_classed_by_its_kernel(profile: object) -> None:
    kinds = {k.id: k.kind for k in profile.kernels}  # type: ignore[attr-defined]
    with_memset = [op for op in profile.operators  # type: ignore[attr-defined]
                   if any(kinds[i] == "memset" for i in op.kernel_ids)]
    assert Counter(op.name for op in with_memset) == {"aten::cudnn_convolution": 48, "aten::addmm": 2}
    assert all(op.kernel_count == 2 and op.op_class.value in ("convolution", "gemm") for op in with_memset)
    assert all(op.input_shapes for op in with_memset)  # the kernel's claim, which carries the call's shapes
