"""The shape of one Nsight Systems SQLite export: which tables and columns it has.

nsys adds, renames and drops columns between versions and leaves out empty tables
altogether, so readers ask this object before they build a query instead of assuming a
layout. It also owns the checks that turn "this is not what we expected" into an
``ArtifactFormatError`` naming the table or column and the fix.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from profiler_core.confinement import input_path, open_input
from profiler_core.errors import ArtifactFormatError

REEXPORT = "re-export with `nsys export --type sqlite <report>.nsys-rep`"
_SQLITE_MAGIC = b"SQLite format 3\x00"
# Tables only nsys writes; any one of them marks a file as an nsys export.
_NSYS_MARKERS = ("StringIds", "META_DATA_EXPORT", "TARGET_INFO_GPU", "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_")


def open_export(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only after checking that it is a SQLite database at all."""
    try:
        with open_input(path, what="Nsight Systems export") as f:
            header = f.read(len(_SQLITE_MAGIC))
    except FileNotFoundError as err:
        raise ArtifactFormatError(
            f"{path}: no such Nsight Systems export; create one with `nsys export --type sqlite "
            f"<report>.nsys-rep`"
        ) from err
    except OSError as err:
        raise ArtifactFormatError(f"{path}: cannot be read ({err.strerror or err}); check the path") from err
    if header != _SQLITE_MAGIC:
        raise ArtifactFormatError(
            f"{path}: not a SQLite database ({'empty file' if not header else 'wrong header'}); pass the "
            f"file written by `nsys export --type sqlite`, not the .nsys-rep report itself"
        )
    # mode=ro: never create a journal or modify the user's export.
    try:
        checked = input_path(path, what="Nsight Systems export")
        return sqlite3.connect(f"{checked.as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as err:
        raise ArtifactFormatError(f"{path}: SQLite cannot open it ({err}); {REEXPORT}") from err


class StringIds(dict[int, "str | None"]):
    """``StringIds`` looked up on first use: ``strings[id]`` is the text, or None when absent.

    A big export names a few hundred kernels and API calls in 500k rows, so one point query
    per distinct id beats both a join (a fresh str per row) and loading the whole table.
    After ``_POINT_QUERIES`` misses (many distinct registered NVTX strings, say) the whole
    table is loaded at once instead.
    """

    _POINT_QUERIES = 2000

    def __init__(self, conn: sqlite3.Connection, transform: Callable[[str], str] | None) -> None:
        super().__init__()
        self._conn = conn
        self._transform = transform
        self._misses = 0
        self._complete = False

    def __missing__(self, key: int) -> str | None:
        if self._complete:
            return None
        self._misses += 1
        if self._misses > self._POINT_QUERIES:
            self._load_all()
            return self.get(key)
        row = self._conn.execute("SELECT value FROM StringIds WHERE id = ?", (key,)).fetchone()
        value = self._clean(row[0]) if row is not None else None
        self[key] = value
        return value

    def _load_all(self) -> None:
        for key, text in self._conn.execute("SELECT id, value FROM StringIds"):
            self[key] = self._clean(text)
        self._complete = True

    def _clean(self, text: object) -> str | None:
        if type(text) is not str:
            return None
        return text if self._transform is None else self._transform(text)


@dataclass
class ExportSchema:
    """Tables of an open export, with their columns looked up on demand."""

    path: Path
    conn: sqlite3.Connection
    tables: frozenset[str]
    _columns: dict[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path, conn: sqlite3.Connection) -> ExportSchema:
        """List the tables and check that the file is an nsys export."""
        tables = frozenset(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        if not any(t.startswith(_NSYS_MARKERS) for t in tables):
            raise ArtifactFormatError(
                f"{path}: a SQLite database, but not an Nsight Systems export (no StringIds, CUPTI or "
                f"NVTX tables); create one with `nsys export --type sqlite <report>.nsys-rep`"
            )
        schema = cls(path, conn, tables)
        schema.require_table("StringIds")
        schema.require("StringIds", ("id", "value"))
        return schema

    def columns(self, table: str) -> frozenset[str]:
        """Column names of ``table`` (empty when the table is absent)."""
        if table not in self._columns:
            if table not in self.tables:
                return frozenset()
            self._columns[table] = frozenset(r[1] for r in self.conn.execute(f'PRAGMA table_info("{table}")'))
        return self._columns[table]

    def require_table(self, table: str) -> None:
        """Raise unless the export has ``table``."""
        if table not in self.tables:
            raise ArtifactFormatError(f"{self.path}: the export lacks the required table {table}; {REEXPORT}")

    def require(self, table: str, columns: Iterable[str]) -> None:
        """Raise unless ``table`` has every one of ``columns``."""
        missing = [c for c in columns if c not in self.columns(table)]
        if missing:
            raise ArtifactFormatError(
                f"{self.path}: table {table} lacks the required column(s) {', '.join(missing)} (an nsys "
                f"version this reader does not know, or an edited file); {REEXPORT}"
            )

    def column_or_null(self, table: str, column: str, alias: str) -> str:
        """``alias.column`` for a SELECT list, or ``NULL`` when this export has no such column."""
        return f"{alias}.{column}" if column in self.columns(table) else "NULL"

    def integers_ok(
        self, table: str, alias: str, not_null: Sequence[str], nullable: Sequence[str] = ()
    ) -> str:
        """A SELECT-list expression that is 1 when the row holds integers where nsys writes them.

        Selected with the row, it costs no extra scan of a 500k-row table, and lets the row
        loops trust their types: a damaged file raises ``damaged()`` instead of yielding
        records with strings for times.
        """
        conditions = [f"typeof({alias}.{c}) = 'integer'" for c in not_null]
        present = [c for c in nullable if c in self.columns(table)]
        conditions += [f"typeof({alias}.{c}) IN ('integer', 'null')" for c in present]
        return "(" + " AND ".join(conditions) + ")"

    def damaged(self, table: str, start: object) -> ArtifactFormatError:
        """The error for a row that ``integers_ok`` rejected."""
        return ArtifactFormatError(
            f"{self.path}: a {table} row (start {start!r}) holds a non-integer time, id or size; the file is "
            f"damaged: {REEXPORT}"
        )

    def strings(self, transform: Callable[[str], str] | None = None) -> StringIds:
        """A lazy ``id -> text`` view of ``StringIds`` (optionally transformed once per id)."""
        return StringIds(self.conn, transform)

    def enum_labels(self, table: str) -> dict[int, str]:
        """``id -> label`` of one of nsys's ENUM_* tables (empty when absent)."""
        if not {"id", "label"} <= self.columns(table):
            return {}
        return dict(self.conn.execute(f"SELECT id, label FROM {table}").fetchall())
