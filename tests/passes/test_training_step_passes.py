"""The training-step passes on a real transformers training step (tiny GPT-2, AdamW on the model)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from profiler_core.passes import PassContext, PassStatus, apply_pass_plan
from profiler_core.passes.training_step import (
    APPLICABILITY,
    autocast_step,
    bf16_autocast_applicable,
    whole_step_cuda_graphs_applicable,
)
from tests.passes.test_training_builds import gpt2_workload

pytest.importorskip("transformers")


def _validated(plan: object, applied: list[str]) -> None:
    v = plan.validation  # type: ignore[attr-defined]
    assert v is not None and v.passed, v.reason if v else None
    assert plan.applied == applied  # type: ignore[attr-defined]
    grads = sum(c.role == "gradient" for c in v.outputs)
    params = sum(c.role == "parameter" for c in v.outputs)
    assert grads == params == 28  # every parameter of the 2-layer GPT-2 (the tied lm_head counted once)
    assert "the optimizer's parameters stay float32 (28 of 28)" in v.notes


def test_applicability_checks_say_why_not() -> None:
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.AdamW(model.parameters())
    train = PassContext(model=model, inputs=(), device="cpu", optimizers=(opt,))
    assert set(APPLICABILITY) == {"fused_optimizer", "compiled_optimizer_step", "whole_step_cuda_graphs",
                                  "step_graph_capture", "bf16_autocast"}
    assert APPLICABILITY["compiled_optimizer_step"](train) is None
    assert APPLICABILITY["fused_optimizer"](train) is None
    assert bf16_autocast_applicable(train) is None
    assert "on device 'cpu' the step cannot be graphed" in (whole_step_cuda_graphs_applicable(train) or "")
    evaluating = PassContext(model=torch.nn.Linear(4, 4).eval(), inputs=(), device="cpu")
    assert all(check(evaluating) for check in APPLICABILITY.values())  # each names a reason
    bare = PassContext(model=torch.nn.Linear(4, 4), inputs=(), device="cpu")
    assert "no torch.optim optimizer" in (APPLICABILITY["compiled_optimizer_step"](bare) or "")
    halved = PassContext(model=torch.nn.Linear(4, 4).bfloat16(), inputs=(), device="cpu", optimizers=(opt,))
    assert "no float32 parameter" in (bf16_autocast_applicable(halved) or "")


def test_autocast_step_runs_gemms_in_bf16_and_keeps_parameters_float32() -> None:
    model = torch.nn.Linear(8, 8)
    seen = autocast_step(lambda m, inputs: m(*inputs), "cpu")(model, (torch.randn(2, 8),))
    assert seen.dtype == torch.bfloat16 and model.weight.dtype == torch.float32


@pytest.mark.slow
def test_compiled_optimizer_step_validates_on_gpt2(tmp_path: Path) -> None:
    plan = apply_pass_plan(gpt2_workload(tmp_path, "model_attribute"), ["compiled_optimizer_step"],
                           device="cpu", compiler="eager")
    _validated(plan, ["compiled_optimizer_step"])
    assert plan.record("compiled_optimizer_step").details["optimizers"] == ["AdamW"]
    assert plan.graphs_compiled > 1  # the model's graphs and the optimizer step's


@pytest.mark.slow
def test_bf16_autocast_with_a_fused_optimizer_validates_on_gpt2(tmp_path: Path) -> None:
    plan = apply_pass_plan(gpt2_workload(tmp_path, "module_global"), ["bf16_autocast", "fused_optimizer"],
                           device="cpu", compiler="eager")
    _validated(plan, ["bf16_autocast", "fused_optimizer"])
    assert plan.compute_precision == "bfloat16"
    assert plan.validation is not None and plan.validation.max_abs_err > 0  # bf16 GEMMs: not bit-identical


@pytest.mark.slow
def test_whole_step_cuda_graphs_is_not_applicable_on_cpu(tmp_path: Path) -> None:
    plan = apply_pass_plan(gpt2_workload(tmp_path, "closure"), ["whole_step_cuda_graphs"], device="cpu",
                           compiler="eager")
    record = plan.record("whole_step_cuda_graphs")
    assert record.status is PassStatus.NOT_APPLIED and "cannot be graphed" in record.reason


@pytest.mark.gpu
@pytest.mark.slow
def test_whole_step_cuda_graphs_with_autocast_and_fused_adamw_validates_on_gpu(tmp_path: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    passes = ["bf16_autocast", "fused_optimizer", "whole_step_cuda_graphs"]
    plan = apply_pass_plan(gpt2_workload(tmp_path, "model_attribute"), passes, device="cuda")
    _validated(plan, passes)
    assert plan.compile_mode == "reduce-overhead"
