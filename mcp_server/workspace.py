"""The workspace: the only directories the MCP server may read from or write to.

Every file argument a tool receives is resolved (``~`` expanded, relative paths taken from
the first root, symlinks followed) and must then lie inside one of the roots; anything else
is refused with a :class:`~profiler_core.errors.WorkspaceError` that names the roots and
how to add one. Resolving *before* the check is what stops ``link -> /etc`` escapes.

That covers the paths a tool is given; the files those lead to (a run directory's
artifacts, what its manifest names, the logs in an Inductor folder) are checked when they
are opened, by :func:`profiler_core.confinement.open_input` inside :meth:`Workspace.confined`,
which every tool body runs in.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from mcp_server.outputs import check_output
from profiler_core.confinement import check_path_length, confined
from profiler_core.errors import WorkspaceError

ENV_VAR = "OPROF_WORKSPACE"  # os.pathsep-separated roots, used when no --root is given


def roots_from_env(environ: dict[str, str] | None = None) -> tuple[Path, ...]:
    """Roots named by ``OPROF_WORKSPACE`` (empty when it is unset or blank)."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "")
    return tuple(Path(part) for part in value.split(os.pathsep) if part.strip())


class Workspace:
    """A set of root directories, and the checks that keep tool paths inside them."""

    def __init__(self, roots: Sequence[str | os.PathLike[str]]) -> None:
        if not roots:
            raise WorkspaceError("no workspace root given; pass --root DIR or set OPROF_WORKSPACE")
        resolved: list[Path] = []
        for root in roots:
            path = Path(root).expanduser().resolve()
            if not path.is_dir():
                raise WorkspaceError(f"workspace root {root}: not a directory; pass an existing directory")
            if path not in resolved:
                resolved.append(path)
        self.roots: tuple[Path, ...] = tuple(resolved)

    def adopt(self, offered: Sequence[Path], *, narrow_only: bool) -> tuple[Path, ...]:
        """Take the roots a client offers (existing directories); with ``narrow_only``, only those inside
        the current roots, so a client can narrow what the operator allowed but never widen it.
        The roots stay as they were when none qualifies; the roots in force are returned."""
        chosen: list[Path] = []
        for root in offered:
            path = Path(root).expanduser().resolve()
            if path.is_dir() and (not narrow_only or self.contains(path)) and path not in chosen:
                chosen.append(path)
        if chosen:
            self.roots = tuple(chosen)
        return self.roots

    @property
    def primary(self) -> Path:
        """The first root: relative paths are taken from it and new runs go under it."""
        return self.roots[0]

    @contextmanager
    def confined(self) -> Iterator[None]:
        """Within the block every file opened for reading must resolve inside the roots."""
        with confined(self.roots):
            yield

    def contains(self, path: Path) -> bool:
        """Whether an already-resolved ``path`` lies inside one of the roots."""
        return any(path == root or path.is_relative_to(root) for root in self.roots)

    def _outside(self, given: str, resolved: Path) -> WorkspaceError:
        roots = ", ".join(str(r) for r in self.roots)
        via = f" (it resolves to {resolved})" if str(resolved) != given else ""
        return WorkspaceError(
            f"{given}{via} is outside the workspace ({roots}); use a path inside it, "
            "or restart oprof-mcp with --root DIR (or OPROF_WORKSPACE) naming its directory"
        )

    def resolve(self, given: str | os.PathLike[str]) -> Path:
        """Resolve ``given`` (symlinks included) and refuse it unless it lies inside a root."""
        text = os.fspath(given)
        check_path_length(text)  # before any work: resolving a 500k-character path takes seconds
        if not text.strip():
            raise WorkspaceError("empty path; pass a file or directory inside the workspace")
        path = Path(text).expanduser()
        if not path.is_absolute():
            path = self.primary / path
        resolved = path.resolve()
        if not self.contains(resolved):
            raise self._outside(text, resolved)
        return resolved

    def existing_file(self, given: str | os.PathLike[str], *, what: str = "file") -> Path:
        """A path inside the workspace that is an existing regular file."""
        path = self.resolve(given)
        if not path.exists():
            raise WorkspaceError(f"{given}: no such {what} in the workspace; call list_runs to see runs")
        if not path.is_file():
            raise WorkspaceError(f"{given}: is a directory, not a {what}")
        return path

    def existing_dir(self, given: str | os.PathLike[str], *, what: str = "directory") -> Path:
        """A path inside the workspace that is an existing directory."""
        path = self.resolve(given)
        if not path.is_dir():
            state = "is a file" if path.exists() else "does not exist"
            raise WorkspaceError(f"{given}: {state}; pass a {what} (list_runs shows the run directories)")
        return path

    def existing(self, given: str | os.PathLike[str], *, what: str = "file or directory") -> Path:
        """A path inside the workspace that exists (file or directory)."""
        path = self.resolve(given)
        if not path.exists():
            raise WorkspaceError(f"{given}: no such {what} in the workspace; call list_runs to see runs")
        return path

    def output_file(self, given: str | os.PathLike[str], *, kind: str) -> Path:
        """Where a tool may write a ``kind`` file: inside the workspace, never over a capture's
        artifact, and over an existing file only when that file is an earlier ``kind`` output."""
        return check_output(self.resolve(given), os.fspath(given), kind)

    def output_dir(self, given: str | os.PathLike[str]) -> Path:
        """A directory a tool may create files in: inside the workspace, not an existing file."""
        path = self.resolve(given)
        if path.exists() and not path.is_dir():
            raise WorkspaceError(f"{given}: exists and is not a directory; pass a directory to write into")
        return path
