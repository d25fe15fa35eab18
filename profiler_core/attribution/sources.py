"""Find and load the artifacts of a capture: a run directory, or files named one by one.

A run directory (what ``oprof capture`` writes) holds ``manifest.json`` naming its artifacts;
without a manifest the conventional names are looked up (``kineto.json[.gz]``,
``timeline.sqlite`` / ``nsys.sqlite``, ``counters.csv`` / ``counters.ncu-rep`` / ``ncu*.csv``,
``inductor/`` / ``torch_trace.tgz`` / ``output_code.log``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from profiler_core.attribution.engine import attribute
from profiler_core.attribution.run_checks import (
    check_inductor_matches,
    check_trace_matches,
    manifest_entry,
    missing_listed,
    present,
    stale_profile_reason,
    status_warnings,
)
from profiler_core.capture.manifest import MANIFEST_NAME, RunManifest, read_manifest
from profiler_core.confinement import read_input
from profiler_core.errors import ArtifactFormatError, AttributionError, ProfilerError
from profiler_core.schema import CaptureMeta, ClockSample, Profile

PathLike = str | os.PathLike[str]

_WHAT = {"kineto": "Kineto trace", "nsys": "Nsight Systems export", "ncu": "Nsight Compute counters",
         "inductor": "Inductor artifacts"}
_CANDIDATES = {
    "kineto": ("kineto.json.gz", "kineto.json", "trace.json.gz", "trace.json"),
    "nsys": ("timeline.sqlite", "nsys.sqlite"),
    "ncu": ("counters.csv", "counters.ncu-rep", "ncu_full_raw.csv", "ncu_per_config_raw.csv", "ncu.csv"),
    "inductor": ("inductor", "torch_trace.tgz", "torch_trace", "output_code.log", "output_code.log.gz",
                 "output_code.py"),
}


@dataclass(frozen=True)
class RunArtifacts:
    """The artifact paths of one capture (None where a phase did not produce one)."""

    kineto: Path | None = None
    nsys: Path | None = None
    ncu: Path | None = None
    inductor: Path | None = None
    manifest: RunManifest | None = None
    notes: tuple[str, ...] = ()  # what the run-directory checks flagged (warnings for the profile)


def _existing(path: Path | None) -> Path | None:
    return path if path is not None and path.exists() else None


def _from_manifest(root: Path, manifest: RunManifest) -> dict[str, Path | None]:
    """The artifacts the manifest names, each checked to lie in the run directory and to exist."""
    art = manifest.artifacts
    listed = {kind: [(field, rel) for field, rel in fields if rel]
              for kind, fields in (("kineto", [("kineto", art.kineto)]), ("nsys", [("timeline", art.timeline)]),
                                   ("ncu", [("counters_csv", art.counters_csv),
                                            ("counters_report", art.counters_report)]),
                                   ("inductor", [("torch_trace", art.torch_trace),
                                                 ("output_code", art.output_code)]))}
    found: dict[str, Path | None] = dict.fromkeys(_CANDIDATES)
    for kind, entries in listed.items():
        paths = [manifest_entry(root, field, rel) for field, rel in entries]
        found[kind] = next((hit for hit in map(present, paths) if hit is not None), None)
        if paths and found[kind] is None and kind != "inductor":
            raise missing_listed(root, _WHAT[kind], [rel for _, rel in entries])
    return found


def find_run_artifacts(run_dir: PathLike) -> RunArtifacts:
    """Locate a run directory's artifacts (manifest first, then conventional names).

    What the manifest lists must be there: a listed timeline or counters file that is
    missing is an error (a listed Inductor file that is missing is a warning, attribution
    then runs without the fusion map). A manifest path outside the run directory is refused.
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise ArtifactFormatError(f"{root}: not a run directory; pass the folder 'oprof capture' wrote")
    manifest = read_manifest(root) if (root / MANIFEST_NAME).exists() else None
    notes: list[str] = []
    inductor_missing = False
    if manifest is not None:
        notes.extend(status_warnings(root, manifest))
        found = _from_manifest(root, manifest)
        listed_inductor = [p for p in (manifest.artifacts.torch_trace, manifest.artifacts.output_code) if p]
        if listed_inductor and found["inductor"] is None:
            inductor_missing = True
            notes.append(f"{root}: the manifest lists the Inductor artifacts "
                         f"{' and '.join(listed_inductor)}, but the run directory lacks them: Inductor-generated "
                         "kernels are attributed without the fusion map")
    else:
        found = dict.fromkeys(_CANDIDATES)
    for kind, names in _CANDIDATES.items():
        for name in names:
            if found[kind] is None and not (kind == "inductor" and inductor_missing):
                found[kind] = _existing(root / name)
    if found["kineto"] is None and found["nsys"] is None:
        raise ArtifactFormatError(
            f"{root}: holds no timeline (kineto.json or timeline.sqlite); was the capture interrupted? "
            "re-run 'oprof capture'"
        )
    return RunArtifacts(manifest=manifest, notes=tuple(notes), **found)


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
    if Path(path).name != "workload_optimized.py":
        return Path(path).name
    plan = Path(run_dir) / "plan.json" if run_dir is not None else None
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
) -> Profile:
    """Read the given artifacts and attribute them (``oprof attribute --kineto ... --ncu ...``).

    ``inductor_optional``: Inductor artifacts that hold no kernel (an eager model, or a
    compile that generated nothing) become a warning instead of an error; a capture
    directory always has them, whether or not the model compiled to anything.
    """
    from profiler_core.ingest import read_inductor, read_kineto, read_ncu, read_nsys

    if kineto is None and nsys is None:
        raise AttributionError("no timeline given: pass --kineto TRACE.json and/or --nsys EXPORT.sqlite")
    kineto_trace = read_kineto(kineto) if kineto else None
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
    profile = attribute(
        kineto=kineto_trace,
        nsys=nsys_timeline,
        ncu=read_ncu(ncu) if ncu else None,
        inductor=ind,
        capture=capture,
        allow_partial=allow_partial,
    )
    from profiler_core.attribution.modules import assign_module_paths, read_module_map

    assign_module_paths(profile, kineto=kineto_trace, inductor=ind,
                        module_map=read_module_map(modules) if modules else None)
    if note:
        if not any(k.name.startswith("triton_") for k in profile.kernels):
            # nothing was lost: the run launched no Inductor-generated kernel to map
            note = ("Inductor artifacts hold no kernel records, and the run launched no Inductor-generated "
                    "(triton_*) kernel: every kernel is a library or eager kernel, attributed without them")
        profile.warnings.append(note)
    return profile


def attribute_run(run_dir: PathLike, *, allow_partial: bool = False) -> Profile:
    """Attribute a capture directory written by ``oprof capture``."""
    art = find_run_artifacts(run_dir)
    from profiler_core.attribution.modules import MODULE_MAP_NAME

    module_map = Path(run_dir) / MODULE_MAP_NAME
    profile = attribute_files(kineto=art.kineto, nsys=art.nsys, ncu=art.ncu, inductor=art.inductor,
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
        art = find_run_artifacts(root)
    except ArtifactFormatError:
        return None  # the run's own problems surface when it is attributed
    return stale_profile_reason(path, profile, art.manifest,
                                [root / MANIFEST_NAME, art.kineto, art.nsys, art.ncu, art.inductor])


def current_profile(run_dir: PathLike) -> Profile:
    """A run directory's profile: its profile.json while current, else attributed afresh (and flagged)."""
    from profiler_core.schema import read_profile

    root = Path(run_dir)
    written = root / "profile.json"
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
