"""operator-profiler: which PyTorch operator is slow, and why (hardware counters per operator).

The pipeline, one subpackage per stage::

    capture/      workload.py -> run dir (Kineto, nsys SQLite, ncu counters, Inductor artifacts)
    rundir/       the run directory: its layout, manifests, artifacts, open_run()
    ingest/       artifacts -> records (profiler_core.records)
    metrics/      the 20-counter catalog, per-chip names, aggregation rules
    attribution/  records -> profile.json (operators -> kernels -> counters, with evidence tiers)
    analysis/     diagnose, compare
    report/       terminal, markdown, HTML, Perfetto trace
    passes/       profile-guided graph passes + numerical validation
    optimize/     the closed loop

``profiler_core.api`` holds the use cases; ``profiler_core.cli`` (``oprof``) and
``mcp_server`` (``oprof-mcp``) are thin adapters over it (docs/architecture.md).
"""

from typing import TYPE_CHECKING, Any

from profiler_core.errors import (
    ArtifactFormatError,
    AttributionError,
    DeterminismError,
    PassError,
    ProfilerError,
    SchemaError,
    ToolNotFoundError,
    WorkloadError,
)

if TYPE_CHECKING:
    from profiler_core.profile_io import read_profile, write_profile
    from profiler_core.schema import Profile

__version__ = "0.1.0"

_LAZY = {"Profile": "profiler_core.schema", "read_profile": "profiler_core.profile_io",
         "write_profile": "profiler_core.profile_io"}


def __getattr__(name: str) -> Any:
    # The schema (pydantic) loads on first use, so ``oprof --help`` and ``--version`` stay instant.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'profiler_core' has no attribute {name!r}")

__all__ = [
    "ArtifactFormatError",
    "AttributionError",
    "DeterminismError",
    "PassError",
    "Profile",
    "ProfilerError",
    "SchemaError",
    "ToolNotFoundError",
    "WorkloadError",
    "__version__",
    "read_profile",
    "write_profile",
]
