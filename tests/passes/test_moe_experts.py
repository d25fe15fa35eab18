"""moe_grouped_experts on a small transformers Mixtral (CPU): applicability, the plan, validation."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from profiler_core.analysis.host_syncs import per_expert_gemm_runs
from profiler_core.analysis.profile_view import ProfileView
from profiler_core.api import load_profile
from profiler_core.passes.contract import PassContext
from profiler_core.passes.moe_experts import EXPERT_WEIGHTS, experts_modules, moe_grouped_experts_applicable
from profiler_core.workload import load_workload

pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SHIPPED = Path(__file__).parent.parent.parent / "examples" / "captures" / "h200"


def _ctx(model: torch.nn.Module, device: str = "cpu") -> PassContext:
    return PassContext(model=model, inputs=(), device=device)


def test_the_pass_applies_to_a_mixtral_and_names_why_not_elsewhere(small_examples: Path) -> None:
    wl = load_workload(small_examples / "hf_mixtral_moe.py", device="cpu")
    assert [name for name, _ in experts_modules(wl.model)] == ["model.layers.0.mlp.experts",
                                                              "model.layers.1.mlp.experts"]
    assert moe_grouped_experts_applicable(_ctx(wl.model)) is None
    wl.model.train()
    assert "train mode" in (moe_grouped_experts_applicable(_ctx(wl.model)) or "")
    dense = torch.nn.Sequential(torch.nn.Linear(8, 8))
    assert "no experts module in Sequential" in (moe_grouped_experts_applicable(_ctx(dense)) or "")


def test_the_plan_runs_the_experts_on_bf16_weights_and_validates(small_examples: Path, tmp_path: Path) -> None:
    from profiler_core.passes import apply_pass_plan, build_optimized_model

    plan = apply_pass_plan(small_examples / "hf_mixtral_moe.py", ["moe_grouped_experts"], device="cpu",
                           out_dir=tmp_path, compiler="eager")
    record = plan.passes[0]
    assert record.status == "APPLIED", record.reason
    wl = load_workload(small_examples / "hf_mixtral_moe.py", device="cpu")
    numel = sum(getattr(m, a).numel() for _, m in experts_modules(wl.model) for a in EXPERT_WEIGHTS
                if hasattr(m, a))
    assert record.details["expert_parameters_cast_to_bf16"] == numel
    assert plan.validation.passed, plan.validation.reason
    model = build_optimized_model(wl.model, wl.inputs, ["moe_grouped_experts"], device="cpu", compiler="eager")
    model = getattr(model, "_orig_mod", model)
    dtypes = {getattr(m, a).dtype for _, m in experts_modules(model) for a in EXPERT_WEIGHTS if hasattr(m, a)}
    assert dtypes == {torch.bfloat16}
    assert next(model.lm_head.parameters()).dtype == torch.float32  # the rest keeps its precision
    assert moe_grouped_experts_applicable(_ctx(model)) == "the experts already run grouped_mm on bfloat16 weights"


def test_a_dense_model_has_no_per_expert_gemm_runs() -> None:
    # GPT-2's projections repeat over layers with the same rows: never a run of per-expert GEMMs
    profile = load_profile(SHIPPED / "gpt2" / "baseline")
    view = ProfileView(profile)
    assert per_expert_gemm_runs(view, profile.operators) == []
