"""The top-level manifest of a multi-rank run: world size, one entry per rank, status.

    <run>/manifest.json        RanksManifest (``kind: "multi-rank"``)
    <run>/rank0/               a normal run directory (its own manifest.json, kineto.json, ...)
    <run>/rank1/ ...
    <run>/ranks.json           written by attribution: the merged view across ranks
    <run>/logs/                the launcher's logs (one file per phase, all ranks)

It has its own model so a reader of a single run's manifest is told to look inside a rank
instead of misreading it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from profiler_core.atomic_write import write_text_atomic
from profiler_core.errors import ArtifactFormatError
from profiler_core.rundir.layout import MANIFEST_NAME
from profiler_core.rundir.manifest import RANKS_MANIFEST_KIND, is_ranks_data, load_manifest_json
from profiler_core.schema import first_error


class RankEntry(BaseModel):
    """One rank of the run: where its run directory is and how its capture ended."""

    model_config = ConfigDict(extra="forbid")

    rank: int
    dir: str  # relative to the top-level run directory
    status: Literal["running", "complete", "failed", "cancelled"] = "running"
    profile: str | None = None  # relative to the top-level run directory, once attributed


class RanksManifest(BaseModel):
    """The top-level manifest of a multi-rank run."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    kind: Literal["multi-rank"] = RANKS_MANIFEST_KIND
    operator_profiler: str
    created_at: str
    workload: str
    world_size: int
    launcher: list[str] = Field(default_factory=list)  # the torchrun prefix every phase used
    status: Literal["running", "complete", "failed", "cancelled"] = "running"
    error: str | None = None
    ranks: list[RankEntry] = Field(default_factory=list)
    environment: dict[str, str] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)


def write_ranks_manifest(run_dir: str | Path, manifest: RanksManifest) -> Path:
    """Write ``<run>/manifest.json`` atomically."""
    return write_text_atomic(Path(run_dir) / MANIFEST_NAME, manifest.model_dump_json(indent=1) + "\n")


def ranks_manifest_from_data(path: Path, data: Any) -> RanksManifest:
    """Validate parsed manifest JSON as a multi-rank manifest (naming the problem and the fix)."""
    if not is_ranks_data(data):
        raise ArtifactFormatError(f"{path}: a single-run manifest, not a multi-rank one; attribute it with "
                                  "'oprof attribute' as a normal run")
    try:
        return RanksManifest.model_validate(data)
    except ValidationError as err:
        raise ArtifactFormatError(f"{path}: invalid multi-rank manifest, {first_error(err)}") from err


def read_ranks_manifest(run_dir: str | Path) -> RanksManifest:
    """Read a multi-rank run's top-level manifest."""
    path = Path(run_dir) / MANIFEST_NAME
    data = load_manifest_json(path, missing_hint="run 'oprof capture --nproc-per-node N'")
    return ranks_manifest_from_data(path, data)


def rank_dirs(run_dir: str | Path, manifest: RanksManifest | None = None) -> list[tuple[int, Path]]:
    """Each rank's run directory, in rank order, from the top-level manifest."""
    manifest = manifest if manifest is not None else read_ranks_manifest(run_dir)
    out = [(e.rank, Path(run_dir) / e.dir) for e in sorted(manifest.ranks, key=lambda e: e.rank)]
    if not out:
        raise ArtifactFormatError(f"{run_dir}: the multi-rank manifest lists no ranks; re-run the capture")
    missing = [str(d) for _, d in out if not d.is_dir()]
    if missing:
        raise ArtifactFormatError(f"{run_dir}: rank directory {missing[0]} is missing; re-run the capture")
    return out
