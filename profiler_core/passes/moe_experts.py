"""moe_grouped_experts: a transformers mixture of experts runs each layer's experts as bf16 grouped GEMMs.

transformers (5.x) stores a MoE layer's experts as stacked weights (``gate_up_proj`` /
``up_proj`` and ``down_proj``, one slice per expert) and runs them through its experts
interface (``config._experts_implementation``: ``grouped_mm``, ``batched_mm`` or ``eager``).
Under ``torch.compile`` its ``grouped_mm`` path takes bfloat16 weights only; with float32
weights it falls back to an opaque custom op that reads the per-expert token counts on the
host (``offs.tolist()``: a device-to-host sync per projection) and launches one FP32 GEMM per
expert, each sized by the tokens the router sent it::

    before:  per layer, 2 x (host read of the counts, then one FP32 GEMM per expert)
    after:   per layer, 2 x one bf16 grouped GEMM over all experts, the counts staying on the GPU

The pass casts each experts module's weights to bfloat16 and selects ``grouped_mm``: the expert
GEMMs move to the Tensor Cores, the host reads go, and the step becomes one a CUDA graph can
hold (so ``cuda_graphs`` can follow; it suggests it). ``torch.autocast`` does not reach this
path (the weights stay float32 under it, so the fallback and its syncs remain): this is what
the pass adds over the recipe. The rest of the model keeps its precision (``bf16_promotion``
is separate). Validation holds the plan to the bfloat16 rule, counting tokens whose experts
change as the MoE rule does.
"""

from __future__ import annotations

from typing import Any

from profiler_core.passes.contract import GraphChange, PassContext, PassEffect, RunFacts
from profiler_core.passes.registry import PassLevel, register_pass

EXPERT_WEIGHTS = ("gate_up_proj", "up_proj", "down_proj")  # transformers' stacked expert weights
GROUPED = "grouped_mm"


def _root(model: Any) -> Any:
    return getattr(model, "_orig_mod", model)


def expert_weights(module: Any) -> list[Any]:
    """The stacked expert weight tensors a module holds (those of ``EXPERT_WEIGHTS`` it has)."""
    import torch

    return [p for attr in EXPERT_WEIGHTS if isinstance(p := getattr(module, attr, None), torch.Tensor)]


def experts_modules(model: Any) -> list[tuple[str, Any]]:
    """The modules holding stacked expert weights that transformers' experts interface dispatches."""
    import torch

    found: list[tuple[str, Any]] = []
    root = _root(model)
    if not isinstance(root, torch.nn.Module):
        return found
    for name, module in root.named_modules():
        config = getattr(module, "config", None)
        if config is None or not hasattr(config, "_experts_implementation"):
            continue
        if any(isinstance(p, torch.nn.Parameter) and p.dim() == 3 for p in expert_weights(module)):
            found.append((name, module))
    return found


def experts_host_read(module: Any) -> str | None:
    """The host read an experts module's dispatch makes, or None; only for transformers experts modules.

    Its class source shows the eager implementation's reads (``.nonzero()``), which grouped_mm and
    batched_mm never run; under torch.compile, grouped_mm on weights other than bfloat16 falls back
    to a per-expert loop that reads the token counts (``offs.tolist()``).
    """
    import torch

    implementation = getattr(getattr(module, "config", None), "_experts_implementation", "eager")
    if implementation in (None, "eager"):
        return None  # the class's own forward runs: its source says
    if implementation == GROUPED:
        weights = expert_weights(module)
        if weights and any(p.dtype != torch.bfloat16 for p in weights):
            return "offs.tolist() (grouped_mm's fallback for non-bf16 weights under torch.compile)"
    return ""  # a dispatch with no host read


def _grouped_mm_available(device: str) -> str | None:
    import torch

    if not (hasattr(torch.nn.functional, "grouped_mm") or hasattr(torch, "_grouped_mm")):
        return f"torch {torch.__version__} has no grouped_mm (torch 2.9 or later has it)"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            return "CUDA is not available here"
        index = torch.device(device).index
        major, minor = torch.cuda.get_device_capability(index)
        if (major, minor) < (8, 0):
            return (f"{torch.cuda.get_device_name(index)} (sm_{major}{minor}) runs no bf16 grouped GEMM: "
                    "it needs sm_80 or later")
    return None


def moe_grouped_experts_applicable(ctx: PassContext) -> str | None:
    """None when the model has transformers experts modules to run as bf16 grouped GEMMs, else why not."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return "transformers is not installed: the pass works on transformers mixture-of-experts models"
    import torch

    modules = experts_modules(ctx.model)
    if not modules:
        return (f"no experts module in {type(_root(ctx.model)).__name__}: the pass needs transformers' stacked "
                "experts (gate_up_proj / down_proj run through its experts interface), as in Mixtral or Qwen-MoE")
    if ctx.training:
        return "the model is in train mode: bf16 expert weights would drop the float32 master weights"
    why = _grouped_mm_available(ctx.device)
    if why is not None:
        return why
    weights = [p for _, m in modules for p in expert_weights(m)]
    implementations = {getattr(m.config, "_experts_implementation", None) for _, m in modules}
    if all(p.dtype == torch.bfloat16 for p in weights) and implementations == {GROUPED}:
        return "the experts already run grouped_mm on bfloat16 weights"
    return None


def _set_grouped(model: Any, modules: list[tuple[str, Any]]) -> list[str]:
    """Select grouped_mm through the model's own setter where it has one; the implementations before."""
    before = sorted({str(getattr(m.config, "_experts_implementation", None)) for _, m in modules})
    root = _root(model)
    setter = getattr(root, "set_experts_implementation", None)
    if callable(setter):
        setter(GROUPED)
    for _, module in modules:
        if getattr(module.config, "_experts_implementation", None) != GROUPED:
            module.config._experts_implementation = GROUPED
    return before


@register_pass(
    "moe_grouped_experts",
    level=PassLevel.DYNAMO_FX,
    symptom="a mixture of experts runs one FP32 GEMM per expert after reading the routed token counts on "
            "the host (transformers' grouped_mm fallback)",
    order=8,
    structural=True,
    aliases=("grouped_experts", "moe_grouped_mm"),
    inference_only=True,
    applicable=moe_grouped_experts_applicable,
    suggests=("cuda_graphs", "bf16_promotion"),
)
def moe_grouped_experts(ctx: PassContext) -> PassEffect:
    """Cast the experts' stacked weights to bf16 and run them through grouped_mm: no host reads."""
    why = moe_grouped_experts_applicable(ctx)
    if why is not None:
        return PassEffect.not_applied(why)
    import torch
    import transformers

    modules = experts_modules(ctx.model)
    before = _set_grouped(ctx.model, modules)
    cast = sum(p.numel() for _, m in modules for p in expert_weights(m)
               if isinstance(p, torch.nn.Parameter) and p.dtype != torch.bfloat16)
    for _, module in modules:
        module.to(torch.bfloat16)
    details = {"experts_modules": len(modules), "first": modules[0][0], "implementation_before": before,
               "implementation": GROUPED, "expert_parameters_cast_to_bf16": cast,
               "transformers": str(transformers.__version__)}

    def verify(_facts: RunFacts) -> GraphChange:
        off = [name for name, m in modules if getattr(m.config, "_experts_implementation", None) != GROUPED]
        if off:
            return GraphChange(False, f"the experts implementation of {off[0]} was reset after the pass set "
                                      "grouped_mm")
        return GraphChange(True, details={"experts_grouped": len(modules)})

    return PassEffect(details=details, compute_precision="bfloat16", verify=verify)
