"""TF32: let float32 GEMMs use tensor cores with a 10-bit mantissa (the gentler sibling of BF16).

Level 3: no graph change, a precision setting for the compiled code. The backend compiles and
runs each compiled graph under ``torch.set_float32_matmul_precision("high")`` and restores the
caller's setting afterwards, so the process-wide flag is not left changed and eager regions
(graph breaks, rerouted RNNs) keep the user's precision. Inputs and outputs stay float32;
validation uses the tf32 tolerance. TF32 exists on NVIDIA GPUs from Ampere (sm_80) on: on CPU,
or an older GPU, the pass declines.
"""

from __future__ import annotations

import torch

from profiler_core.passes.contract import PassContext, PassEffect
from profiler_core.passes.registry import PassLevel, register_pass

TF32_MIN_CAPABILITY = (8, 0)


@register_pass(
    "tf32",
    level=PassLevel.INDUCTOR_CONFIG,
    symptom="float32 GEMMs with no tensor-core activity where bf16 numerics are not acceptable",
    order=10,
    aliases=("tensorfloat32",),
)
def tf32(ctx: PassContext) -> PassEffect:
    """Run the compiled graphs' float32 matmuls in TF32 (float32_matmul_precision='high')."""
    if not ctx.on_cuda:
        return PassEffect.not_applied(
            f"TF32 is an NVIDIA tensor-core mode; on device '{ctx.device}' it would change nothing")
    capability = torch.cuda.get_device_capability(ctx.device)
    if capability < TF32_MIN_CAPABILITY:
        return PassEffect.not_applied(
            f"{torch.cuda.get_device_name(ctx.device)} (sm_{capability[0]}{capability[1]}) has no TF32 "
            "tensor cores; TF32 needs sm_80 or newer")
    return PassEffect(
        matmul_precision="high",
        compute_precision="tf32",
        details={"float32_matmul_precision": "high", "scope": "compiled graphs only",
                 "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32)},
    )
