"""What the server is configured with, and what every tool module is handed at registration."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mcp_server.jobs import CaptureFn, JobManager
from mcp_server.workspace import Workspace
from profiler_core.workload_process import ChildLimits

RUNS_DIRNAME = "oprof-runs"  # new captures go to <first root>/oprof-runs/<stem>-<UTC time>/


@dataclass(frozen=True)
class ServerConfig:
    """Settings of one server; ``capture_fn`` replaces the real capture pipeline (tests)."""

    roots: tuple[Path, ...] = ()  # empty: the working directory
    runs_dir: Path | None = None  # default: <first root>/oprof-runs
    capture_fn: CaptureFn | None = None
    # bounds of the child process that runs workload code (apply_pass); None: the defaults per
    # device, or OPROF_WORKLOAD_TIMEOUT_S / OPROF_WORKLOAD_MEMORY_GB from the environment
    workload_limits: ChildLimits | None = None


@dataclass(frozen=True)
class ToolContext:
    """The shared state tools close over: configuration, workspace checks, capture jobs."""

    config: ServerConfig
    workspace: Workspace
    jobs: JobManager

    @property
    def runs_dir(self) -> Path:
        """Where new captures are written (always inside the workspace)."""
        if self.config.runs_dir is None:
            return self.workspace.primary / RUNS_DIRNAME
        return self.workspace.resolve(self.config.runs_dir)

    @classmethod
    def from_config(cls, config: ServerConfig) -> ToolContext:
        """Build the workspace and job manager that ``config`` describes."""
        workspace = Workspace(config.roots or (Path.cwd(),))
        return cls(config=config, workspace=workspace, jobs=JobManager(config.capture_fn))
