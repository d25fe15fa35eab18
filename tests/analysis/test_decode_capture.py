"""decode_loop on a real generate() capture: a transformers Llama on the H200, eager attention."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler_core.analysis import diagnose
from profiler_core.analysis.decode_loop import detect_decode_loop
from profiler_core.analysis.profile_view import ProfileView
from profiler_core.attribution import attribute_run

CAPTURE = Path(__file__).parents[2] / "examples" / "captures" / "h200" / "hf_llama_generate" / "baseline"


@pytest.fixture(scope="module")
def profile() -> object:
    return attribute_run(CAPTURE)


@pytest.mark.slow
def test_the_decode_loop_is_read_from_hand_written_attention(profile: object) -> None:
    # transformers' eager attention: score bmm -> softmax [8, 8, q, k] -> value bmm, 4 layers per forward
    view = ProfileView(profile)  # type: ignore[arg-type]
    loop = detect_decode_loop(view, view.ops_in_order)
    assert loop is not None
    assert (loop.iterations, loop.layers, loop.batch, loop.prompt_len, loop.decode_forwards) == (2, 4, 8, 64, 31)
    assert loop.kv_growing and loop.kv_lengths == (65, 95) and loop.new_tokens == 32
    assert 0 < loop.prefill_ns < loop.decode_ns < loop.step_ns * 1.01
    assert loop.time_per_output_token_ns == pytest.approx(loop.decode_ns / 31)
    assert loop.busy_pct < 25.0  # the GPU idles between the per-token launches


@pytest.mark.slow
def test_diagnose_names_the_decode_loop_first_and_no_recurrence(profile: object) -> None:
    report = diagnose(profile)  # type: ignore[arg-type]
    rules = [f.rule_id for f in report.findings]
    assert rules[0] == "decode_loop" and "recurrent_region" not in rules
    first = report.findings[0]
    assert first.transformation == "static_kv_cache"
    facts = " ".join(first.evidence.facts)
    assert "time per output token" in facts and "prefill" in facts and "31 decode forwards" in facts
    syncs = next(f for f in report.findings if f.rule_id == "host_syncs")
    # generate()'s own reads (its stopping check) sit in the model's methods, outside every module
    # call: the model's own code, not code without a module
    assert any(fact.endswith("per step under the model's own code") for fact in syncs.evidence.facts)
    assert not any("code the capture recorded no module for" in fact for fact in syncs.evidence.facts)
    assert not any(fact.endswith("under ?") for fact in syncs.evidence.facts)


def _raw_qkv_triples() -> int:
    """From the raw Kineto events, without the project's code: Q, K and V projections of one layer,
    aten::linear calls in a row reading one input, weights [512, 512], [256, 512], [256, 512]."""
    import gzip
    import json

    trace = json.load(gzip.open(CAPTURE / "kineto.json.gz"))
    linears = sorted((e for e in trace["traceEvents"] if e.get("name") == "aten::linear" and e.get("ph") == "X"),
                     key=lambda e: e["ts"])
    x = [tuple(e["args"]["Input Dims"][0]) for e in linears]
    w = [tuple(e["args"]["Input Dims"][1]) for e in linears]
    return sum(1 for i in range(len(w) - 2)
               if w[i] == (512, 512) and w[i + 1] == w[i + 2] == (256, 512) and x[i] == x[i + 1] == x[i + 2])


@pytest.mark.slow
def test_grouped_query_projections_are_grouped_by_their_shared_input(profile: object) -> None:
    # Q is twice as wide as K and V (8 query heads, 4 key/value heads): grouped by the input they read,
    # not by equal weights, each layer's three projections form one group (before: K and V alone)
    from collections import Counter

    from profiler_core.analysis.patterns import parallel_projection_groups

    view = ProfileView(profile)  # type: ignore[arg-type]
    ops = view.ops_in_order
    groups = parallel_projection_groups(view, ops, min_size=2, max_size=4)
    triples = [g for g in groups if len(g) == 3]
    assert len(triples) == _raw_qkv_triples() == 4 * 32 * 2  # layers x forwards x measured steps
    widths = Counter(tuple(ops[i].input_shapes[1][1] for i in g) for g in triples)
    assert widths == Counter({(512, 256, 256): len(triples)})


def _raw_groups_from_output_code(run: Path) -> dict[int, int]:
    """From Inductor's output code, without the project's code: per group size, how many activation
    buffers two or more extern mm/addmm calls read (the capture's one compiled graph)."""
    import re
    from collections import Counter

    text = (run / "inductor" / "output_code.log").read_text()
    readers: Counter[str] = Counter()
    for _kind, args in re.findall(r"extern_kernels\.(addmm|mm)\((.*)\)\s*$", text, flags=re.M):
        views = re.findall(r"reinterpret_tensor\((\w+), \((\d+), (\d+)\)", args)
        buffer, _, k = views[0]  # mm(activation, weight); addmm(bias, activation, weight): the bias is no view
        if buffer.startswith("buf") and k != "1":  # an intermediate, not an outer product (K = 1)
            readers[buffer] += 1
    return dict(Counter(n for n in readers.values() if n >= 2))


@pytest.mark.slow
def test_qwen2_projections_group_by_module_across_the_rotary_kernels() -> None:
    # compiled Qwen2 (grouped-query attention): Inductor launches layer 0's position table (an outer
    # product) between Q and K and the rotary kernel between K and V; each layer's Q, K, V and its
    # gate/up pair still read one buffer in the output code, and group as such (2 measured iterations)
    from collections import Counter

    from profiler_core.analysis.patterns import parallel_projection_groups

    run = Path(__file__).parents[2] / "examples" / "captures" / "h200" / "hf_qwen2_decoder" / "baseline"
    view = ProfileView(attribute_run(run))
    groups = parallel_projection_groups(view, view.ops_in_order, min_size=2, max_size=4)
    raw = _raw_groups_from_output_code(run)
    assert raw == {3: 6, 2: 6}  # six layers: Q/K/V and gate/up each read one buffer
    assert Counter(len(g) for g in groups) == Counter({size: 2 * n for size, n in raw.items()})


@pytest.mark.slow
def test_a_static_cache_decode_step_replayed_as_a_graph_is_still_the_decode_loop() -> None:
    # the same workload with static_kv_cache kept: eager prefill (hand-written attention), then the
    # compiled decode step per token, replayed as a CUDA graph (its SDPA calls record no shapes)
    graphed = attribute_run(CAPTURE.parent / "optimized")
    view = ProfileView(graphed)
    loop = detect_decode_loop(view, view.ops_in_order)
    assert loop is not None
    assert (loop.iterations, loop.layers, loop.batch, loop.prompt_len, loop.decode_forwards) == (2, 4, 8, 64, 31)
    assert not loop.kv_growing and loop.kv_lengths == (0, 0)  # the compiled calls' key length is not recorded
    report = diagnose(graphed)
    rules = [f.rule_id for f in report.findings]
    assert rules[0] == "decode_loop" and "recurrent_region" not in rules
    first = report.findings[0]
    assert first.transformation is None  # already static and graphed: nothing left to license
    assert "replays as a CUDA graph" in first.bottleneck
    assert any("fixed-size cache" in fact for fact in first.evidence.facts)


@pytest.mark.slow
@pytest.mark.parametrize(("run", "shortcut"), [
    ("gpt2/baseline", True),  # hand-written attention over the whole sequence: no query one token long
    ("tv_resnet18/baseline", True),  # no attention
    ("sdpa_attention/optimized", False),  # fused attention: its calls are read
    ("hf_qwen2_decoder/baseline", False),
    ("hf_llama_generate/baseline", False),  # one-token softmax scores: the decode forwards
])
def test_a_profile_without_a_one_token_query_has_no_decode_loop_without_reading_its_calls(
        run: str, shortcut: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from profiler_core.analysis import decode_loop

    prof = attribute_run(CAPTURE.parents[1] / run)
    view = ProfileView(prof)
    assert decode_loop._no_decode_step(view, view.ops_in_order) is shortcut
    found = detect_decode_loop(view, view.ops_in_order)
    assert (found is not None) == run.startswith("hf_llama_generate")
    if shortcut:  # told without reading a single attention call
        with monkeypatch.context() as mp:
            mp.setattr(decode_loop, "attention_calls", lambda *a, **k: pytest.fail("attention calls read"))
            assert detect_decode_loop(view, view.ops_in_order) is None
    monkeypatch.setattr(decode_loop, "_no_decode_step", lambda view, ops: False)
    assert detect_decode_loop(view, view.ops_in_order) == found  # what reading every call gives
