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
from profiler_core.capture.manifest import MANIFEST_NAME, RunManifest, read_manifest
from profiler_core.errors import ArtifactFormatError, AttributionError
from profiler_core.schema import CaptureMeta, ClockSample, Profile

PathLike = str | os.PathLike[str]

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


def _existing(path: Path | None) -> Path | None:
    return path if path is not None and path.exists() else None


def find_run_artifacts(run_dir: PathLike) -> RunArtifacts:
    """Locate a run directory's artifacts (manifest first, then conventional names)."""
    root = Path(run_dir)
    if not root.is_dir():
        raise ArtifactFormatError(f"{root}: not a run directory; pass the folder 'oprof capture' wrote")
    manifest = read_manifest(root) if (root / MANIFEST_NAME).exists() else None
    found: dict[str, Path | None] = dict.fromkeys(_CANDIDATES)
    if manifest is not None:
        art = manifest.artifacts
        found["kineto"] = _existing(root / art.kineto) if art.kineto else None
        found["nsys"] = _existing(root / art.timeline) if art.timeline else None
        ncu_name = next((p for p in (art.counters_csv, art.counters_report)
                         if p and (root / p).exists()), None)
        found["ncu"] = root / ncu_name if ncu_name else None
        found["inductor"] = next((root / p for p in (art.torch_trace, art.output_code)
                                  if p and (root / p).exists()), None)
    for kind, names in _CANDIDATES.items():
        for name in names:
            if found[kind] is None:
                found[kind] = _existing(root / name)
    if found["kineto"] is None and found["nsys"] is None:
        raise ArtifactFormatError(
            f"{root}: holds no timeline (kineto.json or timeline.sqlite); was the capture interrupted? "
            "re-run 'oprof capture'"
        )
    return RunArtifacts(manifest=manifest, **found)


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
        original = json.loads(plan.read_text(encoding="utf-8")).get("workload")
    except (OSError, ValueError):
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
) -> Profile:
    """Read the given artifacts and attribute them (``oprof attribute --kineto ... --ncu ...``).

    ``inductor_optional``: Inductor artifacts that hold no kernel (an eager model, or a
    compile that generated nothing) become a warning instead of an error; a capture
    directory always has them, whether or not the model compiled to anything.
    """
    from profiler_core.ingest import read_inductor, read_kineto, read_ncu, read_nsys

    if kineto is None and nsys is None:
        raise AttributionError("no timeline given: pass --kineto TRACE.json and/or --nsys EXPORT.sqlite")
    ind = None
    note = None
    if inductor:
        try:
            ind = read_inductor(inductor)
        except ArtifactFormatError as err:
            if not inductor_optional:
                raise
            note = f"Inductor artifacts not used: {err}"
    trace = read_kineto(kineto) if kineto else None
    profile = attribute(
        kineto=trace,
        nsys=read_nsys(nsys) if nsys else None,
        ncu=read_ncu(ncu) if ncu else None,
        inductor=ind,
        capture=capture,
        allow_partial=allow_partial,
    )
    from profiler_core.attribution.modules import assign_module_paths, read_module_map

    assign_module_paths(profile, kineto=trace, inductor=ind, module_map=read_module_map(modules) if modules else None)
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
    return attribute_files(kineto=art.kineto, nsys=art.nsys, ncu=art.ncu, inductor=art.inductor,
                           capture=capture_meta_from_manifest(art.manifest, run_dir),
                           allow_partial=allow_partial, inductor_optional=True,
                           modules=module_map if module_map.is_file() else None)
