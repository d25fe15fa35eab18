"""The files of a columnar profile as one set: generation-named tables, profile.json last, old tables swept.

A columnar profile is three files that must change together::

    profile.json                          names both tables, their sizes and SHA-256 digests
    profile.kernels.<generation>.parquet  one row per kernel
    profile.operators.<generation>.parquet

:func:`write_file_set` writes a new generation's tables (each atomically), then replaces
profile.json (temp file + rename), and only then removes the tables of earlier generations.
A reader therefore sees the old profile.json with the old tables or the new one with the new
tables, never a mix; a writer stopped at any point (SIGKILL, SIGTERM, Ctrl-C, a full disk)
leaves the previous profile loadable. Tables of an interrupted write are unreferenced and
removed by the next write of the same profile (or at once, where the interruption is an
exception: SIGTERM in the CLI, Ctrl-C).

:func:`read_table_bytes` reads a table the way every other input is read
(:func:`profiler_core.confinement.open_input`: a regular file, inside the MCP workspace when
confined), then checks its size and digest against profile.json, so a table that is a link
out of the workspace, truncated, or one flipped bit off is refused by name.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from profiler_core.errors import SchemaError

KINDS = ("kernels", "operators")
_HASH_BLOCK = 1 << 20
_NAME_MAX = 255  # NAME_MAX on Linux: a longer table name is not a file's


class TableGoneError(SchemaError):
    """A table profile.json names is not there (removed by a newer write, or never copied)."""


def table_name(profile_path: Path, kind: str, generation: str) -> str:
    """``profile.json``, ``kernels``, ``ab12...`` -> ``profile.kernels.ab12....parquet``."""
    return f"{profile_path.stem}.{kind}.{generation}.parquet"


def _table_pattern(profile_path: Path) -> re.Pattern[str]:
    """Names of any generation's tables of ``profile_path`` (and the single-file names of earlier versions)."""
    return re.compile(rf"^{re.escape(profile_path.stem)}\.(?:{'|'.join(KINDS)})(?:\.[0-9a-f]{{8,64}})?\.parquet$")


def new_generation() -> str:
    """A fresh generation tag: 16 hex digits, never reused by a later write."""
    return secrets.token_hex(8)


def file_digest(path: Path) -> str:
    """SHA-256 of a file, hex."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def stale_tables(profile_path: Path, keep: Iterable[str]) -> list[Path]:
    """Tables beside ``profile_path`` of other generations than the ones in ``keep``."""
    pattern = _table_pattern(profile_path)
    kept = set(keep)
    try:
        names = os.listdir(profile_path.parent)
    except OSError:
        return []
    return [profile_path.parent / n for n in sorted(names) if pattern.match(n) and n not in kept]


def remove_stale_tables(profile_path: Path, keep: Iterable[str] = ()) -> None:
    """Remove earlier generations' tables once profile.json no longer names them (best effort)."""
    for path in stale_tables(profile_path, keep):
        try:
            if not path.is_dir():
                path.unlink()
        except OSError:
            continue


def write_file_set(profile_path: Path, tables: dict[str, Callable[[Any], None]],
                   write_json: Callable[[dict[str, tuple[str, int, str]]], Path]) -> Path:
    """Write ``tables`` (kind -> writer of its Parquet bytes), then profile.json, then sweep old tables.

    ``write_json`` gets kind -> (file name, size, sha256) and writes profile.json atomically.
    Any exception (Ctrl-C, SIGTERM as SystemExit, a full disk) removes this generation's tables
    and leaves the previous set as it was.
    """
    from profiler_core.atomic_write import write_stream_atomic

    generation = new_generation()
    written: list[Path] = []
    try:
        refs: dict[str, tuple[str, int, str]] = {}
        for kind, write in tables.items():
            path = profile_path.with_name(table_name(profile_path, kind, generation))
            written.append(path)
            write_stream_atomic(path, write)
            refs[kind] = (path.name, path.stat().st_size, file_digest(path))
        result = write_json(refs)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    remove_stale_tables(profile_path, keep=[name for name, _, _ in refs.values()])
    return result


def _check_name(profile_path: Path, what: str, name: str) -> None:
    shown = repr(name[:80]) + ("..." if len(name) > 80 else "")
    if "\x00" in name:
        raise SchemaError(f"{profile_path}: {what}.path {shown} contains a NUL byte; the file is damaged: "
                          "re-run 'oprof attribute'")
    if not name or len(name) > _NAME_MAX or Path(name).name != name or name in (".", ".."):
        raise SchemaError(f"{profile_path}: {what}.path {shown} is not a file name beside the profile; "
                          "re-run 'oprof attribute'")


def read_table_bytes(profile_path: Path, ref: Any, what: str) -> bytes:
    """The bytes of the table ``ref`` names, checked: confined like every input, size and digest as recorded."""
    from profiler_core.confinement import open_input

    _check_name(profile_path, what, ref.path)
    label = what.replace("_", " ")
    parquet = profile_path.parent / ref.path
    try:
        with open_input(parquet, what=f"Parquet {label}") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size != ref.bytes:
                raise SchemaError(f"{parquet}: {size} bytes, but {profile_path.name} says {ref.bytes} (truncated, "
                                  "or from another attribution); re-run 'oprof attribute'")
            data = fh.read()
    except FileNotFoundError as err:
        raise TableGoneError(f"{parquet}: the {label} {profile_path.name} points at is missing; keep the files "
                             "together, or re-run 'oprof attribute'") from err
    digest = getattr(ref, "sha256", None)
    if digest is not None and hashlib.sha256(data).hexdigest() != digest:
        raise SchemaError(f"{parquet}: its SHA-256 differs from the one {profile_path.name} records: the {label} "
                          "is damaged (or was replaced); restore it, or re-run 'oprof attribute'")
    return data
