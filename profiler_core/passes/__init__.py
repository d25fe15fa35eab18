"""Profile-guided graph passes with numerical validation.

Passes act at three levels of the torch.compile pipeline and compose:

    Level 1  dynamo_fx        the Dynamo FX graph, before AOTAutograd (qkv_fusion, sdpa, bf16_promotion)
                              or the module itself (rnn_reroute, conv_bn_folding, channels_last: structural),
                              or the step's optimizers (fused_optimizer), or the step (bf16_autocast)
    Level 2  post_grad        Inductor post-grad ATen passes with a stable uuid() (cast_cancellation)
    Level 3  inductor_config  Inductor settings (tf32, freezing, cuda_graphs, inductor_compile), and
                              compiling the optimizer's step or the whole training step
                              (compiled_optimizer_step, whole_step_cuda_graphs), or recording it
                              as one CUDA graph (step_graph_capture)

Each pass checks its own legality and ends APPLIED or NOT APPLIED with the reason, and a
record of what it changed. No plan is reported without validation: the transformed model
must reproduce the baseline's outputs within per-dtype tolerances (see ``validation``).

    plan = apply_pass_plan("workload.py", ["qkv_fusion", "sdpa"], device="cuda", out_dir="opt/")
    # opt/plan.json, opt/workload_optimized.py (same workload contract, transformed model)
"""

from profiler_core.passes import (  # noqa: F401  (importing registers the built-in passes)
    bf16_promotion,
    cast_cancellation,
    compile_step,
    convolution,
    inductor_config,
    moe_experts,
    qkv_fusion,
    rnn_reroute,
    sdpa,
    static_kv_cache,
    step_graph,
    tf32,
    training_step,
)
from profiler_core.passes.contract import GraphChange, GraphInfo, PassContext, PassEffect, RunFacts
from profiler_core.passes.manager import apply_passes
from profiler_core.passes.plan import (
    OptimizationPlan,
    PassRecord,
    PassStatus,
    PlanRecord,
    PlanStatus,
    read_plan,
    write_plan,
)
from profiler_core.passes.planner import apply_pass_plan, build_optimized_model, build_optimized_workload
from profiler_core.passes.registry import PassLevel, PassSpec, get_pass, list_passes, register_pass
from profiler_core.passes.validation import DtypePolicy, Tolerance, ValidationResult, validate_outputs

__all__ = [
    "DtypePolicy",
    "GraphChange",
    "GraphInfo",
    "OptimizationPlan",
    "PassContext",
    "PassEffect",
    "PassLevel",
    "PassRecord",
    "PassSpec",
    "PassStatus",
    "PlanRecord",
    "PlanStatus",
    "RunFacts",
    "Tolerance",
    "ValidationResult",
    "apply_pass_plan",
    "apply_passes",
    "build_optimized_model",
    "build_optimized_workload",
    "get_pass",
    "list_passes",
    "read_plan",
    "register_pass",
    "validate_outputs",
    "write_plan",
]
