"""CUDA-graph replays placed by the captured graph's launch order."""

from __future__ import annotations

from pathlib import Path

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
