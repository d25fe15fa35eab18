"""Module paths of backward, optimizer and attention kernels on shipped H200 captures.

The references are read from the raw Kineto records here: which kernels a backward op
(``Sequence number`` + ``Fwd thread id``) or an ``Optimizer.*#AdamW.*`` range launched, and the
kernel time of the whole trace.
"""

from __future__ import annotations

import gzip
import json
import re
import tarfile
from pathlib import Path
from typing import Any

import pytest

from profiler_core.attribution import attribute_run
from profiler_core.attribution.module_links import optimizer_path
from profiler_core.schema import Profile
from tests.conftest import REPO

H200 = REPO / "examples" / "captures" / "h200"
BERT = H200 / "hf_bert_train" / "baseline"
QWEN = H200 / "hf_qwen2_decoder" / "baseline"


def _raw_kernels(run: Path) -> list[dict[str, Any]]:
    """Kineto's kernel events in launch order, each with the phase its launch ran in."""
    events = json.loads(gzip.decompress((run / "kineto.json.gz").read_bytes()))["traceEvents"]
    ops = {e["args"]["External id"]: e for e in events
           if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    backward = [e for e in events if e.get("cat") == "cpu_op" and e["args"].get("Fwd thread id")]
    optim = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("Optimizer.")]

    def inside(op: dict[str, Any], spans: list[dict[str, Any]]) -> dict[str, Any] | None:
        return next((s for s in spans if s["tid"] == op["tid"] and s["ts"] <= op["ts"] <= s["ts"] + s["dur"]), None)

    out = []
    for e in sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["args"]["correlation"]):
        op = ops.get(e["args"].get("External id"))
        phase = "forward"
        if op is not None and inside(op, backward) is not None:
            phase = "backward"
        elif op is not None and (rng := inside(op, optim)) is not None:
            phase = "optimizer:" + rng["name"].split("#")[1].split(".")[0]
        out.append({"name": e["name"], "dur_ns": round(e["dur"] * 1000), "phase": phase})
    return out


@pytest.fixture(scope="module")
def bert() -> tuple[Profile, list[dict[str, Any]]]:
    return attribute_run(BERT), _raw_kernels(BERT)


def _paired(profile: Profile, raw: list[dict[str, Any]]) -> list[tuple[Any, dict[str, Any]]]:
    kernels = [k for k in profile.kernels if k.kind == "kernel"]
    assert [k.name for k in kernels] == [r["name"] for r in raw]  # one launch order
    return list(zip(kernels, raw, strict=True))


def test_optimizer_range_names_the_optimizer() -> None:
    assert optimizer_path("Optimizer.step#AdamW.step") == "optimizer.AdamW"
    assert optimizer_path("Optimizer.zero_grad#SGD.zero_grad") == "optimizer.SGD"
    assert optimizer_path("ProfilerStep#3") is None


@pytest.mark.slow
def test_training_step_has_a_module_path_for_95pct_of_kernel_time(bert) -> None:  # type: ignore[no-untyped-def]
    profile, raw = bert
    pairs = _paired(profile, raw)
    total = sum(r["dur_ns"] for r in raw)
    covered = sum(r["dur_ns"] for k, r in pairs if k.module_path is not None)
    assert covered / total >= 0.95
    # the phases the raw records name: each one is covered
    backward = [(k, r) for k, r in pairs if r["phase"] == "backward"]
    optim = [(k, r) for k, r in pairs if r["phase"].startswith("optimizer:")]
    assert len(backward) > 100 and len(optim) > 10
    assert all(k.module_path is not None and not k.module_path.startswith("optimizer") for k, _ in backward)
    assert all(k.module_path == "optimizer." + r["phase"].split(":")[1] for k, r in optim)


def _layers(paths: list[str | None]) -> list[int]:
    """The encoder layer each path names, in order, with repeats of one layer collapsed."""
    out: list[int] = []
    for path in paths:
        found = re.match(r"bert\.encoder\.layer\.(\d+)\.", path or "")
        if found and (not out or out[-1] != int(found.group(1))):
            out.append(int(found.group(1)))
    return out


