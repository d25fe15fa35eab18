"""Every diagnosis rule, firing and not firing, on small synthetic profiles built to sit on either side."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pytest

from profiler_core.analysis import RULES, FindingKind, Transformation, diagnose, rule
from profiler_core.errors import ProfilerError
from profiler_core.schema import ExecutionContext, Profile
from tests.analysis.profile_builder import ProfileBuilder, k
from tests.analysis.test_rules_serving import generate_loop, moe_step

FP32_GEMM = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_execute_kernel"
BF16_GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute"
EAGER = ExecutionContext.EAGER


def gemm(us: float = 50.0, *, tc: float | None = 0.0, occ: float = 12.0, name: str = FP32_GEMM,
         **kw: float) -> object:
    counters = {"achieved_occupancy_pct": occ, "sm_throughput_pct": 30.0, "dram_throughput_pct": 10.0,
                "registers_per_thread": 128, **kw}
    if tc is not None:
        counters["tensor_core_active_pct"] = tc
    return k(name, us, **counters)


def ew(name: str = "void at::native::vectorized_elementwise_kernel<4>", us: float = 20.0, *,
       dram: float = 80.0, sm: float = 10.0) -> object:
    return k(name, us, dram_throughput_pct=dram, sm_throughput_pct=sm, achieved_occupancy_pct=70.0)


# -- scenarios: (builder, rule that must or must not fire)
def tc_idle_fp32() -> Profile:
    b = ProfileBuilder()
    for _ in range(3):
        b.op("aten::mm", gemm(), shapes=[[512, 256], [256, 1024]])
    b.op("aten::relu", ew(dram=30, sm=20))
    return b.build()


def tc_busy() -> Profile:
    b = ProfileBuilder()
    for _ in range(3):
        b.op("aten::mm", gemm(tc=45.0, name=BF16_GEMM), shapes=[[512, 256], [256, 1024]])
    return b.build()


def tc_idle_but_bf16_kernel() -> Profile:
    b = ProfileBuilder()
    b.op("aten::mm", gemm(tc=1.0, name=BF16_GEMM))
    return b.build()


def tc_counters_missing() -> Profile:
    b = ProfileBuilder()
    b.op("aten::mm", gemm(tc=None))
    return b.build()


def _qkv(occ: float, shapes: list[list[list[int]]], between: str | None = None, n: int = 3) -> Profile:
    b = ProfileBuilder()
    b.op("aten::layer_norm", k("triton_per_fused_native_layer_norm_0", 5, achieved_occupancy_pct=50))
    for i in range(n):
        b.op("aten::linear", gemm(20, occ=occ), shapes=shapes[i % len(shapes)])
        if between and i == 0:
            b.op(between, ew(dram=20, sm=20))
    b.op("aten::bmm", gemm(10, occ=occ), shapes=[[16, 128, 64], [16, 64, 128]])
    return b.build()


SAME = [[[4, 128, 256], [256, 256], [256]]]


def qkv_low_occupancy() -> Profile:
    return _qkv(12.0, SAME)


def qkv_high_occupancy() -> Profile:
    return _qkv(60.0, SAME)


def qkv_different_widths() -> Profile:
    # one input, projections of different widths (grouped-query attention's Q beside K and V): one group
    return _qkv(12.0, [[[4, 128, 256], [256, 256], [256]], [[4, 128, 256], [1024, 256], [1024]]])


def qkv_different_inputs() -> Profile:
    return _qkv(12.0, [[[4, 128, 256], [256, 256], [256]], [[4, 128, 1024], [256, 1024], [256]]])


def qkv_activation_between() -> Profile:
    return _qkv(12.0, SAME, between="aten::gelu", n=2)


def qkv_long_run_is_recurrence() -> Profile:
    return _qkv(12.0, SAME, n=6)


def attention_eager() -> Profile:
    b = ProfileBuilder(compile_mode="eager")
    b.op("aten::bmm", gemm(8), shapes=[[16, 128, 64], [16, 64, 128]], context=EAGER)
    b.op("aten::div", ew(us=3), context=EAGER)
    b.op("aten::_softmax", k("void at::native::softmax_warp_forward<float>", 4), context=EAGER)
    b.op("aten::bmm", gemm(8), shapes=[[16, 128, 128], [16, 128, 64]], context=EAGER)
    return b.build()


def attention_compiled() -> Profile:
    b = ProfileBuilder()
    b.op("aten::bmm", gemm(8))
    softmax = "triton_per_fused__softmax_amax_div_mul_sub_view_3"
    b.op(softmax, k(softmax, 3),
         fused_with=["aten::view", "aten::mul", "aten::amax", "aten::sub", "aten::div", "aten::_softmax"])
    b.op("aten::mm", gemm(8))  # the V projection Inductor scheduled in between
    b.op("aten::bmm", gemm(8))
    return b.build()


def attention_sdpa() -> Profile:
    b = ProfileBuilder()
    b.op("aten::_scaled_dot_product_flash_attention", k("flash_fwd_kernel<Flash_fwd_kernel_traits>", 20))
    b.op("aten::mm", gemm(8))
    return b.build()


def softmax_classifier_head() -> Profile:
    b = ProfileBuilder()
    b.op("aten::bmm", gemm(8))
    b.op("aten::softmax", k("void at::native::softmax_warp_forward<float>", 4))
    b.op("aten::mm", gemm(8))
    return b.build()


def _recurrence(rows: int, split_k: bool, n: int = 40) -> Profile:
    b = ProfileBuilder(compile_mode="eager")
    for _ in range(n):
        kernels = [gemm(4, occ=8)]
        if split_k:
            kernels.append(k("void cublasLt::splitKreduce_kernel<32, 16, int, float>", 2))
        b.op("aten::mm", *kernels, shapes=[[rows, 512], [512, 2048]], context=EAGER)
        b.op("aten::sigmoid", ew(us=1, dram=20, sm=20), context=EAGER)
    return b.build()


def recurrence_unrolled() -> Profile:
    return _recurrence(32, split_k=True)


def recurrence_big_m_no_split() -> Profile:
    return _recurrence(4096, split_k=False)


def recurrence_too_few_steps() -> Profile:
    return _recurrence(32, split_k=True, n=8)


def rnn_opaque() -> Profile:
    b = ProfileBuilder(compile_mode="eager")
    b.op("aten::linear", gemm(50, tc=50.0, name=BF16_GEMM), context=EAGER)
    b.unattributed(k("RNN_blockPersist_fp_LSTM<float, float, float>", 300),
                   k("elemWiseRNNcell<float, float, float, 3>", 100), reason="launched inside cuDNN")
    return b.build()


def elementwise_chain() -> Profile:
    b = ProfileBuilder(compile_mode="eager")
    b.op("aten::mm", gemm(30, tc=50.0, name=BF16_GEMM), context=EAGER)
    for name in ("aten::add", "aten::mul", "aten::relu"):
        b.op(name, ew(), context=EAGER)
    return b.build()


def elementwise_not_memory_bound() -> Profile:
    b = ProfileBuilder(compile_mode="eager")
    for name in ("aten::add", "aten::mul", "aten::relu"):
        b.op(name, ew(dram=30), context=EAGER)
    return b.build()


def elementwise_single() -> Profile:
    b = ProfileBuilder(compile_mode="eager")
    b.op("aten::add", ew(), context=EAGER)
    b.op("aten::mm", gemm(30, tc=50.0, name=BF16_GEMM), context=EAGER)
    b.op("aten::mul", ew(), context=EAGER)
    return b.build()


def _tiny_kernels(gap_us: float = 5.0, us: float = 2.0, compile_mode: str = "default",
                  graph_id: int | None = None) -> Profile:
    b = ProfileBuilder(gap_us=gap_us, compile_mode=compile_mode)
    for i in range(30):
        b.op(f"triton_poi_fused_add_{i}", k(f"triton_poi_fused_add_{i}", us, graph_id=graph_id,
                                           achieved_occupancy_pct=30.0, sm_throughput_pct=5.0))
    return b.build()


def launch_bound() -> Profile:
    return _tiny_kernels()


def launch_long_kernels() -> Profile:
    return _tiny_kernels(us=50.0)


def launch_no_gaps() -> Profile:
    return _tiny_kernels(gap_us=0.0)


def launch_reduce_overhead() -> Profile:
    return _tiny_kernels(compile_mode="reduce-overhead")


def launch_graph_replay() -> Profile:
    return _tiny_kernels(graph_id=3)


def host_waits() -> Profile:
    return _tiny_kernels(gap_us=20.0)  # 2 us of work every 22 us: the GPU is busy 9% of the step


def host_waits_graphed() -> Profile:
    return _tiny_kernels(gap_us=20.0, graph_id=3)


def _casts(context: ExecutionContext, cast_us: float) -> Profile:
    b = ProfileBuilder()
    b.op("aten::mm", gemm(50, tc=50.0, name=BF16_GEMM), context=context)
    b.op("triton_poi_fused__to_copy_0", k("triton_poi_fused__to_copy_0", cast_us), context=context,
         fused_with=["aten::_to_copy"])
    return b.build()


def casts_compiled() -> Profile:
    return _casts(ExecutionContext.COMPILED_GRAPH, 10.0)


def casts_eager() -> Profile:
    return _casts(EAGER, 10.0)


def casts_small() -> Profile:
    return _casts(ExecutionContext.COMPILED_GRAPH, 1.0)


def spills(wavefronts: float) -> Callable[[], Profile]:
    def build() -> Profile:
        b = ProfileBuilder()
        b.op("aten::mm", gemm(50, tc=50.0, name=BF16_GEMM, local_memory_wavefronts=wavefronts))
        return b.build()
    return build


def unattributed(share_us: float) -> Callable[[], Profile]:
    def build() -> Profile:
        b = ProfileBuilder()
        b.op("aten::mm", gemm(100 - share_us, tc=50.0, name=BF16_GEMM))
        b.unattributed(k("void custom_ext::fused_kernel<float>", share_us))
        return b.build()
    return build


def counters(missing_us: float) -> Callable[[], Profile]:
    def build() -> Profile:
        b = ProfileBuilder()
        b.op("aten::mm", gemm(100 - missing_us, tc=50.0, name=BF16_GEMM))
        b.op("aten::add", k("void at::native::vectorized_elementwise_kernel<4>", missing_us))
        return b.build()
    return build


@functools.cache
def _gpt2_optimized() -> Profile:
    from profiler_core.attribution import attribute_run

    return attribute_run(Path(__file__).parents[2] / "examples" / "captures" / "h200" / "gpt2" / "optimized")


def gpt2_optimized() -> Profile:
    return _gpt2_optimized().model_copy(deep=True)


CASES = [
    ("tensor_core_idle", tc_idle_fp32, True),
    ("tensor_core_idle", tc_busy, False),
    ("tensor_core_idle", tc_idle_but_bf16_kernel, False),
    ("tensor_core_idle", tc_counters_missing, False),
    ("parallel_projections", qkv_low_occupancy, True),
    ("parallel_projections", qkv_high_occupancy, False),
    ("parallel_projections", qkv_different_widths, True),
    ("parallel_projections", qkv_different_inputs, False),
    ("parallel_projections", qkv_activation_between, False),
    ("parallel_projections", qkv_long_run_is_recurrence, False),
    ("manual_attention", attention_eager, True),
    ("manual_attention", attention_compiled, True),
    ("manual_attention", attention_sdpa, False),
    ("manual_attention", softmax_classifier_head, False),
    ("recurrent_region", recurrence_unrolled, True),
    ("recurrent_region", rnn_opaque, True),
    ("recurrent_region", recurrence_big_m_no_split, False),
    ("recurrent_region", recurrence_too_few_steps, False),
    ("memory_bound_elementwise", elementwise_chain, True),
    ("memory_bound_elementwise", elementwise_not_memory_bound, False),
    ("memory_bound_elementwise", elementwise_single, False),
    ("host_bound", host_waits, True),
    ("host_bound", host_waits_graphed, True),
    ("host_bound", launch_bound, False),
    ("host_bound", launch_long_kernels, False),
    ("launch_bound", launch_bound, True),
    ("launch_bound", launch_long_kernels, False),
    ("launch_bound", launch_no_gaps, False),
    ("launch_bound", launch_reduce_overhead, False),
    ("launch_bound", launch_graph_replay, False),
    ("cast_overhead", casts_compiled, True),
    ("cast_overhead", casts_eager, False),
    ("cast_overhead", casts_small, False),
    ("register_spills", spills(4096), True),
    ("register_spills", spills(0), False),
    ("high_unattributed", unattributed(30), True),
    ("high_unattributed", unattributed(5), False),
    ("counters_missing", counters(50), True),
    ("counters_missing", counters(0), False),
    ("decode_loop", generate_loop, True),
    ("decode_loop", recurrence_unrolled, False),
    ("host_syncs", moe_step, True),
    ("host_syncs", launch_bound, False),
    ("far_below_roofline", gpt2_optimized, True),  # a real H200 capture: operators at a few % of the roofs
    ("far_below_roofline", tc_busy, False),  # no chip named: no roofline to be below
]


@pytest.mark.parametrize(("rule_id", "build", "fires"), CASES,
                         ids=[f"{r}-{b.__name__ if b.__name__ != 'build' else i}-{'fires' if f else 'quiet'}"
                              for i, (r, b, f) in enumerate(CASES)])
def test_rule_fires_or_not(rule_id: str, build: Callable[[], Profile], fires: bool) -> None:
    report = diagnose(build(), rules=[rule_id])
    assert bool(report.by_rule(rule_id)) is fires, [f.symptom for f in report.findings]


def test_every_rule_has_a_firing_and_a_quiet_case() -> None:
    from tests.analysis.test_rules_models import CASES as MODEL_CASES

    cases = CASES + MODEL_CASES
    assert {r for r, _, f in cases if f} == set(RULES) == {r for r, _, f in cases if not f}


def test_tensor_core_idle_evidence() -> None:
    (f,) = diagnose(tc_idle_fp32(), rules=["tensor_core_idle"]).findings
    assert f.transformation == Transformation.BF16_PROMOTION and Transformation.TF32 in f.alternatives
    assert f.operators == ["aten::mm#0", "aten::mm#1", "aten::mm#2"]
    assert f.evidence.counters["tensor_core_active_pct"] == 0.0
    assert f.evidence.tiers == {"cupti_correlation": 3} and f.evidence.confidence == {"high": 3}
    assert "fp32 x3" in f.evidence.facts[0]
    # Amdahl on the share: 150 us of GEMM out of 170 us of kernel time.
    assert f.evidence.share_pct == pytest.approx(100 * 150 / 170, abs=1e-3)
    assert f.gain_bound_pct == pytest.approx(f.evidence.share_pct)
    assert f.max_speedup == pytest.approx(170 / 20, rel=1e-3)
    assert f.expected_shifts == {"tensor_core_active_pct": "up"}


def test_parallel_projections_groups_the_shared_input_gemms() -> None:
    (f,) = diagnose(qkv_low_occupancy(), rules=["parallel_projections"]).findings
    assert f.transformation == Transformation.QKV_FUSION
    assert f.operators == ["aten::linear#0", "aten::linear#1", "aten::linear#2"]
    assert f.evidence.counters["achieved_occupancy_pct"] == pytest.approx(12.0)


@pytest.mark.parametrize(("between", "kernel", "group"), [
    # Inductor's bias epilogue (an elementwise kernel adding the GEMM's bias) runs inside the run
    ("triton_poi_fused_addmm_clone_transpose_view_1", ew(dram=20, sm=20), [0, 1, 2]),
    # an addmm that is a GEMM (an outer product: K = 1, no projection) ends it, though named like one
    ("aten::addmm", gemm(5), [1, 2]),
])
def test_a_bias_epilogue_passes_between_projections_and_a_gemm_does_not(between: str, kernel: object,
                                                                        group: list[int]) -> None:
    b = ProfileBuilder()
    keys = []
    for i in range(3):
        keys.append(b.op("aten::linear", gemm(20), shapes=SAME[0]))
        if i == 0:
            b.op(between, kernel, shapes=[[256], [512, 1], [1, 256]])
    (f,) = diagnose(b.build(), rules=["parallel_projections"]).findings
    assert f.operators == [keys[i] for i in group]


@pytest.mark.parametrize("build", [attention_eager, attention_compiled], ids=["eager", "compiled"])
def test_manual_attention_names_the_sequence(build: Callable[[], Profile]) -> None:
    (f,) = diagnose(build(), rules=["manual_attention"]).findings
    assert f.transformation == Transformation.SDPA
    assert f.operators[0] == "aten::bmm#0" and f.operators[-1] == "aten::bmm#1"
    assert "aten::mm#0" not in f.operators  # the projection between is not part of attention
    if build is attention_eager:
        assert f.operators == ["aten::bmm#0", "aten::div#0", "aten::_softmax#0", "aten::bmm#1"]


@pytest.mark.parametrize("build", [recurrence_unrolled, rnn_opaque], ids=["unrolled", "opaque"])
def test_recurrent_region_is_structural(build: Callable[[], Profile]) -> None:
    (f,) = diagnose(build(), rules=["recurrent_region"]).findings
    assert f.is_structural and f.kind is FindingKind.STRUCTURAL
    assert f.transformation == Transformation.RNN_REROUTE
    if build is rnn_opaque:
        assert f.evidence.kernel_count == 2
        assert f.evidence.share_pct == pytest.approx(400 / 450 * 100, abs=0.01)
    else:
        assert len(f.operators) == 40 and "40 split-K" in f.evidence.facts[0]


@pytest.mark.parametrize("build", [recurrence_unrolled, rnn_opaque], ids=["unrolled", "opaque"])
def test_recurrent_region_read_by_kernel_position_is_what_the_models_give(
        build: Callable[[], Profile], monkeypatch: pytest.MonkeyPatch) -> None:
    from profiler_core.analysis.profile_view import ProfileView

    profile = build()
    by_position = diagnose(profile, rules=["recurrent_region"])
    monkeypatch.setattr(ProfileView, "kernels_of_ops_at", lambda view, ops: (view.kernels_of_ops(ops), None))
    assert by_position == diagnose(profile, rules=["recurrent_region"]) and by_position.findings
    if build is recurrence_unrolled:  # the split-K epilogues are not GEMM launches of the run
        assert by_position.findings[0].evidence.facts[0].startswith("40 GEMM launches")


def test_high_unattributed_says_the_work_left_the_graph() -> None:
    (f,) = diagnose(unattributed(30)(), rules=["high_unattributed"]).findings
    assert f.transformation is None and f.is_structural
    assert f.gain_bound_ns == 30_000 and f.gain_bound_pct == pytest.approx(30.0)
    assert any("can't reach" in fact for fact in f.evidence.facts)


def test_launch_bound_bound_is_the_gaps_on_the_timeline() -> None:
    (f,) = diagnose(launch_bound(), rules=["launch_bound"]).findings
    assert f.transformation == Transformation.CUDA_GRAPHS and f.gain_basis == "timeline"
    gaps_ns, kernels_ns = 29 * 5_000, 30 * 2_000
    assert f.gain_bound_ns == gaps_ns
    assert f.gain_bound_pct == pytest.approx(100 * gaps_ns / (gaps_ns + kernels_ns), abs=1e-3)


def test_findings_sorted_by_bound_and_small_ones_dropped() -> None:
    b = ProfileBuilder()
    for n in (256, 512, 1024):  # three inputs: no parallel projections
        b.op("aten::mm", gemm(50), shapes=[[512, n], [n, 256]])
    b.op("aten::mm", gemm(0.5, tc=50.0, name=BF16_GEMM, local_memory_wavefronts=10.0))  # 0.3% of time
    b.unattributed(k("void custom_ext::fused_kernel<float>", 40, sm_throughput_pct=50.0))
    report = diagnose(b.build())
    bounds = [f.gain_bound_pct for f in report.findings]
    assert bounds == sorted(bounds, reverse=True)
    assert [f.rule_id for f in report.findings] == ["tensor_core_idle", "high_unattributed"]
    assert report.unattributed_pct == pytest.approx(100 * 40 / 190.5, abs=1e-2)


def test_a_rule_registers_like_a_plugin() -> None:
    @rule("test_always")
    def always(ctx):  # noqa: ANN001, ANN202
        return [ctx.finding("test_always", title="t", kind=FindingKind.NOTE, symptom="s", bottleneck="b",
                            ops=ctx.ops[:1])]

    try:
        report = diagnose(tc_busy(), rules=["test_always"])
        assert [f.rule_id for f in report.findings] == ["test_always"]
        with pytest.raises(ProfilerError, match="registered twice"):
            rule("test_always")(lambda ctx: [])
    finally:
        RULES.pop("test_always")


def test_unknown_rule_is_a_user_error() -> None:
    with pytest.raises(ProfilerError, match="unknown diagnosis rule nope"):
        diagnose(tc_busy(), rules=["nope"])


def test_host_bound_step_names_what_can_help() -> None:
    (f,) = diagnose(host_waits(), rules=["host_bound"]).findings
    assert f.transformation == Transformation.CUDA_GRAPHS and f.gain_basis == "timeline"
    busy = 30 * 2.0
    span = 30 * 2.0 + 29 * 20.0
    assert f.symptom.startswith(f"the GPU is busy {100 * busy / span:.1f}% of the measured step")
    assert f.gain_bound_pct == pytest.approx(100 * (span - busy) / span, abs=1e-3)
    assert any("will not show in end-to-end time" in fact for fact in f.evidence.facts)
    helps = next(fact for fact in f.evidence.facts if fact.startswith("what can help"))
    assert "CUDA graphs" in helps and "fewer launches" in helps and "larger batch" in helps
    # already replayed from CUDA graphs: graphs are no remedy, the rest still is
    (g,) = diagnose(host_waits_graphed(), rules=["host_bound"]).findings
    assert g.transformation is None and "CUDA graphs" not in g.evidence.facts[1]


def test_attention_groups_are_found_once_per_operator_list_and_window(monkeypatch: pytest.MonkeyPatch) -> None:
    from profiler_core.analysis import patterns
    from profiler_core.analysis.profile_view import ProfileView

    searches: list[int] = []
    search = patterns._attention_groups
    monkeypatch.setattr(patterns, "_attention_groups", lambda *a: searches.append(a[2]) or search(*a))
    view = ProfileView(attention_eager())
    ops = view.ops_in_order
    first = patterns.manual_attention_groups(view, ops, 8)
    assert [[ops[i].key for i in g] for g in first] == [
        ["aten::bmm#0", "aten::div#0", "aten::_softmax#0", "aten::bmm#1"]]
    first[0].clear()  # a caller's change to its copy does not reach the remembered groups
    again = patterns.manual_attention_groups(view, ops, 8)
    assert again == patterns.manual_attention_groups(view, list(ops), 8) != first
    assert patterns.manual_attention_groups(view, ops, 1) == []  # too short a window for the scale op
    assert searches == [8, 8, 1]  # the same list and window searched once; another list or window again
