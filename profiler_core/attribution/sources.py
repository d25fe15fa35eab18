"""Attribute a capture: a run directory, or files named one by one.

Which files a run directory holds is :mod:`profiler_core.rundir`'s to say (its manifest,
else the conventional names); this module reads them and runs the engine.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from profiler_core.attribution.run_checks import check_inductor_matches, check_trace_matches, stale_profile_reason
from profiler_core.confinement import read_input
from profiler_core.errors import ArtifactFormatError, AttributionError, ProfilerError
from profiler_core.rundir import (
    GRAPH_CAPTURE_NAME,
    MANIFEST_NAME,
    MODULE_MAP_NAME,
    OPTIMIZED_WORKLOAD_NAME,
    PLAN_NAME,
    PROFILE_NAME,
    RunManifest,
    open_run,
)
from profiler_core.schema import CaptureMeta, ClockSample, Profile

PathLike = str | os.PathLike[str]


def capture_meta_from_manifest(manifest: RunManifest | None, run_dir: PathLike | None = None) -> CaptureMeta | None:
    """The profile's capture metadata from a run manifest (``run_dir``: where it lies, for its plan)."""
    if manifest is None:
        return None
    clocks = [
        ClockSample(phase=ph.name, **ph.clocks.model_dump(include=set(ClockSample.model_fields) - {"phase"}))
        for ph in manifest.phases if ph.clocks is not None and ph.clocks.samples
    ]
    wl = manifest.workload
    return CaptureMeta(
        workload=wl.path,
        workload_identity=wl.identity or _identity_of_older_capture(wl.path, run_dir),
        gpu_name=manifest.gpu.name,
        chip=manifest.gpu.chip,
        sm_count=manifest.gpu.sm_count,
        versions=manifest.versions.model_copy(),
        warmup_iterations=wl.warmup_iterations,
        measured_iterations=wl.measured_iterations,
        compile_mode=wl.compile_mode,
        clock_policy=manifest.clocks.policy,
        clocks=clocks,
        counter_mode=manifest.counters.mode,
        created_at=manifest.created_at,
    )


def _identity_of_older_capture(path: str, run_dir: PathLike | None) -> str | None:
    """The workload identity of a manifest written before manifests recorded one.

    An optimized plan's capture measures ``workload_optimized.py``: the plan beside the capture
    names the original. Without one the identity is unknown (compare then relies on shapes).
    """
    if Path(path).name != OPTIMIZED_WORKLOAD_NAME:
        return Path(path).name
    plan = Path(run_dir) / PLAN_NAME if run_dir is not None else None
    if plan is None or not plan.is_file():
        return None
    try:
        original = json.loads(read_input(plan, what="plan file", max_bytes=64 * 1024 * 1024)).get("workload")
    except (OSError, ValueError, ProfilerError):  # unreadable, or outside the confinement roots
        return None
    return Path(original).name if isinstance(original, str) and original else None


