"""static_kv_cache: a ``generate()`` decode loop on a fixed-size KV cache, its decode step compiled.

A transformers model decoding with ``generate()`` runs one forward per new token on a
``DynamicCache`` that grows by one position each step: every step has new shapes, so nothing
can be compiled once and replayed, and the host launches each layer's kernels one by one (the
GPU idles between them). With a static cache the KV tensors are allocated once at their full
length and written in place, so every decode step has the same shapes: transformers then
compiles the decode step (not the prefill) with ``torch.compile`` and, on CUDA, mode
``reduce-overhead`` records it as a CUDA graph replayed per token::

    before:  generate() -> prefill forward, then N x forward(DynamicCache, length L+i)
    after:   generate() -> prefill forward, then N x compiled forward(StaticCache, length P+N)

The pass sets ``generation_config.cache_implementation = "static"`` and a ``CompileConfig`` on
the model: generate() builds the cache for each call's batch and length and compiles through
its own ``get_compiled_call`` (transformers >= 4.48; checked on 5.24). Replacing ``forward``
by ``torch.compile(model.forward, mode="reduce-overhead")`` by hand, transformers' earlier
recipe, also compiles the prefill and the cache set-up. Greedy decoding must produce the same
tokens: validation compares the generated ids (agreement and top-k, output_kinds.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from profiler_core.passes.contract import GraphChange, PassContext, PassEffect, RunFacts
from profiler_core.passes.registry import PassLevel, register_pass

MIN_TRANSFORMERS = (4, 48)  # generation_config.compile_config and the auto-compiled decode step


def _transformers_version() -> tuple[str | None, tuple[int, ...]]:
    try:
        import transformers
    except ImportError:
        return None, ()
    text = str(transformers.__version__)
    parts = []
    for piece in text.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return text, tuple(parts)


def step_calls_generate(step: Callable[..., Any] | None) -> bool | None:
    """Whether the step's source calls ``.generate(``; None when the source cannot be read."""
    if step is None:
        return None
    try:
        source = inspect.getsource(step)
    except (OSError, TypeError):
        return None
    return ".generate(" in source


def static_kv_cache_applicability(ctx: PassContext, step: Callable[..., Any] | None = None) -> str | None:
    """None when static_kv_cache can apply to this workload, else why it cannot."""
    version, parsed = _transformers_version()
    if version is None:
        return "transformers is not installed: the pass works on transformers models decoding with generate()"
    model = ctx.model
    from transformers import GenerationMixin, PreTrainedModel

    if not isinstance(model, PreTrainedModel) or not isinstance(model, GenerationMixin):
        return (f"the model ({type(model).__name__}) is not a transformers model that generates: the pass "
                "changes how generate() caches keys and values")
    if not model.can_generate():
        return f"{type(model).__name__} cannot generate() (no language-model head)"
    if parsed < MIN_TRANSFORMERS:
        return (f"transformers {version} has no compile_config for generate(); needs "
                f"{'.'.join(map(str, MIN_TRANSFORMERS))} or later")
    if not getattr(model, "_can_compile_fullgraph", False):
        return (f"{type(model).__name__} is not marked compilable with a static KV cache in transformers "
                f"{version} (_can_compile_fullgraph is false)")
    if getattr(getattr(model, "generation_config", None), "cache_implementation", None) == "static":
        return "the model's generation_config already asks for a static cache"
    calls = step_calls_generate(step)
    if calls is False:
        return "the workload's step does not call generate(): there is no decode loop to make static"
    return None


@register_pass(
    "static_kv_cache",
    level=PassLevel.DYNAMO_FX,
    symptom="a generate() decode loop: one forward per new token over a growing KV cache, many small "
            "launches per token, the GPU idle between them",
    order=5,
    structural=True,
    aliases=("static_cache", "decode_cuda_graphs"),
    inference_only=True,
    applicable=static_kv_cache_applicability,
)
def static_kv_cache(ctx: PassContext) -> PassEffect:
    """Decode on a static KV cache with the decode step compiled (CUDA-graphed on CUDA)."""
    why = static_kv_cache_applicability(ctx)
    if why is not None:
        return PassEffect.not_applied(why)
    from transformers import CompileConfig

    version, _ = _transformers_version()
    model = ctx.model
    mode = "reduce-overhead" if ctx.on_cuda else "default"
    config = CompileConfig(fullgraph=False, mode=mode)
    if not ctx.on_cuda:
        config._compile_all_devices = True  # type: ignore[assignment]  # transformers compiles the decode step only on accelerators otherwise
    model.generation_config.cache_implementation = "static"
    model.generation_config.compile_config = config
    details = {"cache_implementation": "static", "decode_compile_mode": mode, "transformers": version,
               "compiled": "the decode step (generate()'s get_compiled_call); the prefill runs uncompiled"}

    def verify(_facts: RunFacts) -> GraphChange:
        # generate() compiles its decode step only when it used the static cache: the proof it ran
        if getattr(model, "_compiled_call", None) is None:
            return GraphChange(False, "generate() never compiled a decode step: the step does not call "
                                      "generate() on this model, or it decoded a single token")
        return GraphChange(True, details={"decode_step_compiled": True})

    return PassEffect(details=details, verify=verify)
