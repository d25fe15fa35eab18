"""How a workload's model is compiled: eager, or one of torch.compile's modes. One vocabulary.

The capture runs a model in one of :class:`CompileMode` (recorded in the manifest and the
profile); a pass plan may compile with any mode torch.compile takes
(:data:`TORCH_COMPILE_MODES`); the rules need to know which modes replay CUDA graphs.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args


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
