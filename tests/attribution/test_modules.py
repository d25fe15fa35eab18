"""Module paths: eager (Python tracer + module map, real CPU capture) and compiled (Inductor provenance, H200)."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from profiler_core.analysis.modules import module_rollup
from profiler_core.attribution import attribute_run
from profiler_core.attribution.modules import ModuleSpans, read_module_map
from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest import read_kineto
from profiler_core.ingest.torch_trace import common_module, module_of_token, pre_grad_node_modules
from profiler_core.schema import Profile
from tests.conftest import DATA, REPO

CPU = DATA / "cpu_modules"
GPT2 = REPO / "examples" / "captures" / "h200" / "gpt2" / "baseline"


@pytest.fixture(scope="module")
def cpu_events():  # type: ignore[no-untyped-def]
    return read_kineto(CPU / "kineto.json.gz", launches_only=True)


def test_eager_operators_land_in_the_module_that_called_them(cpu_events) -> None:  # type: ignore[no-untyped-def]
    spans = ModuleSpans(cpu_events.module_spans, read_module_map(CPU / "modules.json"))
    top = [op for op in cpu_events.cpu_ops if op.name == "aten::linear"]
    where = Counter(spans.op_path(op) for op in top)
    # small GPT-2: 2 layers x (q, k, v, out, fc, proj) + the LM head, two measured iterations
    expected = {f"h.{i}.{m}" for i in range(2) for m in (
        "attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")} | {"lm_head"}
    assert set(where) == expected and all(n == 2 for n in where.values())
    # the weight a linear reads says which projection it is: c_fc widens 64 -> 256
    fc = [op for op in top if spans.op_path(op) == "h.1.mlp.c_fc"]
    assert fc and all(op.input_shapes[1] == (256, 64) for op in fc)
    softmax = {spans.op_path(op) for op in cpu_events.cpu_ops if op.name == "aten::softmax"}
    assert softmax == {"h.0.attn", "h.1.attn"}


def test_eager_rollup_compares_layers_side_by_side(cpu_events) -> None:  # type: ignore[no-untyped-def]
    spans = ModuleSpans(cpu_events.module_spans, read_module_map(CPU / "modules.json"))
    ops_by_layer: dict[str, Counter] = defaultdict(Counter)
    for op in cpu_events.cpu_ops:
        path = spans.op_path(op)
        if path and path.startswith("h."):
            ops_by_layer[".".join(path.split(".")[:2])][op.name] += 1
    assert set(ops_by_layer) == {"h.0", "h.1"}
    assert ops_by_layer["h.0"] == ops_by_layer["h.1"]  # repeated blocks run the same operators


def test_without_a_map_the_tracer_labels_form_the_path(cpu_events) -> None:  # type: ignore[no-untyped-def]
    spans = ModuleSpans(cpu_events.module_spans)
    paths = {spans.op_path(op) for op in cpu_events.cpu_ops if op.name == "aten::linear"}
    assert "Block_1.MLP_1.Linear_10" in paths and "Linear_12" in paths


def test_a_broken_module_map_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "modules.json"
    bad.write_text('{"modules": [["Linear"]]}')
    with pytest.raises(ArtifactFormatError, match="not a module map"):
        read_module_map(bad)


def test_dynamo_parameter_names_give_module_paths() -> None:
    assert module_of_token("modules_h_modules_0_modules_attn_modules_q_proj_parameters_weight_") == "h.0.attn.q_proj"
    assert module_of_token("modules_h_modules_3_modules_attn_buffers_bias_") == "h.3.attn"
    assert module_of_token("modules_wte_parameters_weight_") == "wte"
    assert module_of_token("idx_") is None
    assert common_module(["h.0.attn.q_proj", "h.0.mlp"]) == "h.0" and common_module(["h.0", "wte"]) == ""
    graph = [
        '        linear: "f32[4]" = torch._C._nn.linear(x, l_self_modules_h_modules_0_modules_attn_modules_v_proj_'
        'parameters_weight_, None)',
        '        matmul: "f32[4]" = att @ v',
        '        linear_3: "f32[4]" = torch._C._nn.linear(y, l_self_modules_h_modules_0_modules_attn_modules_c_proj_'
        'parameters_weight_, None)',
    ]
    assert pre_grad_node_modules(graph) == {"linear": "h.0.attn.v_proj", "matmul": "h.0.attn",
                                            "linear_3": "h.0.attn.c_proj"}


@pytest.fixture(scope="module")
def gpt2() -> Profile:
    return attribute_run(GPT2)


def test_compiled_kernels_carry_their_module_from_inductor_provenance(gpt2: Profile) -> None:
    assert all(k.module_path is not None for k in gpt2.kernels)
    mm = [op for op in gpt2.operators if op.name == "aten::mm"]
    first = [op.module_path for op in mm[:6]]
    assert first == ["h.0.attn.q_proj", "h.0.attn.k_proj", "h.0.attn.v_proj", "h.0.attn.c_proj",
                     "h.0.mlp.c_fc", "h.0.mlp.c_proj"]
    # per iteration: 12 layers x 6 projections, and the LM head (its weight is tied to wte)
    assert Counter(op.module_path.split(".")[0] for op in mm) == {"h": 144, "wte": 2}
    softmax = [op.module_path for op in gpt2.operators if op.name == "aten::_softmax"]
    assert softmax == [f"h.{i}.attn" for i in range(12)] * 2


def test_rollup_puts_the_twelve_layers_side_by_side(gpt2: Profile) -> None:
    rollup = module_rollup(gpt2)
    assert rollup.coverage_pct == pytest.approx(100.0)
    root = rollup.nodes[""]
    assert root.duration_ns == sum(op.duration_ns for op in gpt2.operators)
    layers = next(g for g in rollup.groups if g.parent == "h")
    assert [b.index for b in layers.blocks] == list(range(12))
    assert layers.outliers == []  # identical layers take the same time (within 20%)
    h0 = rollup.nodes["h.0"]
    assert h0.duration_ns == rollup.nodes["h.0.attn"].duration_ns + rollup.nodes["h.0.mlp"].duration_ns + h0.self_ns
    per_layer = 4 * 2 * 512 * 768 * 768 + 2 * 2 * 512 * 768 * 3072 + 2 * 2 * 48 * 128 * 128 * 64
    assert h0.flops == pytest.approx(2 * per_layer)  # two measured iterations
    assert h0.top_class == "gemm" and "of roofline" in h0.bottleneck
    assert [n.path for n in rollup.tree(max_depth=1)][:2] == ["", "h"]


def test_rollup_counters_are_each_nodes_kernels_aggregated(gpt2: Profile) -> None:
    # the rollup aggregates every node's kernels in one pass over the view's counter matrix; each
    # node holds what aggregating its own kernels' dicts gives
    from profiler_core.analysis.modules import ROLLUP_COUNTERS
    from profiler_core.attribution.aggregate import aggregate_samples

    rollup = module_rollup(gpt2)
    kernels_of: dict[str, list[int]] = defaultdict(list)
    for op in gpt2.operators:
        if op.module_path is not None:
            parts = op.module_path.split(".") if op.module_path else []
            for path in ["", *(".".join(parts[: i + 1]) for i in range(len(parts)))]:
                kernels_of[path].extend(op.kernel_ids)
    assert set(kernels_of) == set(rollup.nodes) and len(rollup.nodes) > 30
    for path, node in rollup.nodes.items():
        ks = [gpt2.kernels[i] for i in kernels_of[path]]
        assert node.counters == aggregate_samples(((k.counters, k.duration_ns) for k in ks if k.counters),
                                                  ROLLUP_COUNTERS), (path, len(ks))
    assert sum(bool(n.counters) for n in rollup.nodes.values()) > 30


def _resnet18_conv_weights() -> dict[str, list[int]]:
    """torchvision resnet18's convolutions and their weight shapes, written from the architecture."""
    weights = {"conv1": [64, 3, 7, 7]}
    c_in = 64
    for stage, c in enumerate((64, 128, 256, 512), start=1):
        for block in (0, 1):
            first_in = c_in if block == 0 else c
            weights[f"layer{stage}.{block}.conv1"] = [c, first_in, 3, 3]
            weights[f"layer{stage}.{block}.conv2"] = [c, c, 3, 3]
            if block == 0 and first_in != c:
                weights[f"layer{stage}.{block}.downsample.0"] = [c, first_in, 1, 1]
        c_in = c
    return weights


