"""decode_loop and host_syncs, on synthetic profiles (built here, not captured) and the shipped H200 captures."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from profiler_core.analysis import diagnose
from profiler_core.analysis.decode_loop import detect_decode_loop
from profiler_core.analysis.profile_view import ProfileView
from profiler_core.analysis.thresholds import DEFAULT_THRESHOLDS
from profiler_core.schema import ExecutionContext, Profile
from tests.analysis.profile_builder import K, ProfileBuilder, k

EAGER = ExecutionContext.EAGER
ATTENTION = "aten::_scaled_dot_product_efficient_attention"
CAPTURES = Path(__file__).parent.parent.parent / "examples" / "captures" / "h200"


def gemm(us: float, *, occ: float) -> K:
    return k("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_execute_kernel", us,
             tensor_core_active_pct=0.0, achieved_occupancy_pct=occ, sm_throughput_pct=30.0,
             dram_throughput_pct=10.0)


def _forward(b: ProfileBuilder, q_len: int, kv_len: int, *, batch: int = 2, layers: int = 2,
             attention: bool = True) -> None:
    rows = batch * q_len
    for _ in range(layers):
        for _ in range(3):
            b.op("aten::mm", gemm(4, occ=8), shapes=[[rows, 64], [64, 64]], context=EAGER, gap_us=20)
        if attention:
            b.op(ATTENTION, k("fmha_cutlassF_f32_aligned_64x64_rf_sm80", 5),
                 shapes=[[batch, 4, q_len, 16], [batch, 2, kv_len, 16], [batch, 2, kv_len, 16]], context=EAGER,
                 gap_us=20)
        b.op("aten::mm", gemm(4, occ=8), shapes=[[rows, 64], [64, 64]], context=EAGER, gap_us=20)


def generate_loop(*, tokens: int = 8, prompt: int = 8, iterations: int = 2, attention: bool = True) -> Profile:
    """Synthetic: ``iterations`` generate() calls, a prefill then ``tokens - 1`` decode forwards each."""
    b = ProfileBuilder(compile_mode="eager", measured=iterations)
    for _ in range(iterations):
        _forward(b, prompt, prompt, attention=attention)
        for t in range(1, tokens):
            _forward(b, 1, prompt + t, attention=attention)
    return b.build()


def test_a_decode_loop_is_read_from_its_attention_shapes() -> None:
    prof = generate_loop()
    view = ProfileView(prof)
    loop = detect_decode_loop(view, view.ops_in_order)
    assert loop is not None
    assert (loop.iterations, loop.layers, loop.batch, loop.prompt_len, loop.decode_forwards) == (2, 2, 2, 8, 7)
    assert loop.kv_growing and loop.kv_lengths == (9, 15) and loop.new_tokens == 8
    # decode time of the first iteration (both are alike): its first decode attention to its last kernel,
    # the one before the 3 projection GEMMs that open the second iteration's prefill
    atts = sorted((op for op in prof.operators if op.name == ATTENTION),
                  key=lambda op: view.kernels_of(op)[0].start_ns)
    first_decode = view.kernels_of(atts[2])[0].start_ns  # after the prefill's 2 layers
    ordered = sorted(prof.kernels, key=lambda kk: kk.start_ns)
    second_prefill = ordered.index(view.kernels_of(atts[16])[0])  # 2 + 7 x 2 attention calls later
    last_end = ordered[second_prefill - 4].end_ns
    assert loop.decode_ns == pytest.approx(last_end - first_decode, abs=loop.iterations)
    assert loop.time_per_output_token_ns == pytest.approx(loop.decode_ns / 7)
    assert loop.busy_pct < 25


def test_generate_is_a_decode_loop_not_a_recurrent_network() -> None:
    report = diagnose(generate_loop())
    (f,) = report.by_rule("decode_loop")
    assert f.transformation == "static_kv_cache" and f.kind.value == "structural"
    assert any(fact.startswith("time per output token") for fact in f.evidence.facts)
    assert any(fact.startswith("prefill ") and "decode" in fact for fact in f.evidence.facts)
    assert not report.by_rule("recurrent_region")
    (host,) = report.by_rule("host_bound")
    assert host.transformation is None and any("static_kv_cache" in fact for fact in host.evidence.facts)


def test_without_the_decode_loop_the_same_gemms_read_as_a_recurrence() -> None:
    # the same per-token GEMMs: recurrent_region fires once the decode loop is not recognised
    off = dataclasses.replace(DEFAULT_THRESHOLDS, decode_min_forwards=100)
    report = diagnose(generate_loop(), thresholds=off)
    assert not report.by_rule("decode_loop") and report.by_rule("recurrent_region")
    # and with no attention at all there is no decode loop, only the recurrence
    plain = diagnose(generate_loop(attention=False))
    assert not plain.by_rule("decode_loop") and plain.by_rule("recurrent_region")


def test_too_few_decode_forwards_are_no_loop() -> None:
    assert not diagnose(generate_loop(tokens=3)).by_rule("decode_loop")


def moe_step(*, syncs: bool = True, iterations: int = 2, compiled: ExecutionContext | None = None,
             sync_context: ExecutionContext = EAGER) -> Profile:
    """Synthetic: a top-2 MoE layer whose router output is read back by the host before the experts run.

    ``compiled``: the GEMMs' context where they run in compiled graphs (the syncs then in
    ``sync_context``: eager code at a graph break, or inside a compiled region).
    """
    b = ProfileBuilder(compile_mode="eager" if compiled is None else "default", measured=iterations)
    work = compiled or EAGER
    for _ in range(iterations):
        for layer in range(2):
            mlp = f"model.layers.{layer}.mlp"
            b.op("aten::mm", gemm(4, occ=8), shapes=[[32, 64], [64, 8]], context=work, module=f"{mlp}.gate",
                 gap_us=30)
            if syncs:
                b.op("aten::nonzero", k("nonzero_kernel", 2), k("Memcpy DtoH (Device -> Pageable)", 1, kind="memcpy"),
                     context=sync_context, module=mlp, gap_us=30)
                b.op("aten::_local_scalar_dense", k("Memcpy DtoH (Device -> Pageable)", 1, kind="memcpy"),
                     context=sync_context, module=mlp, gap_us=30)
            for expert, tokens in ((0, 6), (3, 10), (5, 16)):
                for _ in range(3):
                    b.op("aten::mm", gemm(4, occ=8), shapes=[[tokens, 64], [64, 128]], context=work,
                         module=f"{mlp}.experts.{expert}", gap_us=30)
    return b.build()


def test_moe_host_syncs_are_named_by_module_and_block_cuda_graphs() -> None:
    report = diagnose(moe_step())
    (f,) = report.by_rule("host_syncs")
    facts = f.evidence.facts
    assert facts[0].startswith("4 device-to-host copies and 0 value-reading operators per step")
    assert "2 per step under model.layers.0.mlp" in facts
    assert any(fact.startswith("tokens routed per expert") and "3 20" in fact and "5 32" in fact for fact in facts)
    for rule_id in ("host_bound", "launch_bound"):
        for finding in report.by_rule(rule_id):
            assert finding.transformation is None
            assert any(fact.startswith("cuda_graphs not applicable") for fact in finding.evidence.facts)
    assert report.by_rule("host_bound")


def test_syncs_at_graph_breaks_leave_cuda_graphs_licensed() -> None:
    # reduce-overhead records the compiled regions and runs the eager code between them as it is
    report = diagnose(moe_step(compiled=ExecutionContext.COMPILED_GRAPH, sync_context=EAGER))
    (f,) = report.by_rule("host_syncs")
    assert any(fact.startswith("all 4 per step run in eager code between the compiled graphs")
               for fact in f.evidence.facts)
    (host,) = report.by_rule("host_bound")
    assert host.transformation == "cuda_graphs"


def test_syncs_inside_compiled_graphs_block_cuda_graphs() -> None:
    report = diagnose(moe_step(compiled=ExecutionContext.COMPILED_GRAPH,
                               sync_context=ExecutionContext.COMPILED_GRAPH))
    (f,) = report.by_rule("host_syncs")
    assert any("(4 of 4 per step run inside the compiled graphs)" in fact for fact in f.evidence.facts)
    (host,) = report.by_rule("host_bound")
    assert host.transformation is None


def test_real_syncs_inside_and_outside_the_compiled_graphs() -> None:
    from profiler_core.analysis.host_syncs import find_host_syncs
    from profiler_core.api import load_profile

    moe = load_profile(CAPTURES / "hf_mixtral_moe_grouped" / "baseline")
    syncs = find_host_syncs(ProfileView(moe), moe.operators)
    # transformers' grouped_mm fallback reads its token counts inside the compiled graph, 2 per layer
    # (4 layers, 2 measured steps); the aux loss's bincount reads run at a graph break
    assert syncs.in_graphs == 2 * 4 * 2 and syncs.compiled and syncs.block_graphs
    generate = load_profile(CAPTURES / "hf_llama_generate" / "optimized")
    syncs = find_host_syncs(ProfileView(generate), generate.operators)
    assert syncs and syncs.in_graphs == 0 and not syncs.block_graphs  # generate()'s own loop, eager
    report = diagnose(generate)
    # the decode loop still keeps cuda_graphs off: generate() never calls the compiled model
    assert not [f for f in report.findings if f.transformation == "cuda_graphs"]
    assert any(fact.startswith("cuda_graphs not applicable: the step is a generate() decode loop")
               for f in report.by_rule("host_bound") for fact in f.evidence.facts)


def test_without_syncs_cuda_graphs_stay_licensed() -> None:
    report = diagnose(moe_step(syncs=False))
    assert not report.by_rule("host_syncs")
    (host,) = report.by_rule("host_bound")
    assert host.transformation == "cuda_graphs"


@pytest.mark.slow
def test_shipped_captures_keep_their_recurrence_and_have_no_decode_loop() -> None:
    from profiler_core.analysis.rules import RuleContext
    from profiler_core.analysis.rules_serving import decode_loop_of
    from profiler_core.attribution import attribute_run

    lstm = diagnose(attribute_run(CAPTURES / "lstm_encoder" / "baseline"))
    assert lstm.by_rule("recurrent_region") and not lstm.by_rule("decode_loop")
    unrolled = diagnose(attribute_run(CAPTURES / "lstm_encoder_unrolled" / "baseline"))
    (rnn,) = unrolled.by_rule("recurrent_region")
    assert rnn.transformation == "rnn_reroute" and not unrolled.by_rule("decode_loop")
    gpt2 = attribute_run(CAPTURES / "gpt2" / "baseline")
    assert decode_loop_of(RuleContext(ProfileView(gpt2), DEFAULT_THRESHOLDS)) is None
    assert not diagnose(gpt2).by_rule("decode_loop") and not diagnose(gpt2).by_rule("host_syncs")


def test_decode_and_moe_facts_reach_the_html_report_and_the_mcp_rows() -> None:
    from mcp_server.tools.analysis import finding_row
    from profiler_core.report.html import findings_html

    decode = diagnose(generate_loop())
    html = findings_html(decode)
    assert "time per output token" in html and "prefill " in html
    (row,) = [finding_row(f) for f in decode.by_rule("decode_loop")]
    assert row.licenses == "static_kv_cache" and row.facts[0].startswith("time per output token")
    assert any(fact.startswith("GPU busy") for fact in row.facts)
    (moe,) = [finding_row(f) for f in diagnose(moe_step()).by_rule("host_syncs")]
    assert any("under model.layers.0.mlp" in fact for fact in moe.facts)
