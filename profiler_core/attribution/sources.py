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
from typing import Any

from profiler_core.attribution.engine import attribute
from profiler_core.errors import ArtifactFormatError, AttributionError
from profiler_core.schema import CaptureMeta, ClockSample, Profile, ToolVersions

PathLike = str | os.PathLike[str]

_CANDIDATES = {
    "kineto": ("kineto.json.gz", "kineto.json", "trace.json.gz", "trace.json"),
    "nsys": ("timeline.sqlite", "nsys.sqlite"),
    "ncu": ("counters.csv", "counters.ncu-rep", "ncu_full_raw.csv", "ncu_per_config_raw.csv", "ncu.csv"),
    "inductor": ("inductor", "torch_trace.tgz", "torch_trace", "output_code.log", "output_code.py"),
}


@dataclass(frozen=True)
class RunArtifacts:
    """The artifact paths of one capture (None where a phase did not produce one)."""

    kineto: Path | None = None
    nsys: Path | None = None
    ncu: Path | None = None
    inductor: Path | None = None
    manifest: dict[str, Any] | None = None


def _existing(path: Path | None) -> Path | None:
    return path if path is not None and path.exists() else None


def find_run_artifacts(run_dir: PathLike) -> RunArtifacts:
    """Locate a run directory's artifacts (manifest first, then conventional names)."""
    root = Path(run_dir)
    if not root.is_dir():
        raise ArtifactFormatError(f"{root}: not a run directory; pass the folder 'oprof capture' wrote")
    manifest: dict[str, Any] | None = None
    mpath = root / "manifest.json"
    if mpath.exists():
        try:
            manifest = json.loads(mpath.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ArtifactFormatError(f"{mpath}: not valid JSON ({err}); re-run 'oprof capture'") from err
    found: dict[str, Path | None] = {}
    named = (manifest or {}).get("artifacts") or {}
    for kind, names in _CANDIDATES.items():
        path = None
        if isinstance(named.get(kind), str):
            path = _existing(root / named[kind])
        for name in names:
            if path is None:
                path = _existing(root / name)
        found[kind] = path
    if found["kineto"] is None and found["nsys"] is None:
        raise ArtifactFormatError(
            f"{root}: holds no timeline (kineto.json or timeline.sqlite); was the capture interrupted? "
            "re-run 'oprof capture'"
        )
    return RunArtifacts(manifest=manifest, **found)


def capture_meta_from_manifest(manifest: dict[str, Any] | None) -> CaptureMeta | None:
    """The profile's capture metadata from a run manifest (tolerant of missing keys)."""
    if not manifest:
        return None
    gpu = manifest.get("gpu") or {}
    versions = manifest.get("versions") or {}
    clocks = []
    for phase, c in (manifest.get("clocks") or {}).items():
        if isinstance(c, dict):
            clocks.append(ClockSample(phase=phase, **{k: v for k, v in c.items() if k in ClockSample.model_fields}))
    policy = manifest.get("clock_policy") or "unknown"
    mode = manifest.get("counter_mode") or "unknown"
    return CaptureMeta(
        workload=manifest.get("workload"),
        gpu_name=gpu.get("name") if isinstance(gpu, dict) else None,
        chip=gpu.get("chip") if isinstance(gpu, dict) else None,
        sm_count=gpu.get("sm_count") if isinstance(gpu, dict) else None,
        versions=ToolVersions(**{k: (str(v) if v is not None else None) for k, v in versions.items()
                                 if k in ToolVersions.model_fields}),
        warmup_iterations=manifest.get("warmup_iterations"),
        measured_iterations=manifest.get("measured_iterations"),
        compile_mode=manifest.get("compile_mode"),
        clock_policy=policy if policy in ("lock", "observe", "off") else "unknown",
        clocks=clocks,
        counter_mode=mode if mode in ("full", "per-config", "none") else "unknown",
        created_at=manifest.get("created_at"),
        rank=manifest.get("rank"),
        world_size=manifest.get("world_size"),
    )


def attribute_files(
    *,
    kineto: PathLike | None = None,
    nsys: PathLike | None = None,
    ncu: PathLike | None = None,
    inductor: PathLike | None = None,
    capture: CaptureMeta | None = None,
    allow_partial: bool = False,
) -> Profile:
    """Read the given artifacts and attribute them (``oprof attribute --kineto ... --ncu ...``)."""
    from profiler_core.ingest import read_inductor, read_kineto, read_ncu, read_nsys

    if kineto is None and nsys is None:
        raise AttributionError("no timeline given: pass --kineto TRACE.json and/or --nsys EXPORT.sqlite")
    return attribute(
        kineto=read_kineto(kineto) if kineto else None,
        nsys=read_nsys(nsys) if nsys else None,
        ncu=read_ncu(ncu) if ncu else None,
        inductor=read_inductor(inductor) if inductor else None,
        capture=capture,
        allow_partial=allow_partial,
    )


def attribute_run(run_dir: PathLike, *, allow_partial: bool = False) -> Profile:
    """Attribute a capture directory written by ``oprof capture``."""
    art = find_run_artifacts(run_dir)
    return attribute_files(kineto=art.kineto, nsys=art.nsys, ncu=art.ncu, inductor=art.inductor,
                           capture=capture_meta_from_manifest(art.manifest), allow_partial=allow_partial)
