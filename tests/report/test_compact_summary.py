"""The compact summary: the useful facts of a profile within a fixed byte budget."""

from __future__ import annotations

import json

import pytest

from profiler_core.report import SUMMARY_MAX_BYTES, compact_summary
from tests.analysis.profile_builder import ProfileBuilder, k
from tests.analysis.real_profiles import pair_profile


def _size(summary: dict) -> int:
    return len(json.dumps(summary, separators=(",", ":")).encode())


def test_real_profile_summary() -> None:
    s = compact_summary(pair_profile("base"), top_k=5)
    assert _size(s) <= SUMMARY_MAX_BYTES and s["truncated"] is False
    assert s["kernels"] == 44 and s["total_kernel_us"] == 158.5
    assert [o["key"] for o in s["top_operators"]][:2] == ["aten::mm#5", "aten::mm#11"]
    assert s["top_operators"][0]["bottleneck"] == "Tensor Cores idle, low occupancy"
    assert [f["rule"] for f in s["findings"]] == ["host_bound", "launch_bound", "tensor_core_idle",
                                                  "parallel_projections", "manual_attention", "far_below_roofline"]
    assert s["time_by_class_pct"]["gemm"] == 83.6 and s["coverage"]["unattributed_pct"] == 0.0


def _huge_profile() -> object:
    b = ProfileBuilder(workload="w" * 500)
    for i in range(400):
        name = f"aten::very_long_operator_name_{'x' * 150}_{i}"
        b.op(name, k(f"sm80_xmma_gemm_f32f32_{'y' * 200}_{i}", 10 + i % 7, tensor_core_active_pct=0.0,
                     achieved_occupancy_pct=5.0, dram_throughput_pct=70.0, sm_throughput_pct=10.0,
                     local_memory_wavefronts=10.0), shapes=[[512, 256], [256, 256]])
    b.unattributed(*(k(f"mystery_{i}", 30) for i in range(50)))
    prof = b.build()
    prof.warnings.extend("a long warning " * 40 for _ in range(10))
    return prof


@pytest.mark.parametrize("max_bytes", [SUMMARY_MAX_BYTES, 2048, 1024], ids=["default", "2k", "1k"])
def test_bound_holds_on_a_huge_profile(max_bytes: int) -> None:
    s = compact_summary(_huge_profile(), top_k=50, max_bytes=max_bytes)
    assert _size(s) <= max_bytes
    assert s["truncated"] is True
    assert s["kernels"] == 450 and "coverage" in s


def test_summary_keeps_the_biggest_findings_first() -> None:
    s = compact_summary(_huge_profile(), top_k=50, max_bytes=2048)
    bounds = [f["bound_pct"] for f in s["findings"]]
    assert bounds == sorted(bounds, reverse=True) and bounds
