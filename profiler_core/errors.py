"""One exception tree for the whole library.

Every error a user can cause (a missing tool, a malformed artifact, runs that do not
match, a workload that breaks the contract) is a ``ProfilerError`` whose message names
the offending thing and the next step. The CLI prints that message on one line and exits
with status 2; the MCP server turns it into a ``ToolError`` the model can read.
"""

from __future__ import annotations


class ProfilerError(Exception):
    """Base class: a user-facing error with an actionable message."""

    exit_code: int = 2


class ArtifactFormatError(ProfilerError):
    """An input artifact is missing, truncated, malformed or of the wrong kind."""


class ToolNotFoundError(ProfilerError):
    """An external tool (ncu, nsys, nvidia-smi) is not installed or not reachable."""


class ToolFailedError(ProfilerError):
    """An external tool ran but failed; the message carries its last output lines."""


class DeterminismError(ProfilerError):
    """Two runs of one workload launched different kernels (name, count, order, grid/block)."""


class AttributionError(ProfilerError):
    """The evidence cannot be joined (e.g. no timeline at all)."""


class SchemaError(ProfilerError):
    """A profile.json (or another project file) does not validate against its schema."""


class WorkloadError(ProfilerError):
    """A workload file breaks the contract (missing entry point, import error, exception)."""


class WorkloadProcessError(WorkloadError):
    """The child process running workload code ended badly; ``how``: exit, signal, timeout or memory."""

    def __init__(self, message: str, *, how: str = "exit", output: object = None) -> None:
        super().__init__(message)
        self.how = how
        self.output = output  # workload_process.ChildOutput: what the child printed, capped


class NotReproducibleError(WorkloadError):
    """Two runs of the original step from identical state disagree: the workload draws random numbers."""


class PassError(ProfilerError):
    """A graph pass is unknown, or failed while being applied."""


class ValidationFailedError(ProfilerError):
    """An optimized model's outputs differ from the baseline beyond tolerance."""


class ComparabilityError(ProfilerError):
    """Two profiles cannot be compared (different GPU, iteration counts, ...)."""


class WorkloadMismatchError(ComparabilityError):
    """Two profiles measure different workloads: a ratio of their times is no speedup."""


class WorkspaceError(ProfilerError):
    """A path lies outside the allowed workspace roots."""


class OutputError(ProfilerError):
    """An output path cannot take the file (a directory, a device, a FIFO, an unwritable place)."""


class CaptureCancelledError(ProfilerError):
    """A capture was cancelled before it finished."""
