"""Passes for a training step as a whole: its optimizer compiled, the step graphed, the step in bf16.

compiled_optimizer_step  (Level 3) compiles each optimizer's ``step()`` with the plan's backend:
                         Inductor fuses the update's elementwise chains across parameters into a
                         few kernels (what ``torch.compile(optimizer.step)`` does by hand).
whole_step_cuda_graphs   (Level 3) compiles the whole step (forward, loss, backward, optimizer) in
                         mode ``reduce-overhead``: each compiled region is recorded once as a CUDA
                         graph and replayed, so the launch gaps of all three phases go. CUDA only;
                         Inductor skips what it cannot capture, and the plan says so.
bf16_autocast            (Level 1) runs the step under ``torch.autocast(dtype=torch.bfloat16)``: the
                         GEMMs compute in bf16 while the parameters, their gradients and the
                         optimizer's state stay float32 (master weights). Combines with the two
                         above and with fused_optimizer; validated at the bfloat16 tolerance.

Each pass has an applicability check beside it, ``<pass>_applicable(ctx) -> str | None``
(None: applicable; else why not), which the pass itself consults first; ``APPLICABILITY``
maps each pass name to its check (fused_optimizer's lives beside it in compile_step.py,
step_graph_capture's in step_graph.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from profiler_core.passes.compile_step import fused_optimizer_applicable
from profiler_core.passes.contract import PassContext, PassEffect, Step
from profiler_core.passes.inductor_config import check_cudagraphs
from profiler_core.passes.registry import PassLevel, register_pass
from profiler_core.passes.step_graph import step_graph_capture_applicable

Applicability = Callable[[PassContext], "str | None"]


def compiled_optimizer_step_applicable(ctx: PassContext) -> str | None:
    """None when the step has an optimizer to compile, else why not."""
    if not ctx.training:
        return "the model is in eval mode: this pass is for a training step (model.train(), an optimizer step)"
    if not ctx.optimizers:
        return "no torch.optim optimizer updates the model's parameters"
    return None


@register_pass(
    "compiled_optimizer_step",
    level=PassLevel.INDUCTOR_CONFIG,
    symptom="many small kernels under the optimizer's step (its per-parameter update chains)",
    order=40,
    aliases=("compile_optimizer",),
    applicable=compiled_optimizer_step_applicable,
    suggests=("whole_step_cuda_graphs",),
)
def compiled_optimizer_step(ctx: PassContext) -> PassEffect:
    """Compile each optimizer's step() with the plan's backend, so its update chains fuse."""
    reason = compiled_optimizer_step_applicable(ctx)
    if reason is not None:
        return PassEffect.not_applied(reason)
    return PassEffect(compile_optimizer=True,
                      details={"optimizers": [type(o).__name__ for o in ctx.optimizers]})


def whole_step_cuda_graphs_applicable(ctx: PassContext) -> str | None:
    """None when the whole step can be captured in CUDA graphs, else why not."""
    if not ctx.training:
        return "the model is in eval mode: for an inference step use cuda_graphs"
    if not ctx.on_cuda:
        return (f"CUDA graphs record GPU work; on device '{ctx.device}' the step cannot be graphed "
                "(run the plan on a CUDA device)")
    return None


@register_pass(
    "whole_step_cuda_graphs",
    level=PassLevel.INDUCTOR_CONFIG,
    symptom="launch gaps and many short kernels across forward, backward and the optimizer's step",
    order=31,
    aliases=("step_cuda_graphs", "whole_step_reduce_overhead"),
    applicable=whole_step_cuda_graphs_applicable,
    suggests=("bf16_autocast", "step_graph_capture"),
)
def whole_step_cuda_graphs(ctx: PassContext) -> PassEffect:
    """Compile the whole training step in mode reduce-overhead: its regions replay as CUDA graphs."""
    reason = whole_step_cuda_graphs_applicable(ctx)
    if reason is not None:
        return PassEffect.not_applied(reason)
    return PassEffect(
        compile_step=True, compile_mode="reduce-overhead", inductor_config={"triton.cudagraphs": True},
        verify=check_cudagraphs,
        details={"compile_mode": "reduce-overhead", "scope": "forward, loss, backward and optimizer step",
                 "optimizers": [type(o).__name__ for o in ctx.optimizers]},
    )


def _device_type(device: str) -> str:
    return device.split(":", 1)[0]


def bf16_autocast_applicable(ctx: PassContext) -> str | None:
    """None when the step may run under bf16 autocast with float32 master weights, else why not."""
    if not ctx.training:
        return "the model is in eval mode: for inference use bf16_promotion"
    device_type = _device_type(ctx.device)
    if device_type == "cuda" and not torch.cuda.is_bf16_supported():
        return f"{torch.cuda.get_device_name(ctx.device)} has no bfloat16 support"
    if not torch.amp.is_autocast_available(device_type):
        return f"torch.autocast does not support device type '{device_type}'"
    module = getattr(ctx.model, "_orig_mod", ctx.model)
    params = list(module.parameters()) if isinstance(module, torch.nn.Module) else []
    if not any(p.dtype == torch.float32 for p in params):
        return "no float32 parameter: the model already trains in lower precision"
    return None


def autocast_step(step: Step, device_type: str) -> Step:
    """``step`` run under ``torch.autocast(device_type, dtype=torch.bfloat16)``."""

    @functools.wraps(step)
    def run(model: Any, inputs: tuple[Any, ...]) -> Any:
        with torch.autocast(device_type, dtype=torch.bfloat16):
            return step(model, inputs)

    return run


@register_pass(
    "bf16_autocast",
    level=PassLevel.DYNAMO_FX,
    symptom="float32 GEMMs dominate a training step's forward and backward kernel time",
    order=91,
    aliases=("autocast_bf16", "amp_bf16"),
    applicable=bf16_autocast_applicable,
    suggests=("step_graph_capture", "whole_step_cuda_graphs", "fused_optimizer"),
)
def bf16_autocast(ctx: PassContext) -> PassEffect:
    """Run the training step under bf16 autocast; parameters and optimizer state stay float32."""
    reason = bf16_autocast_applicable(ctx)
    if reason is not None:
        return PassEffect.not_applied(reason)
    device_type = _device_type(ctx.device)
    return PassEffect(
        step_transform=functools.partial(autocast_step, device_type=device_type),
        compute_precision="bfloat16",
        details={"autocast": f"{device_type} bfloat16", "master_weights": "float32"},
    )


APPLICABILITY: dict[str, Applicability] = {
    "fused_optimizer": fused_optimizer_applicable,
    "step_graph_capture": step_graph_capture_applicable,
    "compiled_optimizer_step": compiled_optimizer_step_applicable,
    "whole_step_cuda_graphs": whole_step_cuda_graphs_applicable,
    "bf16_autocast": bf16_autocast_applicable,
}
