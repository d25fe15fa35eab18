"""Open a run directory as what it is: one capture, or a multi-rank run of one capture per rank.

    run = open_run("oprof-runs/gpt2-...")
    run.is_multi_rank                  # from the manifest's kind, read once and validated
    run.ranks()                        # [(0, Run(rank0/)), (1, Run(rank1/))]; [(None, run)] for one capture
    run.artifacts()                    # RunArtifacts of one capture (kineto, nsys, ncu, inductor)

A directory without a manifest (files copied by hand, a shipped capture) opens as one
capture whose artifacts are found by their usual names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from profiler_core.errors import ArtifactFormatError, ProfilerError
from profiler_core.rundir.artifacts import RunArtifacts, find_run_artifacts
from profiler_core.rundir.layout import MANIFEST_NAME, PROFILE_NAME, RANKS_JSON
from profiler_core.rundir.manifest import RunManifest, is_ranks_data, load_manifest_json, manifest_from_data
from profiler_core.rundir.ranks import RanksManifest, rank_dirs, ranks_manifest_from_data


@dataclass(frozen=True)
class Run:
    """A run directory and its manifest (``manifest`` for one capture, ``ranks_manifest`` for many)."""

    root: Path
    manifest: RunManifest | None = None
    ranks_manifest: RanksManifest | None = None

    @property
    def is_multi_rank(self) -> bool:
        return self.ranks_manifest is not None

    @property
    def profile_path(self) -> Path:
        """Where attribution writes this run's result (``ranks.json`` for a multi-rank run)."""
        return self.root / (RANKS_JSON if self.is_multi_rank else PROFILE_NAME)

    def ranks(self) -> list[tuple[int | None, Run]]:
        """Each rank's run, in rank order; a single capture is its own only rank (``None``)."""
        if self.ranks_manifest is None:
            return [(None, self)]
        return [(rank, open_run(directory)) for rank, directory in rank_dirs(self.root, self.ranks_manifest)]

    def artifacts(self) -> RunArtifacts:
        """The artifacts of one capture; a multi-rank run has them per rank (see :meth:`ranks`)."""
        if self.ranks_manifest is not None:
            raise ArtifactFormatError(
                f"{self.root / MANIFEST_NAME}: a multi-rank run (one run directory per rank); attribute it as a "
                "whole with 'oprof attribute' on the run directory, or pass one of its rank<N>/ directories")
        return find_run_artifacts(self.root, self.manifest)


def open_run(path: str | Path) -> Run:
    """The run in directory ``path``, its manifest read and validated once (none: found by names)."""
    root = Path(path)
    if not root.is_dir():
        raise ArtifactFormatError(f"{root}: not a run directory; pass the folder 'oprof capture' wrote")
    manifest_file = root / MANIFEST_NAME
    if not manifest_file.exists():
        return Run(root)
    data = load_manifest_json(manifest_file)
    if is_ranks_data(data):
        return Run(root, ranks_manifest=ranks_manifest_from_data(manifest_file, data))
    return Run(root, manifest=manifest_from_data(manifest_file, data))


def is_multi_rank(path: str | Path) -> bool:
    """True when ``path`` is a directory holding a multi-rank manifest (an unreadable one: False)."""
    root = Path(path)
    if not (root / MANIFEST_NAME).is_file():
        return False
    try:
        return is_ranks_data(load_manifest_json(root / MANIFEST_NAME))
    except ProfilerError:  # unreadable, or outside the confinement roots: not a run to open as multi-rank
        return False
