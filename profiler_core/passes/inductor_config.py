"""Level-3 passes that only configure Inductor: freezing, and CUDA graphs (``reduce-overhead``).

freezing     folds parameters into constants and constant-folds what depends only on them (the
             weight concatenation of qkv_fusion, the weight casts of bf16_promotion), and lets
             Inductor pre-pack weights. Inference only: the model must be in eval mode and the
             step must run without autograd, since frozen weights no longer receive gradients
             and later weight updates are not seen.
cuda_graphs  records each compiled graph once and replays it, removing per-kernel launch cost
             from launch-bound workloads. CUDA only; Inductor itself skips graphs it cannot
             capture (CPU tensors, dynamic shapes, input mutation) and the plan reports that.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule

from profiler_core.passes.contract import GraphChange, GraphInfo, PassContext, PassEffect, RunFacts
from profiler_core.passes.fx_nodes import module_attribute
from profiler_core.passes.graph_capture import graph_capture_applicability
from profiler_core.passes.registry import PassLevel, register_pass


def check_freezable(gm: GraphModule, info: GraphInfo) -> GraphChange:
    """Freezing takes effect only where the parameters reached the graph as constants; say where.

    Dynamo decides that while tracing: with ``torch._inductor.config.freezing`` on and autograd
    off it installs parameters as graph attributes, which Inductor folds; otherwise they arrive
    as graph inputs and nothing is folded, whatever Inductor's own setting.
    """
    if info.grad_enabled:
        return GraphChange(False, "the graph is compiled with autograd enabled; freezing needs the "
                                  "step to run under torch.no_grad() or torch.inference_mode()")
    as_inputs = sum(isinstance(v, torch.nn.Parameter) for v in info.placeholder_values(gm).values())
    as_constants = sum(1 for n in gm.graph.nodes if n.op == "get_attr"
                       and isinstance(module_attribute(gm, str(n.target), None), torch.nn.Parameter))
    if not as_constants and info.compiler != "inductor":
        return GraphChange(True, details={"parameters_as_inputs": as_inputs})  # the plan says why not
    if not as_constants:
        why = (f"{as_inputs} parameters reached the graph as inputs, not constants (Dynamo traced it "
               "without freezing on): nothing would be folded" if as_inputs
               else "the graph reads no parameters: nothing to fold")
        return GraphChange(False, why, {"parameters_as_inputs": as_inputs})
    return GraphChange(True, details={"parameters_frozen": as_constants, "parameters_as_inputs": as_inputs})


# Inductor settings that Dynamo also reads while tracing, so they must be on around the call of
# the compiled model, not only inside the backend.
TRACE_TIME_CONFIG = frozenset({"freezing"})


@register_pass(
    "freezing",
    level=PassLevel.INDUCTOR_CONFIG,
    symptom="weight-only work (casts, concatenations, layout changes) repeated on every call",
    order=20,
    inference_only=True,
)
def freezing(ctx: PassContext) -> PassEffect:
    """Inductor freezing: fold parameters into constants (inference only)."""
    if ctx.training:
        return PassEffect.not_applied(
            "the model is in train mode; freezing is for inference (call model.eval())")
    return PassEffect(
        inductor_config={"freezing": True},
        graph_rewrite=check_freezable,
        details={"inductor_config": {"freezing": True},
                 "assumes": "weights do not change after compilation"},
    )


def check_cudagraphs(facts: RunFacts) -> GraphChange:
    """Inductor may decline to capture a graph; NOT APPLIED when it declined every one."""
    skipped = int(facts.inductor_counters.get("cudagraph_skips", 0))
    if facts.graphs_compiled and skipped >= facts.graphs_compiled:
        return GraphChange(False, f"Inductor skipped CUDA graphs for all {skipped} compiled graph(s) "
                                  "(run with TORCH_LOGS=perf_hints to see why)", {"graphs_skipped": skipped})
    return GraphChange(True, details={"graphs_skipped": skipped})


def cuda_graphs_applicable(ctx: PassContext) -> str | None:
    """None when the model's compiled regions may replay as CUDA graphs, else why not.

    A training step is left to whole_step_cuda_graphs: compiling the model in reduce-overhead
    graphs its forward and backward but leaves the optimizer's step and the gaps around it."""
    if ctx.training and ctx.optimizers:
        return ("a training step: whole_step_cuda_graphs graphs forward, backward and the optimizer's step "
                "together, where this pass would graph the model's forward and backward only")
    return graph_capture_applicability(ctx)


@register_pass(
    "cuda_graphs",
    level=PassLevel.INDUCTOR_CONFIG,
    symptom="launch-bound: GPU idle between many short kernels, CPU launch time above kernel time",
    order=30,
    aliases=("cudagraphs", "reduce_overhead"),
    applicable=cuda_graphs_applicable,
    suggests=("bf16_promotion",),  # what the recipe pairs graphs with; once launches are gone, GPU time counts
)
def cuda_graphs(ctx: PassContext) -> PassEffect:
    """CUDA graphs via torch.compile mode 'reduce-overhead' (launch-bound workloads, CUDA only)."""
    why = cuda_graphs_applicable(ctx)
    if why is not None:
        return PassEffect.not_applied(why)
    return PassEffect(
        compile_mode="reduce-overhead",
        inductor_config={"triton.cudagraphs": True},
        verify=check_cudagraphs,
        details={"compile_mode": "reduce-overhead", "inductor_config": {"triton.cudagraphs": True}},
    )
