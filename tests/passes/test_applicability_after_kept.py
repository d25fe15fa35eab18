"""A pass the original model ruled out is asked again once a kept structural pass changed the model."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from profiler_core.optimize.trial import applicability_after_kept
from profiler_core.passes import PassContext, get_pass
from profiler_core.workload import load_workload

pytest.importorskip("transformers")


def _state(workload: Path, kept: list[str], cannot_apply: dict[str, str]) -> Any:
    notes: list[str] = []
    return SimpleNamespace(workload=workload, cfg=SimpleNamespace(device="cpu"), kept=kept, tried=1,
                           cannot_apply=cannot_apply, by_model=set(cannot_apply), rechecked={},
                           note=lambda _step, message: notes.append(message), notes=notes)


def test_graphs_are_asked_again_once_the_experts_read_nothing_back(small_examples: Path) -> None:
    workload = small_examples / "hf_mixtral_moe.py"
    wl = load_workload(workload, device="cpu")
    first = get_pass("cuda_graphs").cannot_apply(PassContext(model=wl.model, inputs=wl.inputs, device="cpu"))
    assert first is not None
    # the original model: the experts' compiled path reads the token counts on the host
    on_cuda = PassContext(model=wl.model, inputs=wl.inputs, device="cuda")
    assert "offs.tolist()" in (get_pass("cuda_graphs").cannot_apply(on_cuda) or "")
    state = _state(workload, ["moe_grouped_experts"], {"cuda_graphs": "offs.tolist() in the experts"})
    again = applicability_after_kept(state, "cuda_graphs")
    # asked of the built model: only the CPU remains in the way here (on CUDA it would apply)
    assert again == first and "offs.tolist()" not in again
    assert state.rechecked == {(("moe_grouped_experts",), "cuda_graphs"): again}
    from profiler_core.passes.planner import build_optimized_workload

    built, _ = build_optimized_workload(wl.model, tuple(wl.inputs), ["moe_grouped_experts"], device="cpu",
                                        compiler="eager")
    model = getattr(built, "_orig_mod", built)
    assert get_pass("cuda_graphs").cannot_apply(PassContext(model=model, inputs=wl.inputs, device="cuda")) is None


def test_nothing_is_asked_again_without_a_kept_structural_pass(small_examples: Path) -> None:
    workload = small_examples / "hf_mixtral_moe.py"
    state = _state(workload, ["bf16_promotion"], {"cuda_graphs": "offs.tolist() in the experts"})
    assert applicability_after_kept(state, "cuda_graphs") == "offs.tolist() in the experts"
    assert state.rechecked == {}
    state = _state(workload, ["moe_grouped_experts"], {"freezing": "model in train mode"})
    state.by_model.clear()  # a reason the model did not give (generate(), say) stands
    assert applicability_after_kept(state, "freezing") == "model in train mode"
