"""CUDA-graph replays placed by the captured graph's launch order."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler_core.attribution.evidence import make_resolver
from profiler_core.attribution.graphs import _match, graph_replay_claims
from profiler_core.ingest import read_inductor
from profiler_core.records import InductorCall, TimelineKernel
from profiler_core.schema import Tier

T, E = "triton", "extern"


def _k(name: str) -> TimelineKernel:
    return TimelineKernel(name=name, start_ns=0, end_ns=1, stream=7, device=0, correlation_id=99)


CALLS = [InductorCall(T, "triton_a"), InductorCall(E, "aten::addmm"), InductorCall(T, "triton_b"),
         InductorCall(E, "aten::bmm"), InductorCall(E, "aten::mm"), InductorCall(T, "triton_c")]


def test_gaps_take_their_extern_calls() -> None:
    # split-K: one addmm launches two kernels; two externs, two kernels: one each
    seg = [_k("triton_a"), _k("gemm_main"), _k("splitKreduce"), _k("triton_b"), _k("g1"), _k("g2"), _k("triton_c")]
    assert _match(seg, CALLS) == [0, 1, 1, 2, 3, 4, 5]


def test_ambiguous_gap_stays_unexplained() -> None:
    seg = [_k("triton_a"), _k("x"), _k("triton_b"), _k("g1"), _k("g2"), _k("g3"), _k("triton_c")]
    assert _match(seg, CALLS) == [0, 1, 2, None, None, None, 5]


def test_other_graph_does_not_match() -> None:
    assert _match([_k("triton_z"), _k("g")], CALLS) is None


def test_claims_name_the_extern_op() -> None:
    seg = [_k("triton_a"), _k("gemm"), _k("triton_b"), _k("g1"), _k("g2"), _k("triton_c")]
    claims = graph_replay_claims(seg, [99] * len(seg), [CALLS], make_resolver({}))
    assert [c.operator for c in claims] == ["triton_a", "aten::addmm", "triton_b", "aten::bmm", "aten::mm",
                                            "triton_c"]
    assert {c.tier for c in claims} == {Tier.CUDA_GRAPH}
    assert graph_replay_claims(seg, [None] * len(seg), [CALLS], make_resolver({})) == [None] * len(seg)


def test_call_order_read_from_real_output_code(joinable: Path) -> None:
    (calls,) = read_inductor(joinable / "output_code.log").call_sequences
    assert len(calls) == 17 and calls[0] == InductorCall(T, "triton_per_fused_native_layer_norm_0")
    assert [c.name for c in calls if c.kind == E][:2] == ["aten::mm", "aten::mm"]


ATTN_BWD = "aten::_scaled_dot_product_cudnn_attention_backward"


def test_a_gap_is_split_by_what_each_kernel_does() -> None:
    # a GEMM then cuDNN's flash backward (memset, three kernels): two calls, five kernels
    calls = [InductorCall(T, "triton_a"), InductorCall(E, "aten::mm"), InductorCall(E, ATTN_BWD),
             InductorCall(T, "triton_b")]
    seg = [_k("triton_a"), _k("nvjet_sm90_tst_96x128_64x7_2x1_v_bz_TNN"), _k("Memset (Unknown)"),
           _k("void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(...)"),
           _k("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3"),
           _k("void cudnn::fusion::convert_dq_to_16bits<true>(...)"), _k("triton_b")]
    assert _match(seg, calls) == [0, 1, 2, 2, 2, 2, 3]


@pytest.mark.parametrize("kernels", [
    ["nvjet_a", "nvjet_b", "nvjet_c"],  # three GEMM kernels for two GEMM calls: two splits fit
    ["nvjet_a", "mystery_kernel", "flash_bprop"],  # a kernel of no known family
    ["flash_bprop", "nvjet_a", "nvjet_b"],  # out of the calls' order
])
def test_a_gap_no_single_split_explains_stays_unexplained(kernels: list[str]) -> None:
    calls = [InductorCall(T, "triton_a"), InductorCall(E, "aten::mm"), InductorCall(E, ATTN_BWD),
             InductorCall(T, "triton_b")]
    if kernels[0] == "nvjet_a" and kernels[-1] == "nvjet_c":
        calls[2] = InductorCall(E, "aten::bmm")
    seg = [_k("triton_a"), *(_k(n) for n in kernels), _k("triton_b")]
    assert _match(seg, calls) == [0, None, None, None, 3]


def test_the_graphed_training_steps_cudnn_attention_backward_is_placed() -> None:
    run = Path(__file__).resolve().parents[2] / "examples" / "captures" / "h200" / "hf_gpt2_train" / "optimized"
    from profiler_core.attribution import attribute_run

    profile = attribute_run(run)
    flash = [k for k in profile.kernels if "flash_bprop" in k.name]
    assert flash and all(k.attribution.tier is Tier.CUDA_GRAPH for k in flash)
    ops = {op.key: op.name for op in profile.operators}
    assert {ops[k.attribution.operator_key] for k in flash} == {ATTN_BWD}
    assert profile.coverage.attributed_time_pct > 99.9 and not profile.unattributed
