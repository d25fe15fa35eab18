"""compare(): speedup and verdict, per-class and per-operator deltas, new overhead, comparability."""

from __future__ import annotations

import pytest

from profiler_core.analysis import compare
from profiler_core.schema import OperatorClass, Profile
from tests.analysis.profile_builder import ProfileBuilder, k
from tests.analysis.real_profiles import pair_profile

FP32 = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_ffma"
BF16 = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n"


def _pair(
    base_kw: dict | None = None, opt_kw: dict | None = None, base_us: float = 100.0, opt_us: float = 50.0
) -> tuple[Profile, Profile]:
    base, opt = ProfileBuilder(**(base_kw or {})), ProfileBuilder(**(opt_kw or {}))
    base.op("aten::mm", k(FP32, base_us, tensor_core_active_pct=0.0))
    opt.op("aten::mm", k(BF16, opt_us, tensor_core_active_pct=61.0))
    return base.build(), opt.build()


def test_real_pair_speedup_and_verdict() -> None:
    base, opt = pair_profile("base"), pair_profile("opt")
    c = compare(base, opt)
    base_ns, opt_ns = sum(x.duration_ns for x in base.kernels), sum(x.duration_ns for x in opt.kernels)
    assert (c.base_total_ns, c.opt_total_ns) == (base_ns, opt_ns)
    assert c.speedup == pytest.approx(base_ns / opt_ns, rel=1e-4) and c.speedup > 3
    assert c.verdict == "faster" and c.comparability.comparable and not c.warnings


def test_real_pair_class_rows_show_the_bottleneck_moving() -> None:
    c = compare(pair_profile("base"), pair_profile("opt"))
    rows = {r.op_class: r for r in c.classes}
    gemm = rows[OperatorClass.GEMM]
    tc = next(d for d in gemm.counters if d.field == "tensor_core_active_pct")
    assert tc.direction == "up" and tc.base < 0.1 and tc.opt > 5
    assert tc.text.startswith("tensor_core_active_pct 0.01 -> ")
    assert rows[OperatorClass.ATTENTION].base_ns == 0 and rows[OperatorClass.ATTENTION].delta_pct is None
    assert sum(r.base_ns for r in c.classes) == c.base_total_ns
    assert sum(r.opt_share_pct for r in c.classes) == pytest.approx(100.0, abs=0.01)


def test_real_pair_predicted_shifts_hold() -> None:
    c = compare(pair_profile("base"), pair_profile("opt"))
    checks = {(s.rule_id, s.field): s for s in c.shift_checks}
    assert set(checks) == {
        ("tensor_core_idle", "tensor_core_active_pct"),
        ("parallel_projections", "achieved_occupancy_pct"),
        ("manual_attention", "dram_bytes_read"),
    }
    assert checks[("tensor_core_idle", "tensor_core_active_pct")].as_predicted
    assert checks[("parallel_projections", "achieved_occupancy_pct")].as_predicted
    # the optimized attention also launches a memset ncu does not measure: its DRAM bytes are null
    # (a partial sum would understate them), so the predicted drop is unverified, not failed
    attention = checks[("manual_attention", "dram_bytes_read")]
    assert attention.as_predicted is None and attention.observed == "n/a"


def test_real_pair_kernels_on_one_side_and_overhead() -> None:
    c = compare(pair_profile("base"), pair_profile("opt"))
    only_opt = {r.name: r for r in c.only_in_opt}
    assert any("sdpa" in name and r.op_class is OperatorClass.ATTENTION for name, r in only_opt.items())
    assert any(name.startswith("nvjet") for name in only_opt)
    assert any("ffma" in r.name for r in c.only_in_base)
    # The BF16 casts were fused into kernels that do real work: nothing is pure overhead.
    assert any("_to_copy" in name for name in only_opt)
    assert c.new_overhead == [] and c.new_overhead_ns == 0


def test_new_overhead_is_priced() -> None:
    base, opt = ProfileBuilder(), ProfileBuilder()
    base.op("aten::mm", k(FP32, 100))
    base.op("aten::clone", k("triton_poi_fused_clone_0", 2))
    opt.op("aten::_to_copy", k("triton_poi_fused__to_copy_0", 4))
    opt.op("aten::_to_copy", k("triton_poi_fused__to_copy_0", 6))
    opt.op("aten::mm", k(BF16, 30), k("void cublasLt::splitKreduce_kernel<32, 16, int, float>", 3))
    for _ in range(3):
        opt.op("aten::clone", k("triton_poi_fused_clone_0", 2))
    c = compare(base.build(), opt.build())
    rows = {r.kind: r for r in c.new_overhead}
    assert rows["cast"].duration_ns == 10_000 and rows["cast"].kernel_count == 2
    assert rows["epilogue"].duration_ns == 3_000
    assert (
        rows["copy"].duration_ns == 4_000 and rows["copy"].kernel_count == 2
    )  # 2 more than the baseline's 1
    assert c.new_overhead_ns == 17_000
    assert rows["cast"].share_of_opt_pct == pytest.approx(100 * 10 / 49, abs=1e-3)


@pytest.mark.parametrize(
    ("base_us", "opt_us", "verdict"),
    [(100, 50, "faster"), (100, 120, "slower"), (100, 100.5, "unchanged")],
    ids=["faster", "slower", "within-tolerance"],
)
def test_verdict(base_us: float, opt_us: float, verdict: str) -> None:
    c = compare(*_pair(base_us=base_us, opt_us=opt_us))
    assert c.verdict == verdict
    assert c.delta_pct == pytest.approx(100 * (opt_us - base_us) / base_us, abs=1e-3)


