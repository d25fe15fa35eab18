"""Judging one step against another: outputs, gradients and updated parameters, and the workload itself.

``compare_steps`` compares a candidate's StepRecord with the baseline's under the dtype
policy: every output leaf, every parameter's gradient and every updated parameter, by name.
Gradients are held to a tolerance scaled by their magnitude, since they are small numbers
whose scale says nothing about the model's health: atol x max(max|g|, GRADIENT_FLOOR x the
largest max|g| of any parameter). The floor is for gradients that are zero in exact arithmetic
(a key projection's bias: softmax ignores a shift along the keys), where rounding leaves noise
of the size of the terms that cancel, not of the result. Outputs and parameters use the policy
as it stands. A parameter whose dtype changed
(a bf16 plan that cast the master weights) fails on dtype, so a passing bf16 training plan
has left the optimizer's parameters in float32; the result's notes say so.

``check_reproducible`` runs before any pass is judged: the original model's step, run twice
from identical state with different seeds, must give the same outputs; if not, the workload
draws random numbers (dropout left on, sampling) and a compiled model, which draws them
differently, could never match it.
"""

from __future__ import annotations

from collections import Counter

import torch

from profiler_core.errors import NotReproducibleError, WorkloadError
from profiler_core.passes.step_run import StepRecord
from profiler_core.passes.validation import (
    DtypePolicy,
    OutputComparison,
    ValidationResult,
    compare_leaves,
    compare_tensors,
    leaf_label,
    summarize,
)

GRADIENT_FLOOR = 1e-3  # of the largest gradient magnitude: the least scale a gradient's tolerance uses


def _magnitude(t: torch.Tensor) -> float:
    return float(t.detach().abs().max()) if t.numel() and t.is_floating_point() else 0.0


def _named(base: dict[str, torch.Tensor], cand: dict[str, torch.Tensor], policy: DtypePolicy, role: str,
           scaled: bool) -> list[OutputComparison]:
    out: list[OutputComparison] = []
    floor = GRADIENT_FLOOR * max((_magnitude(b) for b in base.values()), default=0.0)
    for name, b in base.items():
        c = cand.get(name)
        if c is None:
            what = "received no gradient" if role == "gradient" else "is missing"
            out.append(OutputComparison(path=name, role=role, passed=False,  # type: ignore[arg-type]
                                        reason=f"the candidate's parameter {what}"))
            continue
        scale = max(_magnitude(b), floor) if scaled else None
        out.append(compare_tensors(name, b, c, policy, role=role, atol_scale=scale))
    for name in cand:
        if name not in base:
            what = "has a gradient the baseline's has not" if role == "gradient" else "is not in the baseline"
            out.append(OutputComparison(path=name, role=role, passed=False,  # type: ignore[arg-type]
                                        reason=f"the candidate's parameter {what}"))
    return out


def _dtypes(params: dict[str, torch.Tensor]) -> str:
    counts = Counter(str(p.dtype).removeprefix("torch.") for p in params.values())
    return ", ".join(f"{n} {d}" for d, n in counts.most_common())


def step_notes(base: StepRecord) -> list[str]:
    """What validation compared for this workload's step, in words."""
    if not base.training:
        return []
    outputs = sum(isinstance(v, torch.Tensor) for v in base.outputs.values())
    said = f"{outputs} output tensor(s)" if outputs else "no output (the step returns nothing)"
    if base.updated:
        opts = ", ".join(dict.fromkeys(base.optimizers))
        return [f"training step: compared {said}, {len(base.gradients)} gradients and "
                f"{len(base.parameters)} parameters updated by {opts} ({_dtypes(base.parameters)})"]
    if base.backward_ran:
        return [f"training step without an optimizer in the inputs: compared {said} and "
                f"{len(base.gradients)} gradients; no parameter was updated, so no update was compared "
                "(return the optimizer among the inputs to have its updates compared)"]
    return [f"the model is in train mode but its step ran no backward pass: compared {said} only"]


def compare_steps(base: StepRecord, cand: StepRecord, policy: DtypePolicy) -> ValidationResult:
    """The candidate's step against the baseline's: outputs, gradients, updated parameters."""
    if policy.compute_precision not in policy.tolerances:
        raise ValueError(f"compute precision {policy.compute_precision!r} has no tolerance; "
                         f"use one of {', '.join(policy.tolerances)}")
    comparisons = compare_leaves(base.outputs, cand.outputs, policy)
    comparisons += _named(base.gradients, cand.gradients, policy, "gradient", scaled=True)
    comparisons += _named(base.parameters, cand.parameters, policy, "parameter", scaled=False)
    notes = step_notes(base)
    if base.updated and cand.parameters:
        fp32 = sum(p.dtype == torch.float32 for p in cand.parameters.values())
        if fp32 == sum(p.dtype == torch.float32 for p in base.parameters.values()) and fp32:
            notes.append(f"the optimizer's parameters stay float32 ({fp32} of {len(cand.parameters)})")
    return summarize(comparisons, policy, notes=notes)


def check_step_compares_something(base: StepRecord, where: str) -> None:
    """WorkloadError when a step returns nothing and changes nothing: there would be nothing to compare."""
    has_output = any(isinstance(v, torch.Tensor) for v in base.outputs.values()) or any(
        v is not None for v in base.outputs.values())
    if not has_output and not base.backward_ran:
        raise WorkloadError(
            f"{where}: step() returned nothing and ran no backward pass, so validation would compare "
            "nothing; return the step's outputs (the loss, the logits) from step()")


def check_reproducible(first: StepRecord, second: StepRecord, where: str) -> None:
    """NotReproducibleError naming the leaf that moved when two runs of the original model disagree."""
    result = compare_steps(first, second, DtypePolicy("float32"))
    if result.passed:
        return
    failed = [c for c in result.outputs if not c.passed]
    worst = max(failed, key=lambda c: c.max_rel_err if c.max_rel_err is not None else float("inf"))
    err = f" (max abs err {worst.max_abs_err:.3g})" if worst.max_abs_err is not None else ""
    raise NotReproducibleError(
        f"{where}: the original model's step gives different results on two runs from identical state "
        f"with different random seeds: {leaf_label(worst)} moved{err}, {len(failed)} leaf(s) in all. "
        "The workload draws random numbers (dropout left on, sampling), and a transformed model draws "
        "them differently, so no pass could be validated; turn dropout off (model.eval(), or a dropout "
        "probability of 0 for training) and sample nothing in step()")
