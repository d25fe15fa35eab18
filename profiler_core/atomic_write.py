"""Write files so a reader never sees half of one: write a sibling temp file, then rename.

What a target may be, and what happens to it:

* a missing path or a regular file: replaced whole by the rename; an existing file keeps
  its permission bits, a new one gets the usual ``0666 & ~umask`` (not ``mkstemp``'s 0600);
* a symlink: written *through*: the file it points at is replaced and the link is kept
  (a dangling link creates its target);
* a directory, a device (``/dev/null``), a FIFO or a socket: refused with an
  :class:`~profiler_core.errors.OutputError`, never replaced by a regular file.

Temp files are named ``.<name>.<pid>.<random>.tmp`` beside the target. One left by a writer
that was killed (SIGKILL, power loss) is swept by the next write to the same folder once its
process is gone; SIGTERM and Ctrl-C remove it on the way out (the CLI turns SIGTERM into an
exception so that ``finally`` clauses run). :func:`write_files_atomic` writes several files
into a temporary folder first and renames them into place only when all are written.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO

from profiler_core.errors import OutputError

_TEMP_PATTERN = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp$")
_ORPHAN_AGE_S = 24 * 3600.0  # a temp file this old is swept even when its pid is reused


def _umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux /proc)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_orphans(folder: Path) -> list[Path]:
    """Remove temp files in ``folder`` left by writers that no longer run; the paths removed."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        match = _TEMP_PATTERN.match(entry.name)
        if match is None or entry.is_symlink():
            continue
        try:
            old = now - entry.stat(follow_symlinks=False).st_mtime > _ORPHAN_AGE_S
        except OSError:
            continue
        if old or not _pid_alive(int(match["pid"])):
            try:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)  # a write_files_atomic staging folder
                else:
                    os.unlink(entry.path)
                removed.append(Path(entry.path))
            except OSError:
                continue
    return removed


def output_target(path: str | os.PathLike[str]) -> tuple[Path, int | None]:
    """Where a write to ``path`` lands (symlinks followed) and the mode it must keep (None: new file).

    Refuses a directory or any non-regular file with an ``OutputError`` naming it.
    """
    given = Path(path)
    target = given.resolve() if given.is_symlink() else given
    try:
        info = target.stat()
    except FileNotFoundError:
        return target, None
    except OSError as err:
        raise OutputError(f"{given}: cannot write there ({err.strerror or err}); choose another path") from err
    if stat.S_ISDIR(info.st_mode):
        raise OutputError(f"{given}: is a directory; pass a file name to write")
    if not stat.S_ISREG(info.st_mode):
        from profiler_core.confinement import file_kind

        raise OutputError(f"{given}: is a {file_kind(info.st_mode)}, not a regular file; outputs are written "
                          "only to regular files: pass a file path")
    return target, stat.S_IMODE(info.st_mode)


def _temp_in(folder: Path, name: str) -> tuple[int, Path]:
    while True:
        tmp = folder / f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600), tmp
        except FileExistsError:
            continue


def _cannot_write(path: str | os.PathLike[str], err: OSError) -> OutputError:
    return OutputError(f"{os.fspath(path)}: cannot write ({err.strerror or err}); choose a writable path "
                       "with free space")


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (same-directory temp file + ``os.replace``)."""

    def write(handle: BinaryIO) -> None:
        handle.write(data)

    return write_stream_atomic(path, write)


def write_stream_atomic(path: str | os.PathLike[str], write: Callable[[BinaryIO], None]) -> Path:
    """Write ``path`` atomically from ``write(handle)``, for outputs too large to hold as one buffer."""
    target, mode = output_target(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        sweep_orphans(target.parent)
        fd, tmp = _temp_in(target.parent, target.name)
    except OSError as err:
        raise _cannot_write(path, err) from err
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fchmod(handle.fileno(), mode if mode is not None else 0o666 & ~_umask())
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise _cannot_write(path, err) from err
    except BaseException:  # Ctrl-C, SIGTERM (as SystemExit), a failing writer: no temp file stays behind
        tmp.unlink(missing_ok=True)
        raise
    return Path(path) if Path(path).is_symlink() else target


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_files_atomic(folder: str | os.PathLike[str], files: Mapping[str, bytes]) -> list[Path]:
    """Write several files into ``folder`` together: all into a temporary folder, then renamed.

    Nothing in ``folder`` changes unless every file was written in full (a full disk leaves
    the old set untouched, not a new ``kernels.csv`` beside an old ``operators.csv``).
    """
    out = Path(folder)
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out}: exists and is not a directory; pass a directory for the files")
    targets = {name: output_target(out / name) for name in files}
    staging = out / f".oprof-files.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        out.mkdir(parents=True, exist_ok=True)
        sweep_orphans(out)
        staging.mkdir(mode=0o700)
    except OSError as err:
        raise _cannot_write(out, err) from err
    try:
        umask = _umask()
        for name, data in files.items():
            fd = os.open(staging / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                mode = targets[name][1]
                os.fchmod(handle.fileno(), mode if mode is not None else 0o666 & ~umask)
                os.fsync(handle.fileno())
        for name in files:
            os.replace(staging / name, targets[name][0])
    except OSError as err:
        raise _cannot_write(out, err) from err
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [out / name for name in files]
