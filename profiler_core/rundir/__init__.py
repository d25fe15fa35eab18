"""The run directory: its layout (one capture, or one per rank), its manifests, its artifacts.

Capture writes a run directory, attribution and everything after it read one; this package
is the one place that knows what lies where::

    from profiler_core.rundir import open_run

    run = open_run("oprof-runs/resnet18-...")
    for rank, one in run.ranks():        # [(None, run)] for a single capture
        art = one.artifacts()           # kineto / nsys / ncu / inductor paths, checked against the manifest

``rundir.layout`` (the names) imports nothing heavy, so the capture's harness child can use
it; the models load on first use of a name exported here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from profiler_core.rundir.layout import (
    BASELINE_DIR,
    COMPARISON_NAME,
    FINDINGS_NAME,
    GRAPH_CAPTURE_NAME,
    MANIFEST_NAME,
    MODULE_MAP_NAME,
    OPTIMIZE_NAME,
    OPTIMIZED_WORKLOAD_NAME,
    PLAN_NAME,
    PROFILE_NAME,
    RANKS_JSON,
    REPORT_NAME,
    TRIAL_CAPTURE_DIR,
    WALLTIME_NAME,
    rank_dir,
    trial_dir,
)

if TYPE_CHECKING:
    from profiler_core.rundir.artifacts import RunArtifacts, find_run_artifacts
    from profiler_core.rundir.manifest import RunManifest, read_manifest, write_manifest
    from profiler_core.rundir.ranks import RankEntry, RanksManifest, read_ranks_manifest, write_ranks_manifest
    from profiler_core.rundir.run import Run, is_multi_rank, open_run

_EXPORTS = {
    "RunArtifacts": "artifacts", "find_run_artifacts": "artifacts",
    "RunManifest": "manifest", "read_manifest": "manifest", "write_manifest": "manifest",
    "RankEntry": "ranks", "RanksManifest": "ranks", "read_ranks_manifest": "ranks", "write_ranks_manifest": "ranks",
    "Run": "run", "is_multi_rank": "run", "open_run": "run",
}

__all__ = [
    "GRAPH_CAPTURE_NAME",
    "BASELINE_DIR", "COMPARISON_NAME", "FINDINGS_NAME", "MANIFEST_NAME", "MODULE_MAP_NAME", "OPTIMIZED_WORKLOAD_NAME",
    "OPTIMIZE_NAME", "PLAN_NAME", "PROFILE_NAME", "RANKS_JSON", "REPORT_NAME", "TRIAL_CAPTURE_DIR", "WALLTIME_NAME",
    "RankEntry", "RanksManifest", "Run", "RunArtifacts", "RunManifest", "find_run_artifacts", "is_multi_rank",
    "open_run", "rank_dir", "read_manifest", "read_ranks_manifest", "trial_dir", "write_manifest",
    "write_ranks_manifest",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'profiler_core.rundir' has no attribute {name!r}")
    return getattr(importlib.import_module(f"profiler_core.rundir.{module}"), name)
