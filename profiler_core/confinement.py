"""Where an input may be opened from, and what it must be: one gate every reader goes through.

Readers open their files through :func:`open_input` (or check a path handed to a library,
such as SQLite, with :func:`input_path`), so the same rules hold for every artifact a run
directory, a manifest or a user names:

* the file must be a regular file: a device (``/dev/zero``), a FIFO or a socket is refused
  before a byte is read, so a link to one can neither exhaust memory nor hang the reader;
* the path is bounded in length before any work (resolving a 500k-character path costs
  seconds);
* inside :func:`confined` (the MCP server wraps every tool call in it) the path is resolved,
  symlinks included, *when it is opened*, and refused unless it lies inside the roots. After
  the open, the descriptor's own path is checked again, so a link swapped in between the
  check and the open is caught too.

Outside :func:`confined` (the CLI, the library) any regular file may be read: the user
runs oprof on their own files.
"""

from __future__ import annotations

import errno
import gzip
import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import IO, BinaryIO, cast

from profiler_core.errors import ArtifactFormatError, WorkspaceError

MAX_PATH_CHARS = 4096  # PATH_MAX on Linux; longer is refused before it is resolved
_ROOTS: ContextVar[tuple[Path, ...] | None] = ContextVar("oprof_confinement_roots", default=None)
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_FD_DIR = Path("/proc/self/fd")


@contextmanager
def confined(roots: Sequence[str | os.PathLike[str]]) -> Iterator[None]:
    """Within the block, every input must resolve inside one of ``roots``."""
    token = _ROOTS.set(tuple(Path(r).resolve() for r in roots))
    try:
        yield
    finally:
        _ROOTS.reset(token)


def active_roots() -> tuple[Path, ...] | None:
    """The roots inputs are confined to now, or None outside :func:`confined`."""
    return _ROOTS.get()


def is_inside(path: Path, roots: Sequence[Path]) -> bool:
    """Whether the already-resolved ``path`` is one of ``roots`` or lies below one."""
    return any(path == root or path.is_relative_to(root) for root in roots)


def check_path_length(text: str, *, what: str = "path") -> None:
    """Refuse a path too long to be real (before anything resolves it)."""
    if len(text) > MAX_PATH_CHARS:
        raise WorkspaceError(f"{what} of {len(text)} characters (starting {text[:60]!r}) is longer than "
                             f"{MAX_PATH_CHARS}; pass a real path")
    if "\x00" in text:
        raise WorkspaceError(f"{text[:200]!r}: paths cannot contain NUL characters")


def file_kind(mode: int) -> str:
    """A file type in words, for messages (``'FIFO'``, ``'character device'``, ...)."""
    for test, name in ((stat.S_ISDIR, "directory"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISLNK, "symlink")):
        if test(mode):
            return name
    return "regular file" if stat.S_ISREG(mode) else "special file"


def _outside(given: str, resolved: Path, roots: Sequence[Path]) -> WorkspaceError:
    names = ", ".join(str(r) for r in roots)
    via = f" (it resolves to {resolved})" if str(resolved) != given else ""
    return WorkspaceError(f"{given}{via} is outside the workspace ({names}); use a file inside it, "
                          "or restart oprof-mcp with --root naming its directory")


def _not_regular(given: str, mode: int, what: str) -> ArtifactFormatError:
    return ArtifactFormatError(f"{given}: is a {file_kind(mode)}, not a regular file; pass the {what} itself")


def input_path(path: str | os.PathLike[str], *, what: str = "input file", directory_ok: bool = False) -> Path:
    """``path`` resolved and checked: it exists, is a regular file (or a directory when
    ``directory_ok``), and lies inside the confinement roots when there are any.

    A missing file raises ``FileNotFoundError``, so each reader keeps its own message for it.
    """
    text = os.fspath(path)
    check_path_length(text, what=f"{what} path")
    try:
        resolved = Path(text).resolve()
    except (OSError, RuntimeError) as err:  # a symlink loop
        raise ArtifactFormatError(f"{text}: cannot resolve it ({err}); pass a real {what}") from err
    roots = _ROOTS.get()
    if roots is not None and not is_inside(resolved, roots):
        raise _outside(text, resolved, roots)
    try:
        mode = resolved.stat().st_mode
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), text) from None
    if stat.S_ISREG(mode) or (directory_ok and stat.S_ISDIR(mode)):
        return resolved
    raise _not_regular(text, mode, what)


def _descriptor_path(fd: int) -> Path | None:
    """The path the kernel holds for an open descriptor (Linux), None where it cannot say."""
    try:
        return Path(os.readlink(_FD_DIR / str(fd)))
    except OSError:
        return None


def open_input(path: str | os.PathLike[str], *, what: str = "input file",
               max_bytes: int | None = None, buffering: int = -1) -> BinaryIO:
    """Open an input for binary reading, after the checks of :func:`input_path`.

    The open neither follows a final symlink swapped in after the check nor blocks on a FIFO;
    the descriptor is checked again (regular file, inside the roots). ``max_bytes`` refuses a
    file larger than its kind can be before it is read.
    """
    text = os.fspath(path)
    resolved = input_path(text, what=what)
    fd = os.open(resolved, _OPEN_FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(text, info.st_mode, what)
        roots = _ROOTS.get()
        if roots is not None:
            real = _descriptor_path(fd)
            if real is not None and not is_inside(real, roots):
                raise _outside(text, real, roots)
        if max_bytes is not None and info.st_size > max_bytes:
            raise ArtifactFormatError(
                f"{text}: {info.st_size} bytes, more than a {what} can hold ({max_bytes} at most); "
                "pass the right file")
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


class _OwningGzip(gzip.GzipFile):
    """A gzip reader that closes the file it reads from (``GzipFile(fileobj=...)`` does not)."""

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__(fileobj=raw, mode="rb")
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def open_input_gzip(path: str | os.PathLike[str], *, what: str = "input file") -> IO[bytes]:
    """A gunzipping reader over :func:`open_input`."""
    return cast(IO[bytes], _OwningGzip(open_input(path, what=what)))


def read_input(path: str | os.PathLike[str], *, what: str = "input file", max_bytes: int | None = None) -> bytes:
    """The whole of an input file (see :func:`open_input`)."""
    with open_input(path, what=what, max_bytes=max_bytes) as fh:
        return fh.read()
