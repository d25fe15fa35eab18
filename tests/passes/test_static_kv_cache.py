"""static_kv_cache: generate() on a static KV cache with its decode step compiled, validated by its tokens."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from profiler_core.passes import PassContext, PassStatus, apply_pass_plan
from profiler_core.passes.static_kv_cache import static_kv_cache_applicability, step_calls_generate
from profiler_core.workload import import_workload_module


def _llama(small_examples: Path) -> tuple[nn.Module, tuple]:
    module = import_workload_module(small_examples / "hf_llama_generate.py")
    return module.get_model_and_inputs("cpu", small=True)


def test_a_plain_module_is_not_applicable() -> None:
    why = static_kv_cache_applicability(PassContext(model=nn.Linear(4, 4), inputs=(), device="cpu"))
    assert why is not None and "not a transformers model" in why


def test_a_step_without_generate_is_not_applicable(small_examples: Path) -> None:
    model, inputs = _llama(small_examples)
    ctx = PassContext(model=model, inputs=inputs, device="cpu")

    def forward_only(m: nn.Module, inp: tuple) -> torch.Tensor:
        return m(inp[0]).logits

    assert step_calls_generate(forward_only) is False
    why = static_kv_cache_applicability(ctx, forward_only)
    assert why is not None and "does not call generate()" in why
    module = import_workload_module(small_examples / "hf_llama_generate.py")
    assert step_calls_generate(module.step) is True
    assert static_kv_cache_applicability(ctx, module.step) is None


@pytest.mark.slow
def test_static_cache_decodes_the_same_greedy_tokens(small_examples: Path) -> None:
    plan = apply_pass_plan(small_examples / "hf_llama_generate.py", ["static_kv_cache"], device="cpu")
    (record,) = plan.passes
    assert record.status is PassStatus.APPLIED, record.reason
    assert record.details["cache_implementation"] == "static" and record.details["decode_step_compiled"]
    assert plan.validation is not None and plan.validation.passed
    out = next(o for o in plan.validation.outputs if o.path == "['sequences']")
    assert out.kind == "token_ids" and out.metrics["token_agreement"] == 1.0 and out.mismatched == 0
    scores = [o for o in plan.validation.outputs if o.path.startswith("['scores'][")]
    assert len(scores) == 4 and all(o.kind == "generation_scores" and o.passed for o in scores)
    # generate() hands back float32 scores from the float64 copy too: still the reference
    assert plan.validation.reference.startswith("float64 on cpu") and "generate() returned its scores" in (
        plan.validation.reference)
    assert all(o.rmse_candidate is not None and o.rmse_candidate <= o.threshold for o in scores)