def attribute_files(
    *,
    kineto: PathLike | None = None,
    nsys: PathLike | None = None,
    ncu: PathLike | None = None,
    inductor: PathLike | None = None,
    capture: CaptureMeta | None = None,
    allow_partial: bool = False,
    inductor_optional: bool = False,
    modules: PathLike | None = None,
    manifest: RunManifest | None = None,
    root: Path | None = None,
    graph_capture: PathLike | None = None,
) -> Profile:
    """Read the given artifacts and attribute them (``oprof attribute --kineto ... --ncu ...``).

    ``inductor_optional``: Inductor artifacts that hold no kernel (an eager model, or a
    compile that generated nothing) become a warning instead of an error; a capture
    directory always has them, whether or not the model compiled to anything.
    """
    from profiler_core.ingest import read_inductor, read_kineto, read_ncu, read_nsys

    if kineto is None and nsys is None:
        raise AttributionError("no timeline given: pass --kineto TRACE.json and/or --nsys EXPORT.sqlite")
    from profiler_core.attribution.modules import read_module_methods

    methods = read_module_methods(modules) if modules else []
    kineto_trace = read_kineto(kineto, python_functions=frozenset(name for _, name in methods)) if kineto else None
    nsys_timeline = read_nsys(nsys) if nsys else None
    timeline = kineto_trace if kineto_trace is not None else nsys_timeline
    if manifest is not None and root is not None and timeline is not None:
        check_trace_matches(root, manifest, timeline)
    ind = None
    note = None
    if inductor:
        try:
            ind = read_inductor(inductor)
            if timeline is not None:
                check_inductor_matches(ind, timeline)
        except ArtifactFormatError as err:
            if not inductor_optional:
                raise
            ind = None
            note = f"Inductor artifacts not used: {err}"
    from profiler_core.attribution.engine import attribute  # the engine: not for a caller that only checks staleness

    profile = attribute(
        kineto=kineto_trace,
        nsys=nsys_timeline,
        # a CUPTI range-profiler trace is a counter source of its own (ncu's rows win when both are given)
        ncu=read_ncu(ncu) if ncu else (kineto_trace.range_counters if kineto_trace is not None else None),
        inductor=ind,
        capture=capture,
        allow_partial=allow_partial,
        graph_capture=read_kineto(graph_capture, launches_only=True) if graph_capture else None,
    )
    from profiler_core.attribution.modules import assign_module_paths, read_module_map

    assign_module_paths(profile, kineto=kineto_trace, inductor=ind,
                        module_map=read_module_map(modules) if modules else None, methods=methods)
    if note:
        if not any(k.name.startswith("triton_") for k in profile.kernels):
            # nothing was lost: the run launched no Inductor-generated kernel to map
            note = ("Inductor artifacts hold no kernel records, and the run launched no Inductor-generated "
                    "(triton_*) kernel: every kernel is a library or eager kernel, attributed without them")
        profile.warnings.append(note)
    return profile


def attribute_run(run_dir: PathLike, *, allow_partial: bool = False) -> Profile:
    """Attribute a capture directory written by ``oprof capture`` (one capture: one rank's directory)."""
    art = open_run(Path(run_dir)).artifacts()
    module_map = Path(run_dir) / MODULE_MAP_NAME
    recording = Path(run_dir) / GRAPH_CAPTURE_NAME
    profile = attribute_files(kineto=art.kineto, nsys=art.nsys, ncu=art.ncu, inductor=art.inductor,
                              graph_capture=recording if recording.is_file() else None,
                              capture=capture_meta_from_manifest(art.manifest, run_dir),
                              allow_partial=allow_partial, inductor_optional=True,
                              modules=module_map if module_map.is_file() else None,
                              manifest=art.manifest, root=Path(run_dir))
    profile.warnings.extend(art.notes)
    return profile


def stale_reason(profile_path: PathLike, profile: Profile) -> str | None:
    """Why a profile.json inside a run directory no longer describes that run (None: it does).

    A profile beside a manifest must come from that capture (same creation time and
    workload) and be newer than the artifacts; a profile outside a run directory is
    not checked.
    """
    path = Path(profile_path)
    root = path.parent
    if not (root / MANIFEST_NAME).is_file():
        return None
    try:
        art = open_run(root).artifacts()
    except ArtifactFormatError:
        return None  # the run's own problems surface when it is attributed
    return stale_profile_reason(path, profile, art.manifest,
                                [root / MANIFEST_NAME, art.kineto, art.nsys, art.ncu, art.inductor])


def current_profile(run_dir: PathLike) -> Profile:
    """A run directory's profile: its profile.json while current, else attributed afresh (and flagged)."""
    from profiler_core.profile_io import read_profile

    root = Path(run_dir)
    written = root / PROFILE_NAME
    if not written.is_file():
        return attribute_run(root)
    profile = read_profile(written)
    reason = stale_reason(written, profile)
    if reason is None:
        return profile
    fresh = attribute_run(root)
    fresh.warnings.append(f"ignored a stale profile: {reason}; attributed the run afresh "
                          "(run 'oprof attribute' to rewrite it)")
    return fresh
