"""Per-counter aggregation follows the catalog: duration-weighted rates, sums, maxima, weighted ratios."""

from __future__ import annotations

import pytest

from profiler_core.attribution.aggregate import aggregate_samples
from tests.analysis.real_profiles import pair_profile


def test_short_kernel_does_not_hide_the_long_one() -> None:
    out = aggregate_samples([({"achieved_occupancy_pct": 90.0}, 2_000),
                              ({"achieved_occupancy_pct": 10.0}, 200_000)])
    assert out["achieved_occupancy_pct"] == pytest.approx((90 * 2 + 10 * 200) / 202)


def test_sums_maxima_and_instruction_weights() -> None:
    out = aggregate_samples([
        ({"dram_bytes_read": 100.0, "registers_per_thread": 32, "executed_instructions": 1_000,
          "warp_cycles_per_instruction": 10.0}, 5_000),
        ({"dram_bytes_read": 50.0, "registers_per_thread": 128, "executed_instructions": 3_000,
          "warp_cycles_per_instruction": 2.0}, 5_000),
    ])
    assert out["dram_bytes_read"] == 150.0
    assert out["registers_per_thread"] == 128
    assert out["executed_instructions"] == 4_000
    assert out["warp_cycles_per_instruction"] == pytest.approx((10 * 1_000 + 2 * 3_000) / 4_000)


def test_null_stays_null_and_absent_stays_absent() -> None:
    out = aggregate_samples([({"warp_cycles_per_instruction": None}, 10), ({}, 10)])
    assert out == {"warp_cycles_per_instruction": None}
    assert aggregate_samples([]) == {}


def test_zero_durations_fall_back_to_the_plain_mean() -> None:
    out = aggregate_samples([({"sm_throughput_pct": 10.0}, 0), ({"sm_throughput_pct": 30.0}, 0)])
    assert out["sm_throughput_pct"] == pytest.approx(20.0)


def test_real_operator_metrics_match_a_hand_computed_weighting() -> None:
    """aten::mm#0 of the real baseline: two kernels (GEMM + split-K), occupancy weighted by duration."""
    prof = pair_profile("base")
    op = next(o for o in prof.operators if o.key == "aten::mm#0")
    ks = [k for k in prof.kernels if k.id in op.kernel_ids]
    assert len(ks) == 2
    weighted = sum(k.counters["achieved_occupancy_pct"] * k.duration_ns for k in ks)
    expected = weighted / sum(k.duration_ns for k in ks)
    assert op.metrics["achieved_occupancy_pct"] == pytest.approx(expected)
    assert op.metrics["dram_bytes_read"] == sum(k.counters["dram_bytes_read"] for k in ks)


def test_partial_sums_and_maxima_are_null_like_the_engine() -> None:
    # one kernel measured, one not (an explained hole): a partial sum would understate the operator
    out = aggregate_samples([({"dram_bytes_read": 100.0, "registers_per_thread": 40.0}, 10),
                              ({"dram_bytes_read": None, "registers_per_thread": None}, 10)])
    assert out["dram_bytes_read"] is None and out["registers_per_thread"] is None
    full = aggregate_samples([({"dram_bytes_read": 100.0}, 10), ({"dram_bytes_read": 50.0}, 10)])
    assert full["dram_bytes_read"] == 150.0
