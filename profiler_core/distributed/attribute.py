"""``attribute_ranks(run_dir)``: attribute every rank of a multi-rank run, then merge.

Each ``rank<N>/`` is attributed like any run (``rank<N>/profile.json``, with the rank and
world size in its capture metadata); ``ranks.json`` holds a :class:`MultiRankProfile`:
per-rank paths and summaries, compute/communication overlap per rank, and the operator
spread across ranks (stragglers).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from profiler_core.atomic_write import write_text_atomic
from profiler_core.distributed.overlap import OverlapStats, comm_overlap, communication_ops, is_nccl_kernel
from profiler_core.distributed.spread import OperatorSpread, RankSpread, operator_spread, rank_spread
from profiler_core.errors import SchemaError
from profiler_core.profile_io import read_profile, write_profile
from profiler_core.rundir import RANKS_JSON, read_ranks_manifest, write_ranks_manifest
from profiler_core.rundir.ranks import rank_dirs
from profiler_core.schema import Profile

PROFILE_NAME = "profile.json"


class RankSummary(BaseModel):
    """One rank's profile: where it is and what it holds."""

    model_config = ConfigDict(extra="forbid")

    rank: int
    profile: str  # relative to the run directory
    kernels: int
    duration_ns: int
    communication_ns: int  # kernel time of communication operators (and unclaimed NCCL kernels)
    attributed_time_pct: float
    overlap: OverlapStats
    warnings: list[str] = Field(default_factory=list)


class MultiRankProfile(BaseModel):
    """ranks.json: every rank's summary and the merged view across ranks."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    world_size: int
    ranks: list[RankSummary]
    totals: RankSpread
    operators: list[OperatorSpread]


def _communication_ns(profile: Profile) -> int:
    comm_ops = communication_ops(profile)
    return sum(k.duration_ns for k in profile.kernels if is_nccl_kernel(k, comm_ops))


def merge_ranks(profiles: dict[int, Profile], paths: dict[int, str], world_size: int | None = None) -> MultiRankProfile:
    """The merged view of already-attributed rank profiles (``paths``: where each one is)."""
    ranks = [
        RankSummary(rank=r, profile=paths[r], kernels=p.coverage.kernel_count, duration_ns=p.coverage.duration_ns,
                    communication_ns=_communication_ns(p), attributed_time_pct=p.coverage.attributed_time_pct,
                    overlap=comm_overlap(p), warnings=p.warnings[:5])
        for r, p in sorted(profiles.items())
    ]
    return MultiRankProfile(world_size=world_size or len(profiles), ranks=ranks, totals=rank_spread(profiles),
                            operators=operator_spread(profiles))


def attribute_ranks(run_dir: str | os.PathLike[str], *, allow_partial: bool = False,
                    write: bool = True) -> MultiRankProfile:
    """Attribute each rank of ``run_dir`` (rank<N>/profile.json) and merge them (ranks.json)."""
    from profiler_core.attribution import attribute_run

    root = Path(run_dir)
    manifest = read_ranks_manifest(root)
    profiles: dict[int, Profile] = {}
    paths: dict[int, str] = {}
    for rank, directory in rank_dirs(root):
        profile = attribute_run(directory, allow_partial=allow_partial)
        profile.capture.rank, profile.capture.world_size = rank, manifest.world_size
        profiles[rank] = profile
        paths[rank] = os.path.relpath(directory / PROFILE_NAME, root)
        if write:
            write_profile(directory / PROFILE_NAME, profile)
    merged = merge_ranks(profiles, paths, manifest.world_size)
    if write:
        write_text_atomic(root / RANKS_JSON, merged.model_dump_json(indent=1) + "\n")
        for entry in manifest.ranks:
            entry.profile = paths.get(entry.rank, entry.profile)
        write_ranks_manifest(root, manifest)
    return merged


def read_multi_rank(path: str | os.PathLike[str]) -> MultiRankProfile:
    """Read ranks.json (a run directory or the file itself)."""
    p = Path(path)
    if p.is_dir():
        p = p / RANKS_JSON
    try:
        return MultiRankProfile.model_validate_json(p.read_bytes())
    except FileNotFoundError as err:
        raise SchemaError(f"{p}: no ranks.json; run 'oprof attribute' on the multi-rank run directory") from err
    except ValidationError as err:
        raise SchemaError(f"{p}: invalid ranks.json ({err.errors()[0]['msg']}); re-run 'oprof attribute'") from err


def load_rank_profiles(run_dir: str | os.PathLike[str]) -> dict[int, Profile]:
    """The rank profiles ranks.json names, read back."""
    root = Path(run_dir)
    merged = read_multi_rank(root)
    return {r.rank: read_profile(root / r.profile) for r in merged.ranks}
