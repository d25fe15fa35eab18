"""The verdict on real models (CPU): good passes accepted with the reference, rule and numbers printed;
a numerically fragile model under bf16 and a deliberately corrupted conv-BN fold rejected."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from profiler_core.passes import PassEffect, PassLevel, PlanStatus, apply_pass_plan, register_pass, registry
from profiler_core.passes.contract import PassContext
from profiler_core.passes.convolution import find_conv_bn_pairs
from tests.passes.workload_sources import TINY_RESNET

_CANCELLATION = '''
import torch
from torch import nn

class Cancellation(nn.Module):
    """Two large, nearly equal projections subtracted: the result is 1e-3 of the terms."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 64)
        with torch.no_grad():
            big = torch.randn(32, 32) * 100
            self.fc.weight.copy_(torch.cat([big, big + 0.01 * torch.randn(32, 32)]))
            self.fc.bias.fill_(1000.0)

    def forward(self, x):
        h = self.fc(x)
        return h[:, :32] - h[:, 32:]

def get_model_and_inputs(device="cpu"):
    torch.manual_seed(0)
    return Cancellation().to(device).eval(), (torch.randn(64, 32, device=device),)
'''



def _write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


@pytest.fixture
def corrupted_fold() -> Iterator[str]:
    """A conv-BN fold that uses the wrong statistics: the running variance where the std belongs."""

    def fold_with_variance(ctx: PassContext) -> PassEffect:
        pairs, _ = find_conv_bn_pairs(ctx.model)
        for conv_path, bn_path in pairs:
            bn = ctx.model.get_submodule(bn_path)
            with torch.no_grad():
                bn.running_var.copy_(bn.running_var.sqrt())  # folds var -> sqrt(var): wrong by a power
            parent, _, name = conv_path.rpartition(".")
            setattr(ctx.model.get_submodule(parent), name, fuse_conv_bn_eval(ctx.model.get_submodule(conv_path), bn))
            parent, _, name = bn_path.rpartition(".")
            setattr(ctx.model.get_submodule(parent), name, nn.Identity())
        return PassEffect(details={"folded": len(pairs)})

    register_pass("corrupted_fold", level=PassLevel.DYNAMO_FX, symptom="testing", structural=True,
                  source="tests")(fold_with_variance)
    yield "corrupted_fold"
    registry.unregister_pass("corrupted_fold")


def test_a_model_that_cancels_large_values_is_rejected_under_bf16(tmp_path: Path) -> None:
    workload = _write(tmp_path, "cancellation.py", _CANCELLATION)
    plan = apply_pass_plan(workload, ["bf16_promotion"], device="cpu", compiler="eager", raise_on_failure=False,
                           out_dir=tmp_path / "plan")
    v = plan.validation
    assert plan.status is PlanStatus.REJECTED and "bf16_promotion" in plan.applied
    assert v.verdict.startswith("rejected: output (tensor): RMSE(candidate, fp64)")
    assert "reference float64 on cpu, TF32 off" in v.verdict
    (out,) = v.outputs
    assert out.rmse_candidate > 10 * out.threshold and out.cosine < 0.99
    saved = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert saved["validation"]["verdict"] == v.verdict and saved["validation"]["rule"] == v.rule
    assert saved["validation"]["outputs"][0]["rmse_candidate"] == out.rmse_candidate


@pytest.mark.slow
def test_conv_bn_folding_on_a_library_resnet_is_accepted_and_a_corrupted_fold_rejected(
        tmp_path: Path, corrupted_fold: str) -> None:
    pytest.importorskip("transformers")
    workload = _write(tmp_path, "hf_resnet.py", TINY_RESNET)
    good = apply_pass_plan(workload, ["conv_bn_folding"], device="cpu", compiler="eager", raise_on_failure=False)
    v = good.validation
    assert good.status is PlanStatus.VALIDATED and good.applied == ["conv_bn_folding"]
    assert v.verdict.startswith("validation passed against float64 on cpu, TF32 off; worst output logits: RMSE")
    logits = next(o for o in v.outputs if o.path == "logits")
    assert logits.rmse_candidate <= logits.threshold and logits.rmse_baseline > 0
    bad = apply_pass_plan(workload, [corrupted_fold], device="cpu", compiler="eager", raise_on_failure=False)
    assert bad.status is PlanStatus.REJECTED
    assert bad.validation.verdict.startswith("rejected: output logits: RMSE(candidate, fp64)")


_MIXTRAL = '''
import torch

