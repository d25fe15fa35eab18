"""Making a new run directory: where it goes by default, and never over an earlier run's files.

    default_run_dir(Path("examples/gpt2.py"))   -> oprof-runs/gpt2-20261201T115800Z/
    default_run_dir(Path("examples/gpt2.py"), kind="optimize") -> oprof-runs/gpt2-optimize-20261201T115800Z/
    new_run_dir(None, Path("examples/gpt2.py")) -> the same, created (empty)
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from profiler_core.errors import ProfilerError

DEFAULT_RUNS_DIR = Path("oprof-runs")


def utc_now() -> str:
    """The current time as a manifest records it (ISO 8601, seconds, ``Z``)."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def default_run_dir(workload: Path, base: Path = DEFAULT_RUNS_DIR, *, kind: str = "") -> Path:
    """``oprof-runs/<workload stem>[-<kind>]-<UTC timestamp>/`` (suffixed if that name is taken).

    ``kind``: ``""`` for a capture, ``"optimize"`` for an optimize run, ``"optimized"`` for a pass
    plan, so the CLI and the MCP server name each run alike.
    """
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    stem = f"{workload.stem}-{kind}" if kind else workload.stem
    candidate = base / f"{stem}-{stamp}"
    n = 2
    while candidate.exists():
        candidate = base / f"{stem}-{stamp}-{n}"
        n += 1
    return candidate


def new_run_dir(out_dir: Path | None, workload: Path) -> Path:
    """Create the run directory ``out_dir`` (default: :func:`default_run_dir`); one holding files is refused."""
    run_dir = Path(out_dir) if out_dir is not None else default_run_dir(workload)
    if run_dir.exists() and any(run_dir.iterdir()):
        raise ProfilerError(f"{run_dir}: already holds files; pass a new or empty --out directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir
