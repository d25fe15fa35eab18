"""Capture: run a workload under torch.profiler, nsys and ncu into one checked run directory.

    from profiler_core.capture import CaptureConfig, capture

    result = capture("model.py", CaptureConfig(counters="per-config"))
    result.run_dir / "manifest.json"       # its model: profiler_core.rundir.RunManifest

Submodules are imported lazily by their users: the harness child process only needs
``config`` and the workload loader, not the orchestration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from profiler_core.capture.config import CaptureConfig, ClockPolicy, CompileMode, CounterMode, ReplayMode
    from profiler_core.capture.pipeline import CaptureResult, capture

_EXPORTS = {
    "CaptureConfig": "config", "ClockPolicy": "config", "CompileMode": "config", "CounterMode": "config",
    "ReplayMode": "config", "CaptureResult": "pipeline", "capture": "pipeline",
}

__all__ = [
    "CaptureConfig", "CaptureResult", "ClockPolicy", "CompileMode", "CounterMode", "ReplayMode", "capture",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'profiler_core.capture' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"profiler_core.capture.{module}"), name)