def get_model_and_inputs(device="cpu"):
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    config = MixtralConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, num_local_experts=8, num_experts_per_tok=2,
                           max_position_embeddings=256, output_router_logits=True, tie_word_embeddings=False)
    model = MixtralForCausalLM(config).to(device).eval()
    return model, (torch.randint(0, 256, (2, 16), device=device),)
'''


@pytest.mark.slow
def test_a_mixtral_moe_under_bf16_is_accepted_with_routing_and_next_token_agreement(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    workload = _write(tmp_path, "hf_mixtral.py", _MIXTRAL)
    plan = apply_pass_plan(workload, ["bf16_promotion"], device="cpu", compiler="eager", raise_on_failure=False)
    v = plan.validation
    assert plan.status is PlanStatus.VALIDATED and plan.compute_precision == "bfloat16"
    assert v.reference == "float64 on cpu, TF32 off (MoE experts by the eager implementation)"
    assert "next-token agreement" in v.verdict and "took other experts in some layer" in v.verdict
    assert 0.9 <= v.metrics["next_token_agreement"] <= 1.0 and 0.0 <= v.metrics["tokens_rerouted"] < 0.1
    kinds = {o.kind for o in v.outputs}
    assert {"lm_logits", "router_logits", "intermediate"} <= kinds
    logits = next(o for o in v.outputs if o.kind == "lm_logits")
    assert logits.metrics["far_flips"] == 0 and logits.metrics["kl"] <= logits.metrics["kl_bound"]
    keys = next(o for o in v.outputs if o.path.endswith("layers[1].keys"))
    assert keys.rmse_candidate is not None and keys.rmse_baseline is not None and keys.cosine > 0.999
    assert torch.get_default_dtype() == torch.float32


@pytest.fixture
def corrupted_router() -> Iterator[str]:
    """A pass that nudges every MoE router's weights: tokens take other experts with decisive margins."""

    def nudge_routers(ctx: PassContext) -> PassEffect:
        g = torch.Generator().manual_seed(1)
        gates = [m for name, m in ctx.model.named_modules() if name.endswith("mlp.gate")]
        with torch.no_grad():
            for gate in gates:
                gate.weight.add_(0.01 * torch.randn(gate.weight.shape, generator=g).to(gate.weight))
        return PassEffect(details={"nudged": len(gates)})

    register_pass("corrupted_router", level=PassLevel.DYNAMO_FX, symptom="testing", structural=True,
                  source="tests")(nudge_routers)
    yield "corrupted_router"
    registry.unregister_pass("corrupted_router")


@pytest.mark.slow
def test_a_corrupted_moe_router_is_rejected_by_its_reroutes(tmp_path: Path, corrupted_router: str) -> None:
    pytest.importorskip("transformers")
    workload = _write(tmp_path, "hf_mixtral.py", _MIXTRAL)
    plan = apply_pass_plan(workload, [corrupted_router], device="cpu", compiler="eager", raise_on_failure=False)
    v = plan.validation
    assert plan.status is PlanStatus.REJECTED and v.metrics["reroutes_beyond_rounding"] >= 1
    routers = [o for o in v.outputs if o.kind == "router_logits" and not o.passed]
    assert any("beyond the" in o.reason and "float32 rounding can swap" in o.reason for o in routers), routers
