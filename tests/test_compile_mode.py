"""The compile-mode vocabulary is one: the enum, its typed spelling and torch.compile's modes agree."""

from __future__ import annotations

from typing import Any, get_args

import pytest
from pydantic import ValidationError

from profiler_core.compile_mode import (
    CUDA_GRAPH_MODES,
    TORCH_COMPILE_MODES,
    CaptureCompileMode,
    CompileMode,
)
from profiler_core.rundir.manifest import WorkloadRecord


def test_the_typed_spelling_lists_exactly_the_enum() -> None:
    assert list(get_args(CaptureCompileMode)) == [m.value for m in CompileMode]


def test_every_compiled_capture_mode_is_a_torch_compile_mode() -> None:
    compiled = {m.value for m in CompileMode if m is not CompileMode.EAGER}
    assert compiled <= set(TORCH_COMPILE_MODES)
    assert CUDA_GRAPH_MODES <= compiled


def test_the_manifest_takes_the_vocabulary_and_refuses_others() -> None:
    fields: dict[str, Any] = {"path": "w.py", "sha256": "0", "warmup_iterations": 1, "measured_iterations": 1,
                              "device": "cuda", "seed": 0, "python": "3.11"}
    for mode in CompileMode:
        record = WorkloadRecord(compile_mode=mode.value, **fields)
        assert record.model_dump(mode="json")["compile_mode"] == mode.value
    with pytest.raises(ValidationError, match="compile_mode"):
        WorkloadRecord(compile_mode="max-autotune-no-cudagraphs", **fields)