@pytest.mark.slow
def test_backward_kernels_run_in_their_layers_in_reverse(bert) -> None:  # type: ignore[no-untyped-def]
    """Inductor maps no call of a backward graph to a module; the inputs each call reads (a layer's
    weight, an activation its forward saved) place it. The raw records say which kernels are the
    backward's; the layers must come in the reverse of the forward's order, each once per step."""
    profile, raw = bert
    pairs = _paired(profile, raw)
    forward = _layers([k.module_path for k, r in pairs if r["phase"] == "forward"])
    backward = _layers([k.module_path for k, r in pairs if r["phase"] == "backward"])
    assert forward == [0, 1, 2, 3, 4, 5] * 2  # two measured steps
    # a layer's output norm is differentiated once the next layer's input gradient is summed, which
    # Inductor schedules between that layer's kernels: the backward steps between neighbours only
    assert list(dict.fromkeys(backward)) == [5, 4, 3, 2, 1, 0]
    assert all(abs(a - b) == 1 or (a, b) == (0, 5) for a, b in zip(backward, backward[1:], strict=False))
    assert backward.count(0) >= 2 and backward[-1] == 0
    # the GEMMs that read each layer's value weight: its projection forward, its input's gradient backward
    # (the weight's gradient reads the layer's input, which the query, key and value share)
    for phase in ("forward", "backward"):
        gemms = [k.module_path for k, r in pairs if r["phase"] == phase and k.module_path
                 and k.module_path.endswith(".attention.self.value") and "gemm" in k.name]
        layers = [f"bert.encoder.layer.{i}.attention.self.value" for i in range(6)]
        assert gemms == (layers if phase == "forward" else layers[::-1]) * 2


@pytest.mark.slow
def test_a_tied_weight_does_not_pull_its_readers_to_the_root(bert) -> None:  # type: ignore[no-untyped-def]
    """The MLM decoder reuses the word embeddings' weight: its GEMM sits with the decoder, not at ''."""
    profile, raw = bert
    pairs = _paired(profile, raw)
    decoder = max((k for k, r in pairs if r["phase"] == "forward"), key=lambda k: k.duration_ns)
    assert decoder.module_path == "cls.predictions.decoder"


@pytest.mark.slow
def test_graph_replayed_training_step_has_backward_and_optimizer_paths() -> None:
    """The GPT-2 step compiled whole and replayed as CUDA graphs: backward and the compiled AdamW."""
    profile = attribute_run(H200 / "hf_gpt2_train" / "optimized")
    ops = {op.key: op for op in profile.operators}
    by_phase: dict[str | None, list[Any]] = {}
    for k in profile.kernels:
        op = ops.get(k.attribution.operator_key) if k.attribution and k.attribution.operator_key else None
        by_phase.setdefault(op.phase if op else None, []).append(k)
    time = sum(k.duration_ns for k in profile.kernels)
    covered = sum(k.duration_ns for k in profile.kernels if k.module_path is not None)
    assert covered / time > 0.95
    update = sum(k.duration_ns for k in by_phase["optimizer"])
    assert sum(k.duration_ns for k in by_phase["optimizer"]
               if k.module_path == "optimizer.param_groups.0") > 0.95 * update
    backward = [k.module_path for k in by_phase["backward"]]
    layers = [int(m.group(1)) for p in backward if (m := re.match(r"transformer\.h\.(\d+)\.", p or ""))]
    assert layers and layers[0] == 3 and sorted(set(layers)) == [0, 1, 2, 3]


