"""The passes for real models: conv-BN folding, channels_last, bf16 convolutions, compiling an eager
model, the fused optimizer; on transformers' ResNet and BERT (CPU) and torchvision's ResNet where it loads."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from profiler_core.passes import PassStatus, apply_pass_plan, apply_passes
from profiler_core.passes.compile_step import fused_optimizer
from profiler_core.passes.contract import PassContext
from profiler_core.passes.convolution import find_conv_bn_pairs
from tests.passes.workload_sources import TINY_RESNET

transformers = pytest.importorskip("transformers")  # CI installs it; a fallback for bare machines



@pytest.fixture(scope="module")
def resnet_workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("resnet") / "hf_resnet.py"
    path.write_text(textwrap.dedent(TINY_RESNET))
    return path


def test_conv_bn_pairs_come_from_the_data_flow(resnet_workload: Path) -> None:
    from profiler_core.workload import load_workload

    model = load_workload(resnet_workload, device="cpu").model
    pairs, _ = find_conv_bn_pairs(model)
    assert len(pairs) == sum(isinstance(m, nn.BatchNorm2d) for m in model.modules()) == 8
    assert ("resnet.embedder.embedder.convolution", "resnet.embedder.embedder.normalization") in pairs


def test_a_conv_whose_output_is_also_used_elsewhere_is_not_folded() -> None:
    class Branch(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.conv(x)
            return self.bn(y) + y  # the conv's output has a second user: folding would change it

    pairs, _ = find_conv_bn_pairs(Branch().eval())
    assert pairs == []


@pytest.mark.slow
def test_conv_bn_folding_removes_every_batchnorm_and_keeps_the_logits(resnet_workload: Path) -> None:
    plan = apply_pass_plan(resnet_workload, ["conv_bn_folding"], device="cpu", compiler="eager")
    record = plan.record("conv_bn_folding")
    assert record.status is PassStatus.APPLIED and record.details["folded"] == 8
    assert plan.validation is not None and plan.validation.passed and plan.validation.max_abs_err > 0  # rounding


def test_conv_bn_folding_edits_the_model_copy(resnet_workload: Path) -> None:
    from profiler_core.workload import load_workload

    wl = load_workload(resnet_workload, device="cpu")
    compiled, _ = apply_passes(wl.model, wl.inputs, ["conv_bn_folding"], device="cpu", compiler="eager")
    folded = compiled._orig_mod
    assert not any(isinstance(m, nn.BatchNorm2d) for m in folded.modules())
    assert sum(isinstance(m, nn.BatchNorm2d) for m in wl.model.modules()) == 8  # the baseline is untouched
    with torch.no_grad():
        torch.testing.assert_close(compiled(*wl.inputs).logits, wl.model(*wl.inputs).logits, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_channels_last_converts_weights_and_inputs(resnet_workload: Path) -> None:
    from profiler_core.workload import load_workload

    wl = load_workload(resnet_workload, device="cpu")
    compiled, record = apply_passes(wl.model, wl.inputs, ["channels_last"], device="cpu", compiler="eager")
    conv = compiled._orig_mod.resnet.embedder.embedder.convolution
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert not conv.weight.is_contiguous()
    assert record.passes[0].details["conv2d_modules"] == 8
    plan = apply_pass_plan(resnet_workload, ["channels_last"], device="cpu", compiler="eager")
    assert plan.validation is not None and plan.validation.passed


@pytest.mark.slow
def test_bf16_promotion_reaches_the_convolutions(resnet_workload: Path) -> None:
    plan = apply_pass_plan(resnet_workload, ["bf16_promotion"], device="cpu", compiler="eager")
    details = plan.record("bf16_promotion").details
    assert details["gemms_promoted"] == {"conv2d": 8, "linear": 1}
    assert plan.compute_precision == "bfloat16"
    assert plan.validation is not None and plan.validation.passed and plan.validation.max_abs_err > 1e-4


@pytest.mark.slow
def test_inductor_compile_turns_an_eager_plan_into_an_inductor_one(resnet_workload: Path, tmp_path: Path) -> None:
    plan = apply_pass_plan(resnet_workload, ["inductor_compile"], device="cpu", compiler="eager", out_dir=tmp_path)
    assert plan.record("inductor_compile").status is PassStatus.APPLIED
    assert plan.compiler == "inductor"
    assert "COMPILER = 'inductor'" in (tmp_path / "workload_optimized.py").read_text()
    assert plan.validation is not None and plan.validation.passed
    compiled = apply_pass_plan(resnet_workload, ["compile"], device="cpu", compiler="inductor",
                               raise_on_failure=False)
    record = compiled.record("inductor_compile")
    assert record.status is PassStatus.NOT_APPLIED and "already compiles" in record.reason


def test_fused_optimizer_switches_adamw_in_place() -> None:
    model = nn.Linear(4, 4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    effect = fused_optimizer(PassContext(model=model, inputs=(torch.randn(2, 4), {"opt": opt}), device="cpu"))
    assert effect.applied and effect.details["optimizers"] == {"0:AdamW": "fused"}
    assert opt.param_groups[0]["fused"] is True and opt.param_groups[0]["foreach"] is False
    again = fused_optimizer(PassContext(model=model, inputs=(opt,), device="cpu"))
    assert not again.applied and "already" in again.reason
    none = fused_optimizer(PassContext(model=model, inputs=(torch.randn(2, 4),), device="cpu"))
    assert not none.applied and "no torch.optim optimizer updates the model's parameters" in none.reason
    held = fused_optimizer(PassContext(model=model, inputs=(), device="cpu",
                                       optimizers=(torch.optim.SGD(model.parameters(), lr=0.1),)))
    assert held.applied and held.details["optimizers"] == {"0:SGD": "fused"}  # found outside the inputs


@pytest.mark.slow
def test_fused_optimizer_on_the_bert_training_example_validates_the_updates(small_examples: Path) -> None:
    plan = apply_pass_plan(small_examples / "hf_bert_train.py", ["fused_optimizer", "freezing"], device="cpu",
                           compiler="eager")
    assert plan.record("fused_optimizer").status is PassStatus.APPLIED
    freezing = plan.record("freezing")
    assert freezing.status is PassStatus.NOT_APPLIED and "train mode" in freezing.reason
    v = plan.validation
    assert v is not None and v.passed
    assert sum(c.role == "parameter" for c in v.outputs) > 30


@pytest.mark.slow
def test_bf16_training_keeps_float32_master_weights(small_examples: Path) -> None:
    plan = apply_pass_plan(small_examples / "hf_bert_train.py", ["bf16_promotion"], device="cpu", compiler="eager")
    v = plan.validation
    assert v is not None and v.passed and v.compute_precision == "bfloat16"
    params = [c for c in v.outputs if c.role == "parameter"]
    assert params and all(c.candidate_dtype == "float32" for c in params)
    assert any(n.startswith("the optimizer's parameters stay float32") for n in v.notes)


def _torchvision_loads() -> bool:
    try:
        import torchvision  # noqa: F401
    except Exception:  # a CUDA build beside a CPU torch raises RuntimeError, not ImportError
        return False
    return True


@pytest.mark.skipif(not _torchvision_loads(), reason="torchvision is absent or does not load with this torch")
@pytest.mark.parametrize("name", ["conv_bn_folding", "channels_last", "bf16_promotion"])
def test_torchvision_resnet18_example_takes_the_cnn_passes(small_examples: Path, name: str) -> None:
    plan = apply_pass_plan(small_examples / "tv_resnet18.py", [name], device="cpu", compiler="eager")
    assert plan.record(name).status is PassStatus.APPLIED
    assert plan.validation is not None and plan.validation.passed
