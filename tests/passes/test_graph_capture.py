"""Graph passes on a mixture of experts: not applicable, with the host reads named, never a failed trial."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from profiler_core.passes import PassContext, PassStatus, apply_passes
from profiler_core.passes.graph_capture import data_dependent_modules, graph_capture_applicability
from profiler_core.passes.rnn_reroute import rnn_reroute_applicability
from profiler_core.workload import import_workload_module


def _example(small_examples: Path, name: str) -> tuple[nn.Module, tuple]:
    return import_workload_module(small_examples / name).get_model_and_inputs("cpu", small=True)


def test_moe_experts_read_the_router_back_on_the_host(small_examples: Path) -> None:
    model, _ = _example(small_examples, "hf_mixtral_moe.py")
    hits = data_dependent_modules(model)
    assert hits and all(path.endswith("mlp.experts") for path, _, _ in hits)
    # transformers dispatches the experts to grouped_mm, whose compiled path falls back for FP32 weights
    # to a loop that reads the token counts; the class's own (eager) forward, which calls nonzero, never runs
    assert {call.split(" ")[0] for _, _, call in hits} == {"offs.tolist()"}
    model.config._experts_implementation = "eager"
    assert {call for _, _, call in data_dependent_modules(model)} == {".nonzero()"}


def test_moe_experts_on_bf16_grouped_mm_read_nothing_back(small_examples: Path) -> None:
    from profiler_core.passes.moe_experts import experts_modules

    model, _ = _example(small_examples, "hf_mixtral_moe.py")
    for _, experts in experts_modules(model):
        experts.to(torch.bfloat16)
    assert data_dependent_modules(model) == []


def test_cuda_graphs_on_an_moe_is_not_applied_with_the_evidence(small_examples: Path) -> None:
    model, inputs = _example(small_examples, "hf_mixtral_moe.py")
    _, record = apply_passes(model, inputs, ["cuda_graphs"], device="cuda", warmup=False)
    (rec,) = record.passes
    assert rec.status is PassStatus.NOT_APPLIED
    assert "data-dependent dispatch" in rec.reason and "model.layers.0.mlp.experts" in rec.reason


def test_the_capture_s_host_syncs_are_evidence_enough() -> None:
    finding = {"rule_id": "host_syncs", "evidence": {"facts": ["2 device-to-host copies per step"]}}
    ctx = PassContext(model=nn.Linear(4, 4), inputs=(), device="cuda", findings=(finding,))
    why = graph_capture_applicability(ctx)
    assert why is not None and "2 device-to-host copies per step" in why
    assert graph_capture_applicability(PassContext(model=nn.Linear(4, 4), inputs=(), device="cuda")) is None


def test_a_dense_decoder_stays_graphable_and_has_no_rnn(small_examples: Path) -> None:
    model, inputs = _example(small_examples, "hf_llama_generate.py")
    ctx = PassContext(model=model, inputs=inputs, device="cuda")
    assert graph_capture_applicability(ctx) is None
    assert rnn_reroute_applicability(ctx) == "no nn.LSTM, nn.GRU or nn.RNN in the model"
    lstm = nn.Sequential(nn.LSTM(8, 8, batch_first=True))
    assert rnn_reroute_applicability(PassContext(model=lstm, inputs=(torch.zeros(1, 2, 8),), device="cpu")) is None


def test_a_training_step_is_graphed_whole_not_forward_only() -> None:
    from profiler_core.passes import get_pass

    model = nn.Linear(4, 4)
    opt = torch.optim.AdamW(model.parameters())
    train = PassContext(model=model, inputs=(), device="cuda", optimizers=(opt,))
    why = get_pass("cuda_graphs").cannot_apply(train)
    assert why is not None and "whole_step_cuda_graphs" in why
    # without an optimizer (a model left in train mode for inference) cuda_graphs still applies
    assert get_pass("cuda_graphs").cannot_apply(PassContext(model=model, inputs=(), device="cuda")) is None
    assert "whole_step_cuda_graphs" in get_pass("bf16_promotion").suggests