def test_cudnn_convolutions_of_a_compiled_cnn_carry_their_conv_module() -> None:
    # Inductor's extern call `extern_kernels.convolution` launches aten::cudnn_convolution (an opaque
    # library call): its kernels take the module of the extern call that launched them
    weights = _resnet18_conv_weights()
    prof = attribute_run(REPO / "examples" / "captures" / "h200" / "tv_resnet18" / "baseline")
    convs = [o for o in prof.operators if o.name == "aten::cudnn_convolution"]
    assert len(convs) == 2 * len(weights)  # every convolution of both measured iterations
    assert Counter(o.module_path for o in convs) == dict.fromkeys(weights, 2)
    assert all(o.input_shapes and o.input_shapes[1] == weights[o.module_path] for o in convs)
    total = sum(k.duration_ns for k in prof.kernels)
    assert sum(k.duration_ns for k in prof.kernels if k.module_path is not None) >= 0.99 * total


def test_cudnn_attention_of_a_compiled_graph_carries_the_module_of_its_aten_call() -> None:
    # `torch.ops.aten._scaled_dot_product_cudnn_attention.default` in call() launches
    # aten::_cudnn_attention_forward: the attention's kernels (30% of the step) take that call's module
    prof = attribute_run(REPO / "examples" / "captures" / "h200" / "sdpa_attention" / "optimized")
    attention = [k for k in prof.kernels if (k.attribution.operator_key or "").startswith("aten::_cudnn_attention")]
    assert attention and all(k.module_path == "" for k in attention)  # the layer is the model itself
    total = sum(k.duration_ns for k in prof.kernels)
    assert sum(k.duration_ns for k in attention) > 0.25 * total
    assert sum(k.duration_ns for k in prof.kernels if k.module_path is not None) >= 0.98 * total


