"""Passes that change how a step runs rather than what the graph computes.

inductor_compile (Level 3): a workload captured eagerly (``--compile-mode eager``) launches one
kernel per elementwise operator; compiling it with Inductor fuses those chains. The plan
then compiles with Inductor although eager was asked for; under a plan that already compiles
with Inductor the pass changes nothing.

fused_optimizer (module level, on the optimizers): ``torch.optim`` runs its update as a Python
loop over parameters (``foreach=False``), as a few multi-tensor kernels per operation
(``foreach=True``, the CUDA default), or as one fused kernel per parameter group
(``fused=True``). Each optimizer that updates the model's parameters (wherever the workload
keeps it: ``PassContext.optimizers``) is switched, in place, to the fused implementation
where its class and parameters allow it, else to foreach. Numerics are those of the same
algorithm: validation compares every updated parameter.
"""

from __future__ import annotations

from typing import Any

import torch

from profiler_core.passes.contract import PassContext, PassEffect
from profiler_core.passes.registry import PassLevel, register_pass
from profiler_core.passes.step_run import find_optimizers


@register_pass(
    "inductor_compile",
    level=PassLevel.INDUCTOR_CONFIG,
    symptom="many small elementwise kernels launched one per operator by an eager model",
    order=0,
    aliases=("compile", "torch_compile"),
)
def inductor_compile(ctx: PassContext) -> PassEffect:
    """Compile an eagerly run model with Inductor, so its elementwise chains fuse."""
    if ctx.compiler == "inductor":
        return PassEffect.not_applied("the plan already compiles the model with Inductor")
    return PassEffect(compiler="inductor", details={"compiler": "inductor", "was": ctx.compiler})


def _fused_supported(opt: torch.optim.Optimizer) -> str | None:
    """None when ``opt`` may run fused, else why not."""
    if "fused" not in opt.defaults:
        return f"{type(opt).__name__} has no fused implementation"
    if opt.defaults.get("differentiable"):
        return "a differentiable optimizer cannot be fused"
    from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

    devices = set(_get_fused_kernels_supported_devices())
    for group in opt.param_groups:
        for p in group["params"]:
            if not p.is_floating_point() or p.device.type not in devices:
                return f"a parameter is {p.dtype} on {p.device.type}, which the fused kernels do not take"
    return None


def _switch(opt: torch.optim.Optimizer) -> tuple[str, str | None]:
    """Switch ``opt`` in place; (what it runs now, why not fused)."""
    why = _fused_supported(opt)
    groups = opt.param_groups
    if why is None:
        if all(g.get("fused") for g in groups):
            return "already fused", None
        for g in groups:
            g["fused"], g["foreach"] = True, False
        opt._step_supports_amp_scaling = True  # type: ignore[attr-defined]  # as the constructor does for fused
        for p, state in opt.state.items():  # fused kernels read the step count on the parameter's device
            step = state.get("step")
            if isinstance(step, torch.Tensor) and step.device != p.device:
                state["step"] = step.to(device=p.device, dtype=torch.float32)
        return "fused", None
    if "foreach" in opt.defaults and not all(g.get("foreach") for g in groups):
        for g in groups:
            g["foreach"] = True
        return "foreach", why
    return "unchanged", why


def fused_optimizer_applicable(ctx: PassContext) -> str | None:
    """None when the step has an optimizer that could run fused (or foreach), else why not."""
    if not (ctx.optimizers or find_optimizers(ctx.inputs)):
        return ("no torch.optim optimizer updates the model's parameters" if ctx.training
                else "the model is in eval mode: no optimizer steps it")
    return None


@register_pass(
    "fused_optimizer",
    level=PassLevel.DYNAMO_FX,
    symptom="many small kernels under the optimizer's step (a per-parameter update loop)",
    order=95,
    aliases=("foreach_optimizer", "optimizer_fusion"),
    applicable=fused_optimizer_applicable,
)
def fused_optimizer(ctx: PassContext) -> PassEffect:
    """Run each optimizer of the step with its fused (else foreach) implementation."""
    reason = fused_optimizer_applicable(ctx)
    if reason is not None:
        return PassEffect.not_applied(reason)
    optimizers = list(ctx.optimizers) or find_optimizers(ctx.inputs)
    changes: dict[str, Any] = {}
    reasons = []
    for i, opt in enumerate(optimizers):
        now, why = _switch(opt)
        changes[f"{i}:{type(opt).__name__}"] = now
        if why:
            reasons.append(f"{type(opt).__name__}: {why}")
    if all(v in ("already fused", "unchanged") for v in changes.values()):
        return PassEffect.not_applied("; ".join(reasons) or "every optimizer already runs fused",
                                      optimizers=changes)
    return PassEffect(details={"optimizers": changes, **({"not_fused": reasons} if reasons else {})})
