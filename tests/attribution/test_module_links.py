"""Module paths of backward, optimizer and attention kernels on shipped H200 captures.

The references are read from the raw Kineto records here: which kernels a backward op
(``Sequence number`` + ``Fwd thread id``) or an ``Optimizer.*#AdamW.*`` range launched, and the
kernel time of the whole trace.
"""

from __future__ import annotations

import gzip
import json
import re
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


@pytest.mark.slow
def test_backward_kernels_take_the_module_of_their_forward_op(bert) -> None:  # type: ignore[no-untyped-def]
    profile, raw = bert
    pairs = _paired(profile, raw)
    # the compiled forward graph is one autograd op: its backward runs under the module enclosing
    # every forward kernel of it
    forward = {k.module_path for k, r in pairs if r["phase"] == "forward" and k.module_path is not None}
    parts = [p.split(".") if p else [] for p in forward]
    common: list[str] = parts[0]
    for p in parts[1:]:
        n = 0
        while n < min(len(common), len(p)) and common[n] == p[n]:
            n += 1
        common = common[:n]
    assert {k.module_path for k, r in pairs if r["phase"] == "backward"} == {".".join(common)}


@pytest.mark.slow
def test_attention_sits_in_its_layer_self_attn() -> None:
    profile = attribute_run(QWEN)
    code = (QWEN / "inductor" / "output_code.log").read_text()
    layers = len(re.findall(r"aten\._scaled_dot_product_efficient_attention\.default\(", code))
    attn = [k for k in profile.kernels if k.name.startswith("fmha_")]
    assert layers == 6 and len(attn) == 2 * layers  # two measured iterations
    assert [k.module_path for k in attn] == [f"model.layers.{i % layers}.self_attn" for i in range(len(attn))]
