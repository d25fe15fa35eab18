"""Run directories on disk: find them under the workspace and summarise their manifests.

A run directory is one holding ``manifest.json`` (written by the capture) or
``profile.json`` (written by attribution). The walk is bounded in depth and in directories
visited, skips hidden and environment folders, and never follows symlinked directories,
so a large workspace or a link loop cannot stall the server.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from mcp_server.models import RunSummary
from profiler_core.confinement import MAX_PATH_CHARS, read_input
from profiler_core.errors import ProfilerError
from profiler_core.rundir import MANIFEST_NAME, PROFILE_NAME
from profiler_core.rundir.manifest import MAX_MANIFEST_BYTES

MAX_DEPTH = 4
MAX_DIRS_VISITED = 20_000
_SKIP = frozenset({"node_modules", "__pycache__", "site-packages", "venv", "build", "dist"})


def find_run_dirs(top: Path) -> Iterator[Path]:
    """Directories under ``top`` (itself included) holding a manifest.json or profile.json."""
    visited = 0
    stack: list[tuple[Path, int]] = [(top, 0)]
    while stack and visited < MAX_DIRS_VISITED:
        here, depth = stack.pop()
        visited += 1
        try:
            entries = list(os.scandir(here))
        except OSError:
            continue
        names = {e.name for e in entries}
        if MANIFEST_NAME in names or PROFILE_NAME in names:
            yield here
        if depth >= MAX_DEPTH:
            continue
        for entry in entries:
            if entry.name.startswith(".") or entry.name in _SKIP:
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append((Path(entry.path), depth + 1))


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _artifact_in_run(run_dir: Path, rel: Any) -> Path | None:
    """``run_dir / rel`` when it names a file or folder inside the run directory; else None.

    A manifest entry that is absolute, climbs out with ``..`` or links out is never looked
    at, so a listing cannot tell which files exist outside the workspace.
    """
    if not isinstance(rel, str) or not rel or len(rel) > MAX_PATH_CHARS or "\x00" in rel:
        return None
    pure = PurePosixPath(rel)
    if pure.is_absolute() or ".." in pure.parts:
        return None
    path = run_dir / rel
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):
        return None
    base = run_dir.resolve()
    if not resolved.is_relative_to(base) or not (resolved.is_file() or resolved.is_dir()):
        return None
    return path


def summarize_manifest(run_dir: Path, manifest: dict[str, Any] | None, *,
                       error: str | None = None) -> RunSummary:
    """The headline of one run from its manifest (tolerant of missing keys)."""
    m = manifest or {}
    workload = _get(m, "workload", "path") if isinstance(m.get("workload"), dict) else m.get("workload")
    artifacts: dict[str, str] = {}
    listed = _get(m, "artifacts")
    for kind, rel in (listed.items() if isinstance(listed, dict) else ()):
        found = _artifact_in_run(run_dir, rel)
        if found is not None:
            artifacts[kind] = str(found)
    profile = run_dir / PROFILE_NAME
    profile_path = artifacts.get("profile") or (str(profile) if profile.is_file() else None)
    duration = m.get("total_duration_s")
    return RunSummary(
        run_dir=str(run_dir),
        status=m.get("status") if manifest is not None else ("attributed" if profile_path else None),
        workload=workload if isinstance(workload, str) else None,
        created_at=m.get("created_at"),
        gpu=_get(m, "gpu", "name"),
        compile_mode=_get(m, "workload", "compile_mode"),
        warmup_iterations=_as_int(_get(m, "workload", "warmup_iterations")),
        measured_iterations=_as_int(_get(m, "workload", "measured_iterations")),
        counter_mode=_get(m, "counters", "mode"),
        timeline_source=m.get("timeline_source"),
        total_duration_s=float(duration) if isinstance(duration, int | float) else None,
        profile=profile_path,
        artifacts=artifacts,
        warning_count=len(m.get("warnings") or []),
        error=error or m.get("error"),
    )


def read_run(run_dir: Path, *, inside: Callable[[Path], bool] = lambda _: True) -> RunSummary:
    """Summarise one run directory; an unreadable manifest is reported, not raised.

    ``inside`` says whether a resolved path may be read (a manifest.json that is a symlink
    out of the workspace is not).
    """
    path = run_dir / MANIFEST_NAME
    if not path.exists():
        return summarize_manifest(run_dir, None)
    if not inside(path.resolve()):
        return summarize_manifest(run_dir, None, error=f"{path}: links outside the workspace; not read")
    try:
        data = json.loads(read_input(path, what="capture manifest", max_bytes=MAX_MANIFEST_BYTES))
    except ProfilerError as err:
        return summarize_manifest(run_dir, None, error=str(err))
    except (OSError, ValueError, RecursionError) as err:
        return summarize_manifest(run_dir, None, error=f"{path}: unreadable manifest ({err})")
    if not isinstance(data, dict):
        return summarize_manifest(run_dir, None, error=f"{path}: not a JSON object")
    try:
        return summarize_manifest(run_dir, data)
    except ValidationError as err:  # a manifest with fields of the wrong type
        return summarize_manifest(run_dir, None, error=f"{path}: invalid manifest ({err.errors()[0]['msg']})")


def sort_key(run: RunSummary) -> float:
    """Newest first: the latest modification time of the run's manifest.json or profile.json."""
    times = []
    for name in (MANIFEST_NAME, PROFILE_NAME):
        try:
            times.append((Path(run.run_dir) / name).stat().st_mtime)
        except OSError:
            continue
    return max(times, default=0.0)


def collect_runs(tops: list[Path], *, inside: Callable[[Path], bool] = lambda _: True) -> list[RunSummary]:
    """Every run directory under ``tops`` (each once), summarised, newest first."""
    seen: set[str] = set()
    runs = []
    for top in tops:
        for run_dir in find_run_dirs(top):
            if str(run_dir) not in seen:
                seen.add(str(run_dir))
                runs.append(read_run(run_dir, inside=inside))
    runs.sort(key=sort_key, reverse=True)
    return runs
