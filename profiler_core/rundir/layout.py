"""The names inside a run directory: one place that spells them.

    <run>/manifest.json          RunManifest (one capture) or RanksManifest (kind "multi-rank")
    <run>/kineto.json            torch.profiler trace (the Kineto phase)
    <run>/timeline.nsys-rep      Nsight Systems report, and its export timeline.sqlite
    <run>/counters.ncu-rep       Nsight Compute report, and its raw export counters.csv
    <run>/inductor/              torch_trace.tgz (TORCH_TRACE, packed) and output_code.log
    <run>/modules.json           the module map the harness recorded
    <run>/graph_capture.json.gz  the recording of a step's CUDA graph, traced (step_graph_capture)
    <run>/logs/                  one stdout/stderr log per phase
    <run>/profile.json           written by attribution
    <run>/findings.json          written by diagnosis; plan.json by a pass plan
    <run>/rank<N>/               multi-rank: one run directory per rank (its own manifest.json)
    <run>/ranks.json             multi-rank: the merged view across ranks, written by attribution

An optimize run (``oprof optimize``) holds captures and plans; its names are spelled here too:

    <opt>/baseline/              the baseline capture (a run directory as above)
    <opt>/trial-<N>-<pass>/      one trial: plan.json, workload_optimized.py, capture/ (its run directory),
                                 findings.json when the pass was kept
    <opt>/findings.json          the baseline's findings
    <opt>/optimize.json          what the loop tried and kept, its wall times and the recipe beside them
    <opt>/walltime.json          end-to-end wall times (baseline, optimized)
    <opt>/comparison.json        baseline vs the kept plan
    <opt>/report.html            the report

A manifest names its artifacts relative to the run directory, so the directory can move
or ship whole; a name that leaves the directory is refused (:func:`listed_path`).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from profiler_core.errors import ArtifactFormatError

MANIFEST_NAME = "manifest.json"
KINETO_NAME = "kineto.json"
TIMELINE_REPORT_NAME = "timeline.nsys-rep"
TIMELINE_NAME = "timeline.sqlite"
COUNTERS_REPORT_NAME = "counters.ncu-rep"
COUNTERS_CSV_NAME = "counters.csv"
INDUCTOR_DIR = "inductor"
TORCH_TRACE_DIR = "torch_trace"
TORCH_TRACE_ARCHIVE = "torch_trace.tgz"
OUTPUT_CODE_LOG = "output_code.log"
MODULE_MAP_NAME = "modules.json"
# the launches a CUDA graph recorded during warm-up (step_graph_capture), traced while it recorded them;
# the harness names the file in GRAPH_CAPTURE_ENV for the pass, which writes it
GRAPH_CAPTURE_NAME = "graph_capture.json.gz"
GRAPH_CAPTURE_ENV = "OPROF_GRAPH_CAPTURE_TRACE"
LOGS_DIR = "logs"
PROFILE_NAME = "profile.json"
FINDINGS_NAME = "findings.json"
PLAN_NAME = "plan.json"
RANKS_JSON = "ranks.json"
OPTIMIZED_WORKLOAD_NAME = "workload_optimized.py"
# an optimize run
BASELINE_DIR = "baseline"
TRIAL_CAPTURE_DIR = "capture"
OPTIMIZE_NAME = "optimize.json"
WALLTIME_NAME = "walltime.json"
COMPARISON_NAME = "comparison.json"
REPORT_NAME = "report.html"
OPTIMIZE_NAMES: frozenset[str] = frozenset({
    BASELINE_DIR, FINDINGS_NAME, OPTIMIZE_NAME, WALLTIME_NAME, COMPARISON_NAME, REPORT_NAME,
})

# Where each kind of artifact is looked for when no manifest names it, in order of preference
# (the capture's own names first, then what users and older captures call them).
CANDIDATES: dict[str, tuple[str, ...]] = {
    "kineto": ("kineto.json.gz", KINETO_NAME, "trace.json.gz", "trace.json"),
    "nsys": (TIMELINE_NAME, "nsys.sqlite"),
    "ncu": (COUNTERS_CSV_NAME, COUNTERS_REPORT_NAME, "ncu_full_raw.csv", "ncu_per_config_raw.csv", "ncu.csv"),
    "inductor": (INDUCTOR_DIR, TORCH_TRACE_ARCHIVE, TORCH_TRACE_DIR, OUTPUT_CODE_LOG, OUTPUT_CODE_LOG + ".gz",
                 "output_code.py"),
}

# The files a capture writes, by name (what a run directory may hold besides what its manifest lists).
CAPTURE_NAMES: frozenset[str] = frozenset({
    MANIFEST_NAME, KINETO_NAME, "kineto.json.gz", "trace.json", "trace.json.gz", TIMELINE_NAME,
    TIMELINE_REPORT_NAME, "nsys.sqlite", COUNTERS_CSV_NAME, COUNTERS_REPORT_NAME, TORCH_TRACE_ARCHIVE,
    OUTPUT_CODE_LOG, OUTPUT_CODE_LOG + ".gz", RANKS_JSON,
})


def trial_dir(optimize_dir: str | Path, number: int, pass_name: str) -> Path:
    """``<opt>/trial-<N>-<pass>``: the N-th trial of an optimize run (numbered from 1)."""
    return Path(optimize_dir) / f"trial-{number}-{pass_name}"


def rank_dir(run_dir: str | Path, rank: int) -> Path:
    """``<run>/rank<N>``."""
    return Path(run_dir) / f"rank{rank}"


def listed_path(root: Path, kind: str, rel: str) -> Path:
    """``root / rel`` for an artifact the manifest names; refused when it leaves the run directory.

    A manifest's paths are relative to its run directory (so the directory can move); an
    absolute path or one climbing out with ``..`` points at another capture, or anywhere.
    """
    pure = PurePosixPath(rel.replace("\\", "/"))
    if pure.is_absolute() or os.path.isabs(rel) or ".." in pure.parts or not rel.strip():
        raise ArtifactFormatError(
            f"{root / MANIFEST_NAME}: artifact '{kind}' is {rel!r}, outside its run directory; a manifest "
            "names its files relative to the run directory: re-capture, or attribute the files explicitly")
    return root / rel


def present(path: Path) -> Path | None:
    """``path``, or its ``.gz`` (a compressed copy) or its uncompressed twin, whichever exists."""
    for candidate in (path, path.with_name(path.name + ".gz"),
                      path.with_name(path.name[:-3]) if path.name.endswith(".gz") else None):
        if candidate is not None and (candidate.exists() or candidate.is_symlink()):
            return candidate
    return None
