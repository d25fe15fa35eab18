"""The transformations a finding may license, by name: the pass registry's names, open to plugins.

A finding names its transformation as a pass registers itself (``sdpa``, ``qkv_fusion``); a few
name fixes outside the graph that no pass applies yet (``elementwise_fusion``). The built-in
names are the constants of :class:`Transformation`, so findings written with them read the
same as ever. Every pass registered through :func:`profiler_core.passes.register_pass`
(built-in or a plugin's) adds its name and aliases here; a diagnosis rule that licenses a
pass the diagnosing process has not imported names it in ``@rule(..., licenses=...)``::

    @rule("my_symptom", licenses=("my_pass",))      # my_pass: a plugin pass
    def my_symptom(ctx): ...
"""

from __future__ import annotations

import re
from enum import StrEnum

from profiler_core.errors import ProfilerError

_SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


class Transformation(StrEnum):
    """The built-in transformation names (graph-pass names, plus fixes outside the graph)."""

    BF16_PROMOTION = "bf16_promotion"
    TF32 = "tf32"
    QKV_FUSION = "qkv_fusion"
    SDPA = "sdpa"
    CUDA_GRAPHS = "cuda_graphs"
    FREEZING = "freezing"
    RNN_REROUTE = "rnn_reroute"  # structural: route the recurrence to fused cuDNN RNN
    ELEMENTWISE_FUSION = "elementwise_fusion"  # compile the region so Inductor fuses the chain
    CONV_BN_FOLDING = "conv_bn_folding"  # fold eval BatchNorms into their convolutions
    CHANNELS_LAST = "channels_last"  # NHWC convolutions, no layout transpositions
    INDUCTOR_COMPILE = "inductor_compile"  # compile an eagerly run model
    FUSED_OPTIMIZER = "fused_optimizer"  # one fused kernel per parameter group for the optimizer step
    COMPILED_OPTIMIZER_STEP = "compiled_optimizer_step"  # torch.compile of optimizer.step()
    WHOLE_STEP_CUDA_GRAPHS = "whole_step_cuda_graphs"  # the training step compiled in mode reduce-overhead
    BF16_AUTOCAST = "bf16_autocast"  # the training step under bf16 autocast, float32 master weights
    STATIC_KV_CACHE = "static_kv_cache"  # structural: a generate() decode loop on a static KV cache, graphed
    MOE_GROUPED_EXPERTS = "moe_grouped_experts"  # structural: MoE experts as bf16 grouped GEMMs, no host reads


# Built-in names no built-in pass implements: a finding naming one is a fix to make by hand, or a
# plugin's pass registered under that name (tests/passes/test_pass_registry.py keeps this exact).
WITHOUT_BUILTIN_PASS: frozenset[str] = frozenset({Transformation.ELEMENTWISE_FUSION.value})

_KNOWN: set[str] = {t.value for t in Transformation}


def normalize_name(name: str) -> str:
    """Pass and transformation names are snake_case; the kebab-case spelling is accepted too."""
    return name.strip().lower().replace("-", "_")


def register_transformation(name: str) -> str:
    """Make ``name`` a transformation findings may license; returns it normalised."""
    key = normalize_name(name)
    if not _SNAKE.match(key):
        raise ProfilerError(f"transformation name {name!r} is not a snake_case identifier; name it like a "
                            "pass (e.g. 'my_pass')")
    _KNOWN.add(key)
    return key


def known_transformations() -> frozenset[str]:
    """Every name a finding may license in this process: the built-ins and every registered one."""
    return frozenset(_KNOWN)


def check_transformation(name: str) -> str:
    """``name`` normalised, if a finding may license it; else a ProfilerError naming the way to register it."""
    key = normalize_name(name)
    if key not in _KNOWN:
        raise ProfilerError(
            f"transformation {name!r} is neither a built-in nor a registered pass; register the pass "
            "(operator_profiler.passes entry point) or name it in the rule's @rule(..., licenses=...); "
            f"known: {', '.join(sorted(_KNOWN))}")
    return key