def test_counter_delta_direction_per_operator() -> None:
    c = compare(*_pair())
    (row,) = c.operators
    (tc,) = [d for d in row.counters if d.field == "tensor_core_active_pct"]
    assert (tc.base, tc.opt, tc.delta, tc.direction, tc.text) == (
        0.0,
        61.0,
        61.0,
        "up",
        "tensor_core_active_pct 0 -> 61",
    )


COMPARABILITY = [
    ({"chip": "ga100", "gpu_name": "NVIDIA A100"}, False, "NOT COMPARABLE: gpu_name differs"),
    ({"sm_mhz": 1980.0 * 1.03}, False, "NOT COMPARABLE: sm_clock differs"),
    ({"sm_mhz": 1980.0 * 1.015}, True, None),
    ({"measured": 4}, False, "NOT COMPARABLE: measured_iterations differs"),
    ({"warmup": 5}, False, "NOT COMPARABLE: warmup_iterations differs"),
    ({"sources": ("nsys", "ncu"), "timeline_source": "nsys"}, False, "NOT COMPARABLE: sources differs"),
    ({"sm_mhz": None}, True, "unverified: sm_clock"),
    # an idle clock (no sample found the GPU busy) is not a clock difference: unverified, not a mismatch
    ({"sm_mhz": 345.0, "clock_basis": "idle"}, True, "unverified: sm_clock no clock sample found the GPU busy"),
    ({"sm_mhz": 345.0, "clock_basis": "all"}, False, "NOT COMPARABLE: sm_clock differs"),
    ({"torch": "2.12.0"}, True, "note: torch differs"),
]


@pytest.mark.parametrize(
    ("opt_kw", "comparable", "warning"),
    COMPARABILITY,
    ids=[
        "other-gpu",
        "clock-3pct",
        "clock-1.5pct",
        "iterations",
        "warmup",
        "sources",
        "clock-unknown",
        "clock-idle",
        "clock-all-samples",
        "torch-version",
    ],
)
def test_comparability(opt_kw: dict, comparable: bool, warning: str | None) -> None:
    c = compare(*_pair(opt_kw=opt_kw))
    assert c.comparability.comparable is comparable
    if warning is None:
        assert c.warnings == []
    else:
        assert any(w.startswith(warning) for w in c.warnings), c.warnings


@pytest.mark.parametrize(
    ("opt_mhz", "comparable"),
    [(1755.0, True), (1755.0 * 1.01, False)],
    ids=["same-lock", "locked-1pct-apart"],
)
def test_locked_clocks_must_match_exactly(opt_mhz: float, comparable: bool) -> None:
    lock = {"clock_policy": "lock"}
    c = compare(*_pair(base_kw={**lock, "sm_mhz": 1755.0}, opt_kw={**lock, "sm_mhz": opt_mhz}))
    assert c.comparability.comparable is comparable


def test_different_iteration_counts_compare_per_iteration() -> None:
    base, opt = ProfileBuilder(measured=2), ProfileBuilder(measured=4)
    base.op("aten::mm", k(FP32, 100))
    for _ in range(2):
        opt.op("aten::mm", k(FP32, 100))
    c = compare(base.build(), opt.build())
    assert c.per_iteration and (c.base_total_ns, c.opt_total_ns) == (50_000, 50_000)
    assert c.verdict == "unchanged"
    assert any("per measured iteration" in w for w in c.warnings)


def test_counter_deltas_by_column_read_as_one_call_per_counter() -> None:
    """The column-at-a-time deltas give what ``direction`` and ``shift_text`` give cell by cell."""
    from profiler_core.analysis.compare import _counter_deltas_many
    from profiler_core.analysis.counter_format import direction, shift_text
    from profiler_core.analysis.thresholds import DEFAULT_THRESHOLDS as t
    from profiler_core.metrics.catalog import COUNTER_FIELDS

    pct_field = next(f for f in COUNTER_FIELDS if f.endswith("_pct"))
    count_field = next(f for f in COUNTER_FIELDS if not f.endswith(("_pct", "_rate")))
    pairs = [(None, None), (None, 3.0), (2.0, None), (0.0, -0.0), (-0.0, 0.0), (50.0, 50.4), (50.0, 52.0),
             (7476736.0, 7476736.0), (1e-05, 2e-05), (0.0139, 61.27), (float("nan"), 1.0), (3, 3), (1e12, 9e11)]
    bases = [{pct_field: b, count_field: b} for b, _ in pairs]
    opts = [{pct_field: o, count_field: o} for _, o in pairs]
    got = _counter_deltas_many(bases, opts, t)
    for (b, o), row in zip(pairs, got, strict=True):
        want = [] if b is None and o is None else [
            {"field": f, "base": b, "opt": o, "delta": (o - b) if b is not None and o is not None else None,
             "direction": direction(f, b, o, same_abs=t.counter_same_abs, same_rel_pct=t.counter_same_rel_pct),
             "text": shift_text(f, b, o)} for f in COUNTER_FIELDS if f in (pct_field, count_field)]
        dumped = [d.model_dump() for d in row]
        assert len(dumped) == len(want)
        for d, w in zip(dumped, want, strict=True):
            assert d["text"] == w["text"] and d["direction"] == w["direction"] and d["field"] == w["field"]
            assert str(d["delta"]) == str(w["delta"]) and str(d["base"]) == str(w["base"])
    assert [d.text for d in got[3]][0].endswith("0 -> -0")  # -0.0 keeps its sign in the text
