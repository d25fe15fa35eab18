"""CUDA-graph replays placed by the captured graph's launch order."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler_core.attribution.evidence import make_resolver
from profiler_core.attribution.graphs import DETAIL_LEARNED, _match, graph_replay_claims
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


SIMT = "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(Params)"
XMMA = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x64x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4"


def test_an_ambiguous_gap_is_read_by_what_its_calls_launched_alone() -> None:
    # two mm calls, three GEMM kernels: two splits fit by family; elsewhere in the same graph one mm
    # stood alone and launched XMMA twice, so the split that repeats that run is taken, and says so
    calls = [InductorCall(T, "triton_a"), InductorCall(E, "aten::mm"), InductorCall(E, "aten::mm"),
             InductorCall(T, "triton_b"), InductorCall(E, "aten::mm"), InductorCall(T, "triton_c")]
    seg = [_k("triton_a"), _k(SIMT), _k(XMMA), _k(XMMA), _k("triton_b"), _k(XMMA), _k(XMMA), _k("triton_c")]
    assert _match(seg, calls) == [0, None, None, None, 3, 4, 4, 5]  # nothing learned: left alone
    claims = graph_replay_claims(seg, [99] * len(seg), [calls], make_resolver({}))
    assert [c.instance[2] for c in claims] == [0, 1, 2, 2, 3, 4, 4, 5]  # type: ignore[union-attr]
    learned = [c.detail == DETAIL_LEARNED for c in claims]  # type: ignore[union-attr]
    assert learned == [False, True, True, True, False, False, False, False]
    # the evidence decides: where the lone mm launched XMMA once, the split giving the second mm one XMMA
    other = [_k("triton_a"), _k(SIMT), _k(XMMA), _k(XMMA), _k("triton_b"), _k(XMMA), _k("triton_c")]
    claims = graph_replay_claims(other, [99] * len(other), [calls], make_resolver({}))
    assert [c.instance[2] for c in claims[1:4]] == [1, 1, 2]  # type: ignore[union-attr]
    # and where it launched something else, neither split repeats it: the gap stays unexplained
    third = [_k("triton_a"), _k(SIMT), _k(XMMA), _k(XMMA), _k("triton_b"), _k("nvjet_other"), _k("triton_c")]
    claims = graph_replay_claims(third, [99] * len(third), [calls], make_resolver({}))
    assert [c is None for c in claims[1:4]] == [True, True, True]


TOPK = ["void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::TensorInfo<...>)",
        "void at::native::bitonicSortKVInPlace<2, -1, 16, 16, float, long, at::native::GTOp<float, true>>(...)"]
SORT = ["memcpy32_post", "void (anonymous namespace)::elementwise_kernel_with_index<int, "
        "at::native::arange_cuda_out(...)::{lambda()#1}::operator()() const::{lambda(long)#1}>(...)",
        "memcpy32_post", "memcpy32_post",
        "void at::native::radixSortKVInPlace<-2, -1, 128, 32, long, long, unsigned int>(...)"]


def test_a_routers_topk_and_sort_are_split_by_what_a_sort_launches_first() -> None:
    # MoE routing replayed from a graph: topk gathers then sorts its k values; sort copies, fills its
    # index tensor, then sorts. The bitonic sort could serve either call by family; the index fill
    # comes before its own call's sort, which leaves one split
    calls = [InductorCall(T, "triton_a"), InductorCall(E, "aten::topk"), InductorCall(E, "aten::sort"),
             InductorCall(T, "triton_b")]
    seg = [_k("triton_a"), *(_k(n) for n in TOPK + SORT), _k("triton_b")]
    assert _match(seg, calls) == [0, 1, 1, 2, 2, 2, 2, 2, 3]


def test_a_split_k_reduction_never_starts_a_call() -> None:
    calls = [InductorCall(T, "triton_a"), InductorCall(E, "aten::mm"), InductorCall(E, "aten::mm"),
             InductorCall(T, "triton_b")]
    seg = [_k("triton_a"), _k("gemm_x"), _k("gemm_x"), _k("void cublasLt::splitKreduce_kernel<...>"), _k("triton_b")]
    assert _match(seg, calls) == [0, 1, 2, 2, 3]


def test_the_graphed_moes_routing_and_projections_are_placed() -> None:
    # examples/hf_mixtral_moe.py after moe_grouped_experts + cuda_graphs (H200): every kernel placed;
    # the layers' q/k projections and rotary GEMM by what the v projection launched alone
    run = Path(__file__).resolve().parents[2] / "examples/captures/h200/hf_mixtral_moe_grouped/optimized"
    from profiler_core.attribution import attribute_run

    profile = attribute_run(run)
    ops = {op.key: op.name for op in profile.operators}
    named = {k.name.split("<")[0]: ops.get(k.attribution.operator_key or "") for k in profile.kernels
             if "Sort" in k.name or "TopK" in k.name}
    assert named == {"void at::native::sbtopk::gatherTopK": "aten::topk",
                     "void at::native::bitonicSortKVInPlace": "aten::topk",
                     "void at::native::radixSortKVInPlace": "aten::sort"}
    learned = [k for k in profile.kernels if any(e.detail == DETAIL_LEARNED for e in k.attribution.evidence)]
    assert learned and {ops[k.attribution.operator_key] for k in learned} == {"aten::mm"}  # type: ignore[index]
    assert profile.coverage.attributed_time_pct == 100.0 and not profile.unattributed


def test_a_graphed_capture_with_an_nsys_timeline_agrees_and_places_the_graphs_memsets() -> None:
    # ResNet-18 in reduce-overhead mode on the H200, nsys with --cuda-graph-trace=node: the timeline holds
    # every replayed kernel (Kineto's launches, in order), and the graph's memset nodes, which nsys
    # records with the replay's correlation id alone, are placed with the call they precede: cuDNN's
    # convolutions, and the classifier's addmm (cuBLAS's large-K SGEMM zeroes its output, scales, sums)
    from profiler_core.attribution import attribute_run
    from profiler_core.capture.determinism import check_phases, load_phase_launches
    from profiler_core.ingest import read_nsys

    run = Path(__file__).resolve().parents[1] / "data" / "h200_resnet18_graphed_nsys"
    found = load_phase_launches(run, kineto="kineto.json.gz", timeline="timeline.sqlite", counters_csv=None)
    assert len(found.kineto) == len(found.nsys or ()) == 126
    assert check_phases(found, counter_mode="none") == ["nsys"]
    timeline = read_nsys(run / "timeline.sqlite").kernels
    assert sum(k.graph_node_id is not None for k in timeline if k.kind == "kernel") == 124
    memsets = [k for k in timeline if k.kind == "memset"]
    assert len(memsets) == 12 and all(k.graph_node_id is not None for k in memsets)
    profile = attribute_run(run)
    assert profile.capture.timeline_source == "nsys"
    ops = {op.key: op.name for op in profile.operators}
    placed = [ops.get(k.attribution.operator_key or "") for k in profile.kernels if k.name == "CUDA memset"]
    assert sorted(placed) == ["aten::addmm"] * 2 + ["aten::convolution"] * 10
    assert profile.coverage.attributed_time_pct == 100.0 and not profile.unattributed


FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"
ADAM = "void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4>>"


def test_a_replay_of_several_compiled_graphs_reads_each_from_its_own_call() -> None:
    # a step recorded as one graph: forward (ends with an extern mm), eager fill, backward (starts
    # with an extern mm), then the optimizer's eager update; the eager kernels are left alone
    forward = (InductorCall(T, "triton_f0"), InductorCall(E, "aten::addmm"), InductorCall(T, "triton_f1"),
               InductorCall(E, "aten::mm"))
    backward = (InductorCall(E, "aten::mm"), InductorCall(T, "triton_b0"), InductorCall(E, "aten::mm"),
                InductorCall(T, "triton_b1"))
    names = ["triton_f0", "nvjet_a", "triton_f1", "Memset (Unknown)", "nvjet_b", FILL, "nvjet_c", "triton_b0",
             "nvjet_d", "splitKreduce_kernel", "triton_b1", ADAM, ADAM]
    seg = [_k(n) for n in names]
    claims = graph_replay_claims(seg, [99] * len(seg), [forward, backward], make_resolver({}))
    placed = [(c.instance[2], c.instance[3], c.operator) if c else None for c in claims]
    assert placed == [(0, 0, "triton_f0"), (0, 1, "aten::addmm"), (0, 2, "triton_f1"), (0, 3, "aten::mm"),
                      (0, 3, "aten::mm"), None, (1, 0, "aten::mm"), (1, 1, "triton_b0"), (1, 2, "aten::mm"),
                      (1, 2, "aten::mm"), (1, 3, "triton_b1"), None, None]
    # no eager kernel between the two graphs: both edges' calls fit both GEMMs, so neither is placed
    tight = [_k(n) for n in ["triton_f0", "nvjet_a", "triton_f1", "nvjet_b", "nvjet_c", "triton_b0", "nvjet_d",
                             "triton_b1"]]
    claims = graph_replay_claims(tight, [99] * len(tight), [forward, backward], make_resolver({}))
    assert [c is None for c in claims] == [False, False, False, True, True, False, False, False]
    # Triton kernels that two orders of the graphs explain: nothing is read into the replay
    twice = (InductorCall(T, "triton_f0"),)
    thrice = [_k("triton_f0")] * 3
    claims = graph_replay_claims(thrice, [99] * 3, [twice, (*twice, *twice)], make_resolver({}))
    assert claims == [None, None, None]


def _launching_ops(trace: Path) -> dict[str, list[set[str]]]:
    """Per kernel name (memsets as one), the CPU ops around each launch of the first measured
    iteration, read from the raw Kineto JSON: runtime call by correlation, ops by time on its thread."""
    import gzip
    import json

    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    cpu = [e for e in events if e.get("cat") == "cpu_op"]
    runtime = {e["args"]["correlation"]: e for e in events
               if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    gpu = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")), key=lambda e: e["ts"])
    out: dict[str, list[set[str]]] = {}
    for k in gpu[: len(gpu) // 2]:
        r = runtime[k["args"]["correlation"]]
        around = {o["name"] for o in cpu if o["tid"] == r["tid"] and o["ts"] <= r["ts"]
                  and r["ts"] + r["dur"] <= o["ts"] + o["dur"]}
        out.setdefault("Memset" if k["name"].startswith("Memset") else k["name"], []).append(around)
    return out


def test_a_training_step_recorded_as_one_graph_places_its_library_kernels_as_launched_without_it() -> None:
    # the GPT-2 step recorded whole (step_graph_capture) replays forward, loss, backward and AdamW as one
    # graph; its autocast trial, shipped beside it, ran the same compiled code without the graph, so its
    # raw trace says which op launched each GEMM, attention and memset kernel. The call() reading alone:
    # the recording's trace is left out
    from profiler_core.attribution.sources import attribute_files

    root = Path(__file__).resolve().parents[2] / "examples" / "captures" / "h200" / "hf_gpt2_train_step_graph"
    assert read_inductor(root / "optimized" / "inductor").call_sequences == \
        read_inductor(root / "bf16_trial" / "inductor").call_sequences
    reference = _launching_ops(root / "bf16_trial" / "kineto.json.gz")
    profile = attribute_files(kineto=root / "optimized" / "kineto.json.gz", inductor=root / "optimized" / "inductor")
    names = {op.key: op.name for op in profile.operators}
    kernels = sorted(profile.kernels, key=lambda k: k.start_ns)[: len(profile.kernels) // 2]
    seen: dict[str, int] = {}
    placed = 0
    for k in kernels:
        name = "Memset" if k.name.startswith("Memset") else k.name
        nth = seen[name] = seen.get(name, -1) + 1
        if k.attribution.tier is not Tier.CUDA_GRAPH or k.name.startswith("triton_"):
            continue
        assert names[k.attribution.operator_key] in reference[name][nth], k.name  # type: ignore[index]
        placed += 1
    assert placed == 78  # 20 memsets, GEMMs and cuDNN attention kernels per layer and the head's, once each
    # left: the eager kernels the graph recorded (autograd's fills, the fused AdamW update), named
    lost = {k.name.split("<")[0] for k in profile.kernels if k.attribution.tier is Tier.UNATTRIBUTED}
    assert lost == {"void at::native::vectorized_elementwise_kernel",
                    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel"}
    assert 83 < profile.coverage.attributed_time_pct < 84


RECORDED = Path(__file__).resolve().parents[2] / "tests" / "data" / "h200_step_graph_recorded"
SHIPPED_STEP_GRAPH = Path(__file__).resolve().parents[2] / "examples" / "captures" / "h200" / "hf_gpt2_train_step_graph"
SHIPPED_STEP_GRAPH = SHIPPED_STEP_GRAPH / "optimized"
_LAUNCH_WORDS = ("LaunchKernel", "cuLaunch", "MemsetAsync", "MemcpyAsync")


def _raw_events(path: Path) -> list[dict]:
    import gzip
    import json

    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def _recorded_calls(trace: Path) -> list[tuple[str, set[str]]]:
    """Per launch the recording turned into a graph node, in order: the innermost op (by the launch's
    External id) and every op around it on its thread, from the raw Kineto JSON."""
    events = _raw_events(trace)
    ran = {e["args"]["correlation"] for e in events if e.get("cat") == "kernel"}
    calls = sorted((e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")), key=lambda e: e["ts"])
    begin = next(e["ts"] for e in calls if e["name"] == "cudaStreamBeginCapture")
    end = next(e["ts"] for e in calls if e["name"] == "cudaStreamEndCapture")
    cpu = [e for e in events if e.get("cat") in ("cpu_op", "user_annotation")]
    by_id = {e["args"]["External id"]: e["name"] for e in cpu if e.get("cat") == "cpu_op"}
    out = []
    for e in calls:
        if begin < e["ts"] < end and any(w in e["name"] for w in _LAUNCH_WORDS) and e["args"]["correlation"] not in ran:
            around = {o["name"] for o in cpu if o["tid"] == e["tid"] and o["ts"] <= e["ts"] <= o["ts"] + o["dur"]}
            out.append((by_id[e["args"]["External id"]], around))
    return out


@pytest.mark.parametrize("run", [RECORDED, SHIPPED_STEP_GRAPH], ids=["capture", "optimize-run"])
def test_a_step_graphs_traced_recording_places_every_replayed_kernel_as_it_was_launched(run: Path) -> None:
    # GPT-2 training step, bf16_autocast + step_graph_capture, captured on the H200 with the harness
    # tracing the recording (graph_capture.json.gz): the replays' eager kernels, AdamW's fused update
    # and autograd's fills, which no call() names, take the launch at their position in it. Once as
    # a capture of the plan alone, once as the optimize run shipped under examples/
    from profiler_core.attribution import attribute_run
    from profiler_core.attribution.graphs import DETAIL_RECORDED


    recorded = _recorded_calls(run / "graph_capture.json.gz")
    events = _raw_events(run / "kineto.json.gz")
    replays = {e["args"]["correlation"] for e in events if e.get("name") == "cudaGraphLaunch"}
    replayed = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")
                       and e["args"].get("correlation") in replays), key=lambda e: e["ts"])
    assert len(replays) == 2 and len(replayed) == 2 * len(recorded) == 506
    profile = attribute_run(run)
    assert profile.coverage.attributed_time_pct == 100.0
    names = {op.key: op.name for op in profile.operators}
    kernels = {(k.start_ns, k.name): k for k in profile.kernels}
    # the replays' kernels in order (the step's own input copies, outside the graph, left out)
    ordered = [k for k in sorted(profile.kernels, key=lambda k: k.start_ns)
               if k.attribution.tier is not Tier.CUPTI_CORRELATION]
    assert len(ordered) == len(replayed)
    placed_by_recording = 0
    for i, k in enumerate(ordered):
        inner, around = recorded[i % len(recorded)]
        if k.attribution.tier is not Tier.CUDA_GRAPH:
            assert k.name == inner  # a Triton kernel placed by name: launched by the call named after it
            continue
        name = names[k.attribution.operator_key]  # type: ignore[index]
        if any(e.detail == DETAIL_RECORDED for e in k.attribution.evidence):
            placed_by_recording += 1
            assert name == inner, (k.name, name, inner)
        elif not k.name.startswith("triton_"):  # an extern call of Inductor's call(): the op around its launch
            assert name in around, (k.name, name, around)
    assert placed_by_recording == 2 * 15  # per replay: 5 AdamW launches, 10 fills
    # each kernel's phase is where its launch ran in the recorded step: inside the optimizer's step,
    # inside autograd's engine, else the forward
    phases = {op.key: op.phase for op in profile.operators}
    for i, k in enumerate(ordered):
        _, around = recorded[i % len(recorded)]
        want = ("optimizer" if any(n.startswith("Optimizer.step#") for n in around) else
                "backward" if any(n.startswith("autograd::engine::evaluate_function:") for n in around) else "forward")
        assert phases[k.attribution.operator_key] == want, (k.name, want)  # type: ignore[index]
    adam = [k for k in kernels.values() if "FusedAdamMathFunctor" in k.name]
    assert len(adam) == 8 and {k.module_path for k in adam} == {"optimizer.AdamW"}
    assert {names[k.attribution.operator_key] for k in adam} == {"aten::_fused_adamw_"}  # type: ignore[index]
    assert sum(k.duration_ns for k in profile.kernels if k.module_path is not None) >= \
        0.99 * sum(k.duration_ns for k in profile.kernels)
    # without the recording's trace, the same capture reads as the shipped step graph does
    from profiler_core.attribution.sources import attribute_files

    bare = attribute_files(kineto=run / "kineto.json.gz", inductor=run / "inductor")
    assert 83 < bare.coverage.attributed_time_pct < 84


def test_a_recording_that_repeats_no_replay_is_named_and_left_unused(tmp_path: Path) -> None:
    import gzip
    import json

    from profiler_core.attribution.sources import attribute_files

    doc = json.loads(gzip.decompress((RECORDED / "graph_capture.json.gz").read_bytes()))
    last = max((e for e in doc["traceEvents"] if e.get("name") == "cudaLaunchKernel"), key=lambda e: e["ts"])
    doc["traceEvents"].remove(last)  # one launch fewer than each replay holds
    short = tmp_path / "graph_capture.json.gz"
    short.write_bytes(gzip.compress(json.dumps(doc).encode()))
    profile = attribute_files(kineto=RECORDED / "kineto.json.gz", inductor=RECORDED / "inductor", graph_capture=short)
    assert 83 < profile.coverage.attributed_time_pct < 84
    assert any(w.startswith("graph_capture.json.gz: its 1 recording(s) (of [252] launches) repeat no graph replay")
               for w in profile.warnings)
    broken = tmp_path / "cut.json.gz"
    broken.write_bytes((RECORDED / "graph_capture.json.gz").read_bytes()[:5000])
    from profiler_core.errors import ArtifactFormatError

    with pytest.raises(ArtifactFormatError, match="cut.json.gz"):
        attribute_files(kineto=RECORDED / "kineto.json.gz", graph_capture=broken)
