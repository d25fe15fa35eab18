"""How a workload's model is compiled: eager, or one of torch.compile's modes. One vocabulary.

The capture runs a model in one of :class:`CompileMode` (recorded in the manifest and the
profile); a pass plan may compile with any mode torch.compile takes
(:data:`TORCH_COMPILE_MODES`); the rules need to know which modes replay CUDA graphs.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, get_args

from profiler_core.errors import WorkloadError


class CompileMode(StrEnum):
    """How the harness wraps the model: eager, or torch.compile with one of Inductor's modes."""

    EAGER = "eager"
    DEFAULT = "default"
    MAX_AUTOTUNE = "max-autotune"
    REDUCE_OVERHEAD = "reduce-overhead"


# CompileMode's values as a type, for signatures a schema is generated from (the MCP tools);
# tests/test_compile_mode.py holds the two to the same values.
CaptureCompileMode = Literal["eager", "default", "max-autotune", "reduce-overhead"]

# What torch.compile(mode=...) takes: what a pass plan may compile with.
TorchCompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
TORCH_COMPILE_MODES: tuple[str, ...] = get_args(TorchCompileMode)

# Modes in which Inductor replays the step as CUDA graphs (one launch per graph, not per kernel).
CUDA_GRAPH_MODES: frozenset[str] = frozenset({CompileMode.REDUCE_OVERHEAD.value, CompileMode.MAX_AUTOTUNE.value})


def compile_model(model: Any, mode: CompileMode, path: Path) -> Any:
    """``model`` compiled in ``mode`` (eager: as it is); a compile failure names the workload and the fix."""
    import torch

    if mode is CompileMode.EAGER:
        return model
    if isinstance(model, torch._dynamo.eval_frame.OptimizedModule):
        # the workload compiled its model itself (workload_optimized.py does, with the plan's
        # backend and mode): compiling it again would nest two compilers
        return model
    try:
        return torch.compile(model, mode=None if mode is CompileMode.DEFAULT else mode.value)
    except Exception as err:
        raise WorkloadError(
            f"{path}: torch.compile(mode={mode.value!r}) failed: {type(err).__name__}: {err}; "
            "try --compile-mode eager"
        ) from err