@pytest.mark.slow
def test_attention_sits_in_its_layer_self_attn() -> None:
    profile = attribute_run(QWEN)
    code = (QWEN / "inductor" / "output_code.log").read_text()
    layers = len(re.findall(r"aten\._scaled_dot_product_efficient_attention\.default\(", code))
    attn = [k for k in profile.kernels if k.name.startswith("fmha_")]
    assert layers == 6 and len(attn) == 2 * layers  # two measured iterations
    assert [k.module_path for k in attn] == [f"model.layers.{i % layers}.self_attn" for i in range(len(attn))]


def test_a_frozen_graph_names_its_parameters_flat_and_still_gets_module_paths() -> None:
    # GPT-2 compiled with Inductor's freezing (H200): the pre-grad graph lifts parameters under flattened
    # names (`l__self___h_0_attn_q_proj_weight`), whose underscores join path segments and sit inside them
    # alike; read with the attribute names the graph's code comments call on self (`self.ln_1(x)`), every
    # kernel gets a module path, and each layer's attention and MLP kernels sit in that layer
    profile = attribute_run(REPO / "examples" / "captures" / "h200" / "gpt2" / "freezing")
    total = sum(k.duration_ns for k in profile.kernels)
    placed = sum(k.duration_ns for k in profile.kernels if k.module_path is not None)
    assert placed / total > 0.99
    paths = {k.module_path for k in profile.kernels}
    assert {f"h.{n}.attn" for n in range(12)} <= paths and {f"h.{n}.mlp" for n in range(12)} <= paths
    assert not any(p and re.search(r"\bln\.\d", p) for p in paths)  # `ln_1` is one module, not a list `ln`


def test_flat_parameter_names_split_on_the_codes_attribute_names() -> None:
    from profiler_core.ingest.torch_trace import _flat_token, module_of_token

    names = {"attn", "q_proj", "ln_1", "mlp", "c_fc", "bias", "wte"}

    def path(flat: str) -> str | None:
        token = _flat_token(flat, names)
        return module_of_token(token) if token else None

    assert path("h_0_attn_q_proj_weight") == "h.0.attn.q_proj"
    assert path("h_10_ln_1_bias") == "h.10.ln_1"  # an attribute the code names beats a list `ln` indexed 1
    assert path("h_3_attn_bias") == "h.3.attn"  # a buffer named like an attribute is still the leaf
    assert path("wte_weight") == "wte"
    assert path("mystery_weight") is None  # nothing to split on: no path rather than a guess


def _frame_kernels(run: Path, co_name: str) -> set[str]:
    """The generated kernels of the compiled frame ``co_name``, read from the raw structured trace."""
    with tarfile.open(run / "inductor" / "torch_trace.tgz") as tar:
        text = "".join(tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile())  # type: ignore[union-attr]
    frames, records, current = set(), [], None
    for line in text.splitlines():
        if line.startswith("\t"):
            if current is not None:
                current[1].append(line)
            continue
        current = None
        if "{" not in line:
            continue
        envelope = json.loads(line[line.index("{"):])
        metrics = envelope.get("compilation_metrics")
        if metrics and metrics.get("co_name") == co_name:
            frames.add(envelope["frame_id"])
        if "inductor_output_code" in envelope:
            current = (envelope.get("frame_id"), [])
            records.append(current)
    return {name for frame, payload in records if frame in frames
            for name in re.findall(r"async_compile\.triton\('(\w+)'", "\n".join(payload))}


def test_a_function_the_forward_calls_in_a_frame_of_its_own_takes_the_forwards_module() -> None:
    """transformers' ForCausalLMLoss, compiled after a graph break in GPT2LMHeadModel.forward, names no
    module; its kernels (forward and backward, read from the raw trace) sit at the model's root."""
    run = H200 / "hf_gpt2_train" / "optimized"
    loss = _frame_kernels(run, "ForCausalLMLoss")
    assert loss and any("log_softmax" in name for name in loss)
    profile = attribute_run(run)
    time = sum(k.duration_ns for k in profile.kernels)
    mine = [k for k in profile.kernels if k.name in loss]
    assert sum(k.duration_ns for k in mine) > 0.05 * time
    assert {k.module_path for k in mine} == {""}