LSTM_BREAK = DATA / "h200_lstm_graph_break"


def _raw_kernel_modules(run: Path) -> Counter:
    """Reference from the raw Kineto records, without the project's readers: each kernel's launch
    (its correlation id, a runtime or driver call) lies inside ``nn.Module: <label>`` calls on its
    thread; the innermost one, named by modules.json, is its module. Counted per module path (None:
    no module call open)."""
    events = json.loads(gzip.decompress((run / "kineto.json.gz").read_bytes()))["traceEvents"]
    names = {f"{c}_{i}": p for c, i, p in json.loads((run / "modules.json").read_text())["modules"]}
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    spans = [e for e in events if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")]
    found: Counter = Counter()
    for k in (e for e in events if e.get("cat") == "kernel"):
        launch = launches[k["args"]["correlation"]]
        open_calls = [s for s in spans if s["tid"] == launch["tid"] and s["ts"] <= launch["ts"] <= s["ts"] + s["dur"]]
        inner = min(open_calls, key=lambda s: s["dur"], default=None)
        found[names.get(inner["name"].removeprefix("nn.Module: ")) if inner else None] += 1
    return found


def test_a_model_dynamo_gave_up_on_keeps_its_module_paths() -> None:
    # compile mode default, but Dynamo runs the LSTM eagerly: the harness traced its module calls
    profile = attribute_run(LSTM_BREAK)
    got = Counter(k.module_path for k in profile.kernels)
    reference = _raw_kernel_modules(LSTM_BREAK)
    assert got == reference
    assert set(got) == {"lstm", "head"} and got["lstm"] > 1000  # cuDNN's RNN kernels, then the head's GEMM


LLAMA_GENERATE = DATA / "h200_llama_generate_small"


def _raw_generate_modules(run: Path) -> Counter:
    """Reference from the raw records, without the project's readers: a kernel's launch inside an
    ``nn.Module`` call takes the innermost one's path (modules.json); a launch outside every module
    call but inside a call of one of the model's methods listed in modules.json (the tracer names it
    ``<file tail>(<line>): <name>``) is the model's own, ``""``; else None."""
    events = json.loads(gzip.decompress((run / "kineto.json.gz").read_bytes()))["traceEvents"]
    mapped = json.loads((run / "modules.json").read_text())
    names = {f"{c}_{i}": p for c, i, p in mapped["modules"]}
    methods = {(file, name) for file, name in mapped["methods"]}
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    spans = [e for e in events if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")]

    def is_method(label: str) -> bool:
        where, _, fn = label.rpartition("): ")
        tail = where.rpartition("(")[0]
        return any(name == fn and file.endswith("/" + tail) for file, name in methods)

    calls = [e for e in events if e.get("cat") == "python_function" and "): " in e["name"] and is_method(e["name"])]
    found: Counter = Counter()
    for k in (e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")):
        launch = launches.get(k["args"].get("correlation"))
        if launch is None:
            found["no launch"] += 1
            continue

        def inside(s: dict, t: float = launch["ts"], tid: int = launch["tid"]) -> bool:
            return s["tid"] == tid and s["ts"] <= t <= s["ts"] + s["dur"]

        inner = min((s for s in spans if inside(s)), key=lambda s: s["dur"], default=None)
        if inner is not None:
            found[names.get(inner["name"].removeprefix("nn.Module: "))] += 1
        else:
            found["" if any(inside(c) for c in calls) else None] += 1
    return found


def test_generate_token_selection_is_the_models_own_work() -> None:
    # compile mode default, but generate() calls the plain module: traced as eager code
    profile = attribute_run(LLAMA_GENERATE)
    got = Counter(k.module_path for k in profile.kernels)
    reference = _raw_generate_modules(LLAMA_GENERATE)
    assert "no launch" not in reference and got == reference
    assert got[""] > 100 and sum(n for p, n in got.items() if p and p.startswith("model.layers.")) > 500
    placed = sum(k.duration_ns for k in profile.kernels if k.module_path is not None)
    assert placed >= 0.95 * sum(k.duration_ns for k in profile.kernels)


def test_the_enclosing_call_is_found_however_many_calls_ended_inside_it() -> None:
    # a generate() call opens once, then every decode step calls the model's helper methods and
    # its layers: an op after thousands of such calls is still inside generate() (the model's own
    # work, ""), and one in the model's root between two thousand layer calls is still at the model
    from profiler_core.attribution.modules import ModuleSpans
    from profiler_core.records import ModuleSpan

    n = 3000
    generate = ModuleSpan("utils.py(2394): generate", 0, 10 * n + 100, 1)
    helpers = [ModuleSpan("utils.py(10): _update_model_kwargs_for_generation", 10 * i + 1, 10 * i + 2, 1)
               for i in range(n)]
    root = ModuleSpan("Net_0", 5, 10 * n + 50, 1)
    layers = [ModuleSpan(f"Linear_{i}", 10 * i + 3, 10 * i + 4, 1) for i in range(n)]
    names = {"Net_0": "", **{f"Linear_{i}": f"layers.{i}" for i in range(n)}}
    spans = ModuleSpans([root, *layers], names, [generate, *helpers])
    assert spans.path_at(1, 10 * n + 10) == ""  # in the root, after every layer call
    assert spans.path_at(1, 10 * (n - 1) + 3) == f"layers.{n - 1}"
    assert spans.path_at(1, 10 * n + 80) == ""  # outside the root, inside generate()
    assert spans.path_at(1, 10 * n + 200) is None  # after generate()
    assert spans.path_at(2, 10) is None  # another thread
    bare = ModuleSpans([root, *layers])  # no map: the labels below the root
    assert bare.path_at(1, 13) == "Linear_1" and bare.path_at(1, 10 * n + 10) == ""
    # a call that begins as its sibling ends (ends touching) is not inside that sibling
    touching = ModuleSpans([ModuleSpan("Net_0", 0, 100, 1), ModuleSpan("A_0", 10, 20, 1),
                            ModuleSpan("B_0", 20, 30, 1)])
    assert touching.path_at(1, 25) == "B_0" and touching.path_at(1, 15) == "A_0"
    assert touching.path_at(1, 50) == ""
