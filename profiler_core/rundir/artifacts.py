"""Find the artifacts of one capture's run directory: what its manifest lists, else the usual names.

What the manifest lists must be there: a listed timeline or counters file that is missing is
an error (a listed Inductor file that is missing is a note: attribution then runs without the
fusion map). A manifest path outside the run directory is refused; a run the capture marked
failed or cancelled is refused, one still marked running is flagged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from profiler_core.errors import ArtifactFormatError, AttributionError
from profiler_core.rundir.layout import CANDIDATES, MANIFEST_NAME, listed_path, present
from profiler_core.rundir.manifest import RunManifest, RunStatus, read_manifest

_WHAT = {"kineto": "Kineto trace", "nsys": "Nsight Systems export", "ncu": "Nsight Compute counters",
         "inductor": "Inductor artifacts"}


@dataclass(frozen=True)
class RunArtifacts:
    """The artifact paths of one capture (None where a phase did not produce one)."""

    kineto: Path | None = None
    nsys: Path | None = None
    ncu: Path | None = None
    inductor: Path | None = None
    manifest: RunManifest | None = None
    notes: tuple[str, ...] = ()  # what the run-directory checks flagged (warnings for the profile)


def missing_listed(root: Path, what: str, listed: Sequence[str]) -> ArtifactFormatError:
    """The error for an artifact the manifest lists and the run directory lacks."""
    names = " or ".join(repr(n) for n in listed)
    return ArtifactFormatError(
        f"{root}: the manifest lists the {what} {names}, but the run directory lacks it: the run is "
        "incomplete or was trimmed; re-run 'oprof capture', or attribute the files that remain explicitly "
        "(--kineto/--nsys/--ncu/--inductor)")


def status_warnings(root: Path, manifest: RunManifest) -> list[str]:
    """Refuse a run the capture marked failed or cancelled; warn on one still marked running."""
    status = manifest.status
    if status in (RunStatus.FAILED, RunStatus.CANCELLED):
        why = f" ({manifest.error})" if manifest.error else ""
        raise AttributionError(
            f"{root}: the capture is marked {status.value}{why}; its artifacts are partial: re-run 'oprof capture'")
    if status is RunStatus.RUNNING:
        return [f"{root / MANIFEST_NAME}: status is still 'running': the capture was interrupted or is not "
                "finished; the artifacts may be partial"]
    return []


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
    found: dict[str, Path | None] = dict.fromkeys(CANDIDATES)
    for kind, entries in listed.items():
        paths = [listed_path(root, field, rel) for field, rel in entries]
        found[kind] = next((hit for hit in map(present, paths) if hit is not None), None)
        if paths and found[kind] is None and kind != "inductor":
            raise missing_listed(root, _WHAT[kind], [rel for _, rel in entries])
    return found


def find_run_artifacts(run_dir: str | Path, manifest: RunManifest | None = None) -> RunArtifacts:
    """Locate a run directory's artifacts (manifest first, then conventional names).

    ``manifest``: the run's manifest when the caller has read it already (else it is read here).
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise ArtifactFormatError(f"{root}: not a run directory; pass the folder 'oprof capture' wrote")
    if manifest is None and (root / MANIFEST_NAME).exists():
        manifest = read_manifest(root)
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
        found = dict.fromkeys(CANDIDATES)
    for kind, names in CANDIDATES.items():
        for name in names:
            if found[kind] is None and not (kind == "inductor" and inductor_missing):
                found[kind] = _existing(root / name)
    if found["kineto"] is None and found["nsys"] is None:
        raise ArtifactFormatError(
            f"{root}: holds no timeline (kineto.json or timeline.sqlite); was the capture interrupted? "
            "re-run 'oprof capture'"
        )
    return RunArtifacts(manifest=manifest, notes=tuple(notes), **found)
