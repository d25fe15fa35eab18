"""Layout of a multi-rank run directory and its top-level manifest.

    <run>/manifest.json        RanksManifest: world size, one entry per rank, status
    <run>/rank0/               a normal run directory (its own manifest.json, kineto.json, ...)
    <run>/rank1/ ...
    <run>/ranks.json           written by attribution: the merged view across ranks
    <run>/logs/                the launcher's logs (one file per phase, all ranks)

The top-level manifest has its own model (``kind: "multi-rank"``) so a reader of a single
run's manifest is told to look inside a rank instead of misreading it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from profiler_core.atomic_write import write_text_atomic
from profiler_core.capture.manifest import MANIFEST_NAME, RANKS_MANIFEST_KIND
from profiler_core.errors import ArtifactFormatError
from profiler_core.schema import first_error

RANKS_JSON = "ranks.json"


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


def rank_dir(run_dir: str | Path, rank: int) -> Path:
    """``<run>/rank<N>``."""
    return Path(run_dir) / f"rank{rank}"


def is_multi_rank(run_dir: str | Path) -> bool:
    """True when ``run_dir`` holds a multi-rank manifest."""
    path = Path(run_dir) / MANIFEST_NAME
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("kind") == RANKS_MANIFEST_KIND


def write_ranks_manifest(run_dir: str | Path, manifest: RanksManifest) -> Path:
    """Write ``<run>/manifest.json`` atomically."""
    return write_text_atomic(Path(run_dir) / MANIFEST_NAME, manifest.model_dump_json(indent=1) + "\n")


def read_ranks_manifest(run_dir: str | Path) -> RanksManifest:
    """Read a multi-rank run's top-level manifest (naming the problem and the fix)."""
    path = Path(run_dir) / MANIFEST_NAME
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError as err:
        raise ArtifactFormatError(f"{path}: no manifest; run 'oprof capture --nproc-per-node N'") from err
    except (OSError, ValueError) as err:
        raise ArtifactFormatError(f"{path}: unreadable manifest ({err}); re-run the capture") from err
    if not isinstance(data, dict) or data.get("kind") != RANKS_MANIFEST_KIND:
        raise ArtifactFormatError(f"{path}: a single-run manifest, not a multi-rank one; attribute it with "
                                  "'oprof attribute' as a normal run")
    try:
        return RanksManifest.model_validate(data)
    except ValidationError as err:
        raise ArtifactFormatError(f"{path}: invalid multi-rank manifest, {first_error(err)}") from err


def rank_dirs(run_dir: str | Path) -> list[tuple[int, Path]]:
    """Each rank's run directory, in rank order, from the top-level manifest."""
    manifest = read_ranks_manifest(run_dir)
    out = [(e.rank, Path(run_dir) / e.dir) for e in sorted(manifest.ranks, key=lambda e: e.rank)]
    if not out:
        raise ArtifactFormatError(f"{run_dir}: the multi-rank manifest lists no ranks; re-run the capture")
    missing = [str(d) for _, d in out if not d.is_dir()]
    if missing:
        raise ArtifactFormatError(f"{run_dir}: rank directory {missing[0]} is missing; re-run the capture")
    return out
