"""Does a run directory hold one capture? Checks that tie its manifest to its artifacts.

A manifest says what the capture ran and wrote; the artifacts say what was measured. When
the two disagree (a manifest copied from another run, an edited iteration count, a file
missing although the manifest lists it, Inductor logs of another compile, a profile.json
left from an earlier capture) attribution would join numbers that belong to different
runs. (Whether the listed files are there at all is the run directory's own check,
:mod:`profiler_core.rundir.artifacts`.) Each check here either refuses with a message naming the file and the fix, or
returns a warning that goes into the profile::

    manifest: measured_iterations 3, kernels_per_iteration 254; kineto.json.gz: 508 kernels
    -> AttributionError: ...: the manifest describes 762 kernel launches (254 x 3 iterations)
       but the trace holds 508: the manifest belongs to another capture ...
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from profiler_core.attribution.columns import values
from profiler_core.errors import ArtifactFormatError, AttributionError
from profiler_core.records import InductorArtifacts, KinetoTrace, NsysTimeline
from profiler_core.rundir import MANIFEST_NAME, RunManifest
from profiler_core.schema import Profile

MTIME_SLACK_S = 2.0  # a checkout writes a run's files within moments of each other


def check_trace_matches(root: Path, manifest: RunManifest, timeline: KinetoTrace | NsysTimeline) -> None:
    """The trace's kernel launches against the manifest's iteration count and kernel count."""
    launches = values(timeline.kernels, "kind").count("kernel")  # off the columns where the reader kept them
    wl = manifest.workload
    per_iteration = manifest.counters.kernels_per_iteration
    expected = manifest.determinism.kernels
    where = f"{root / MANIFEST_NAME} against {timeline.path.name}"
    if per_iteration and wl.measured_iterations > 0 and per_iteration * wl.measured_iterations != launches:
        raise AttributionError(
            f"{where}: the manifest describes {per_iteration * wl.measured_iterations} kernel launches "
            f"({per_iteration} per iteration x {wl.measured_iterations} measured iterations) but the trace "
            f"holds {launches}: the manifest belongs to another capture or was edited; re-run 'oprof capture'")
    if expected is not None and expected != launches:
        raise AttributionError(
            f"{where}: the manifest's determinism check counted {expected} kernel launches but the trace "
            f"holds {launches}: the trace or the manifest comes from another capture; re-run 'oprof capture'")


def check_inductor_matches(inductor: InductorArtifacts, timeline: KinetoTrace | NsysTimeline) -> None:
    """Refuse Inductor artifacts that lack an Inductor kernel the trace launched.

    The compile that produced a trace logged every kernel it generated; records missing
    one of them come from another compile (names such as ``triton_per_fused_native_layer_norm_0``
    recur across models, so sharing some names proves nothing) or from a partial log.
    """
    launched = {name for name in set(values(timeline.kernels, "name")) if name.startswith("triton_")}
    if not launched or not inductor.fusions:
        return
    missing = sorted(launched.difference(inductor.fusions))
    if missing:
        raise ArtifactFormatError(
            f"{inductor.path}: its kernel records lack {len(missing)} of the {len(launched)} Inductor kernels "
            f"{timeline.path.name} launched (e.g. {missing[0]}): they come from another compile or a partial "
            "log; pass the Inductor artifacts of this capture")


def _newest_mtime(paths: Sequence[Path | None]) -> float:
    times = []
    for p in paths:
        if p is None:
            continue
        try:
            times.append(p.stat().st_mtime)
        except OSError:
            continue
    return max(times, default=0.0)


def stale_profile_reason(profile_path: Path, profile: Profile, manifest: RunManifest | None,
                         artifacts: Sequence[Path | None]) -> str | None:
    """Why the profile.json of a run directory does not describe the run's current artifacts."""
    if manifest is not None:
        cap = profile.capture
        if cap.created_at is not None and cap.created_at != manifest.created_at:
            return (f"{profile_path} was attributed from a capture made at {cap.created_at}, but the run's "
                    f"manifest is from {manifest.created_at}")
        if cap.workload is not None and cap.workload != manifest.workload.path:
            return (f"{profile_path} is the profile of {cap.workload}, but the run's manifest ran "
                    f"{manifest.workload.path}")
    try:
        written = profile_path.stat().st_mtime
    except OSError:
        return None
    newest = _newest_mtime(artifacts)
    if newest - written > MTIME_SLACK_S:
        return f"{profile_path} is older than the artifacts it was attributed from"
    return None
