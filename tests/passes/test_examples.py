"""The example workloads obey the workload contract and have the sizes their docstrings promise."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from profiler_core.workload import import_workload_module, load_workload
from tests.passes.models import EXAMPLES


def test_full_size_attention_follows_the_contract() -> None:
    workload = load_workload(EXAMPLES / "sdpa_attention.py", device="meta")  # shapes only, no compute
    assert not workload.model.training and not workload.custom_step
    (x,) = workload.inputs
    assert tuple(x.shape) == (8, 512, 512) and x.dtype == torch.float32
    assert workload.model.n_heads == 8
    assert tuple(workload.step(workload.model, workload.inputs).shape) == (8, 512, 512)


def test_full_size_lstm_follows_the_contract() -> None:
    workload = load_workload(EXAMPLES / "lstm_encoder.py", device="meta")
    lstm = workload.model.lstm
    assert (lstm.input_size, lstm.hidden_size, lstm.num_layers, lstm.batch_first) == (256, 512, 2, True)
    assert tuple(workload.inputs[0].shape) == (32, 128, 256) and not workload.model.training


@pytest.mark.parametrize(("env", "allow_rnn"), [(None, False), ("1", True), ("0", False)])
def test_lstm_unroll_switch_lets_dynamo_trace_the_rnn(monkeypatch: pytest.MonkeyPatch, env: str | None,
                                                      allow_rnn: bool) -> None:
    if env is None:
        monkeypatch.delenv("OPROF_LSTM_UNROLL", raising=False)
    else:
        monkeypatch.setenv("OPROF_LSTM_UNROLL", env)
    with torch._dynamo.config.patch(allow_rnn=False):  # restored on exit
        load_workload(EXAMPLES / "lstm_encoder.py", device="meta")
        assert torch._dynamo.config.allow_rnn is allow_rnn


def test_gpt2_is_gpt2_small() -> None:
    module = import_workload_module(EXAMPLES / "gpt2.py")
    cfg = module.GPT2Config()
    sizes = (cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.vocab_size, cfg.n_positions)
    assert sizes == (12, 768, 12, 50257, 1024)
    assert (cfg.batch, cfg.seq_len) == (4, 128)
    with torch.device("meta"):
        model = module.GPT2(cfg)
    assert sum(p.numel() for p in model.parameters()) == 124_439_808  # the tied LM head counted once
    attn = model.h[0].attn
    assert all(isinstance(getattr(attn, p), nn.Linear) for p in ("q_proj", "k_proj", "v_proj"))


@pytest.mark.parametrize("name", ["gpt2.py", "sdpa_attention.py", "lstm_encoder.py"])
def test_small_configs_run_on_cpu(small_examples: Path, name: str) -> None:
    first = load_workload(small_examples / name, device="cpu")
    second = load_workload(small_examples / name, device="cpu")
    out = first.step(first.model, first.inputs)
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    torch.testing.assert_close(second.step(second.model, second.inputs), out)  # seeded: reproducible


def test_the_qwen2_decoder_example_is_sized_as_its_docstring_says() -> None:
    pytest.importorskip("transformers")
    module = import_workload_module(EXAMPLES / "hf_qwen2_decoder.py")
    cfg = module.build_config()
    sizes = (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
             cfg.intermediate_size, cfg.vocab_size)
    assert sizes == (6, 1024, 16, 4, 2816, 32000) and (module.BATCH, module.SEQ) == (8, 256)


def test_the_bert_training_example_trains_with_dropout_off(small_examples: Path) -> None:
    pytest.importorskip("transformers")
    module = import_workload_module(EXAMPLES / "hf_bert_train.py")
    cfg = module.build_config()
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size) == (6, 512, 2048)
    assert cfg.hidden_dropout_prob == cfg.attention_probs_dropout_prob == 0.0
    wl = load_workload(small_examples / "hf_bert_train.py", device="cpu")
    ids, labels, optimizer = wl.inputs
    assert wl.model.training and wl.custom_step and isinstance(optimizer, torch.optim.AdamW)
    before = next(wl.model.parameters()).detach().clone()
    losses = [float(wl.step(wl.model, wl.inputs)) for _ in range(3)]
    assert losses[2] < losses[0]  # the optimizer in the inputs steps this very model
    assert not torch.equal(next(wl.model.parameters()), before)


def test_the_resnet_example_needs_torchvision_only_when_called() -> None:
    module = import_workload_module(EXAMPLES / "tv_resnet18.py")  # importing it needs no torchvision
    assert (module.BATCH, module.SIZE) == (64, 160)


def test_the_mixtral_moe_example_is_sized_as_its_docstring_says_and_returns_router_logits(
        small_examples: Path) -> None:
    pytest.importorskip("transformers")
    module = import_workload_module(EXAMPLES / "hf_mixtral_moe.py")
    cfg = module.build_config()
    sizes = (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
             cfg.intermediate_size, cfg.num_local_experts, cfg.num_experts_per_tok, cfg.vocab_size)
    assert sizes == (4, 1024, 16, 4, 2048, 8, 2, 32000) and (module.BATCH, module.SEQ) == (8, 256)
    wl = load_workload(small_examples / "hf_mixtral_moe.py", device="cpu")
    out = wl.step(wl.model, wl.inputs)
    assert tuple(out.logits.shape) == (2, 16, 256) and len(out.router_logits) == 2
    assert tuple(out.router_logits[0].shape) == (32, 8)


def test_the_gpt2_training_example_keeps_adamw_on_the_model(small_examples: Path) -> None:
    pytest.importorskip("transformers")
    module = import_workload_module(EXAMPLES / "hf_gpt2_train.py")
    cfg = module.build_config()
    assert (cfg.n_layer, cfg.n_embd, cfg.n_head, module.BATCH, module.SEQ) == (4, 768, 12, 8, 256)
    assert cfg.resid_pdrop == cfg.embd_pdrop == cfg.attn_pdrop == 0.0
    wl = load_workload(small_examples / "hf_gpt2_train.py", device="cpu")
    assert wl.model.training and wl.custom_step and isinstance(wl.model._opt, torch.optim.AdamW)
    assert len(wl.inputs) == 1  # the optimizer is not among the inputs
    before = next(wl.model.parameters()).detach().clone()
    losses = [float(wl.step(wl.model, wl.inputs)) for _ in range(3)]
    assert losses[2] < losses[0]  # model._opt steps this very model
    assert not torch.equal(next(wl.model.parameters()), before)


def test_a_transformers_training_step_whose_loss_is_upcast_still_gets_its_float64_reference(
        small_examples: Path) -> None:
    # transformers' causal-LM loss casts the logits to float32 itself: the loss comes back in float32
    # from a float64 copy, while every gradient and updated parameter is float64
    pytest.importorskip("transformers")
    from profiler_core.passes.reference import float64_reference

    wl = load_workload(small_examples / "hf_gpt2_train.py", device="cpu")
    ref = float64_reference(wl.step, wl.model, wl.inputs, device="cpu", in_place=True)
    assert ref.record is not None, ref.reason
    assert "the loss came back in float32" in ref.describe()
    grads = [g for g in ref.record.gradients.values() if isinstance(g, torch.Tensor)]
    assert grads and all(g.dtype == torch.float64 for g in grads)
