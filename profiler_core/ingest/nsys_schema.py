"""The shape of one Nsight Systems SQLite export: which tables and columns it has.

nsys adds, renames and drops columns between versions and leaves out empty tables
altogether, so readers ask this object before they build a query instead of assuming a
layout. It also owns the checks that turn "this is not what we expected" into an
``ArtifactFormatError`` naming the table or column and the fix.

Small queries (the schema, enums, a damaged row's start) go through ``sqlite3``; the bulk
tables through the ADBC SQLite driver, which hands back Arrow columns without a Python object
per value (1M kernels, 1M runtime calls and 1M NVTX ranges in about 3 s of CPU, against 18 s
for ``sqlite3`` rows turned into arrays, and 0.4 GB).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profiler_core.confinement import input_path, open_input
from profiler_core.errors import ArtifactFormatError

if TYPE_CHECKING:
    import pyarrow as pa

REEXPORT = "re-export with `nsys export --type sqlite <report>.nsys-rep`"
_SQLITE_MAGIC = b"SQLite format 3\x00"
# Tables only nsys writes; any one of them marks a file as an nsys export.
_NSYS_MARKERS = ("StringIds", "META_DATA_EXPORT", "TARGET_INFO_GPU", "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_")
# Rows per Arrow batch: a table of up to 4M rows arrives as one batch, already contiguous (the
# driver's default of 1024 rows per batch reads 15% slower and needs a copy to join the batches;
# the driver grows its buffers as rows come, so a small table costs no more).
_ARROW_BATCH_ROWS = str(1 << 22)


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
    _arrow: Any = None  # (AdbcDatabase, AdbcConnection), opened on the first bulk read

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
        """A SQL expression that is 1 when the row holds integers where nsys writes them.

        ``arrow_table`` gets the same guarantee from the columns' types at no cost per row, and
        runs this only to find the first damaged row, so that its error names it.
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

    def arrow_table(self, table: str, alias: str, select: str, not_null: Sequence[str],
                    nullable: Sequence[str] = (), where: str = "") -> pa.Table:
        """``SELECT {select} FROM {table} AS {alias} {where}`` as one-chunk Arrow columns.

        The driver types each column from its first rows (a text among them makes the column
        text) and refuses a later value of another type; so an integer column is integer in
        every row, and the checks of ``integers_ok`` (``not_null`` columns integer, ``nullable``
        integer or NULL) cost nothing per row. A damaged row is found by running them in SQL.
        """
        import adbc_driver_manager
        import pyarrow as pa

        if self._arrow is None:
            import adbc_driver_sqlite

            checked = input_path(self.path, what="Nsight Systems export")
            database = adbc_driver_sqlite.connect(f"{checked.as_uri()}?mode=ro")
            self._arrow = (database, adbc_driver_manager.AdbcConnection(database))
        statement = adbc_driver_manager.AdbcStatement(self._arrow[1])
        ok = self.integers_ok(table, alias, not_null, nullable)
        try:
            statement.set_options(**{"adbc.sqlite.query.batch_rows": _ARROW_BATCH_ROWS})
            statement.set_sql_query(f"SELECT {select} FROM {table} AS {alias} {where}")
            handle, _ = statement.execute_query()
            data = pa.RecordBatchReader._import_from_c(handle.address).read_all()
            if any(column.num_chunks > 1 for column in data.columns):
                data = data.combine_chunks()
        except (adbc_driver_manager.Error, pa.ArrowException, OSError) as err:
            if self._first_rejected(table, alias, ok, where) is not None:
                raise self.first_damaged(table, alias, ok, where) from err
            raise ArtifactFormatError(
                f"{self.path}: SQLite cannot read it ({type(err).__name__}: {err}); the file is corrupt or "
                f"truncated: {REEXPORT}"
            ) from err
        finally:
            statement.close()
        for column in (*not_null, *[c for c in nullable if c in self.columns(table)]) if data.num_rows else ():
            kind = data.schema.field(column).type
            typed = pa.types.is_integer(kind) or (column in nullable and pa.types.is_null(kind))
            if not typed or (column in not_null and data.column(column).null_count):
                raise self.first_damaged(table, alias, ok, where)
        return data

    def first_damaged(self, table: str, alias: str, ok: str, where: str = "") -> ArtifactFormatError:
        """The ``damaged`` error for the first row of ``table`` that ``ok`` rejects."""
        bad = self._first_rejected(table, alias, ok, where)
        return self.damaged(table, None if bad is None else bad[0])

    def _first_rejected(self, table: str, alias: str, ok: str, where: str) -> tuple[object] | None:
        condition = f"{where} AND NOT {ok}" if where else f"WHERE NOT {ok}"
        row = self.conn.execute(f"SELECT {alias}.start FROM {table} AS {alias} {condition} LIMIT 1").fetchone()
        return None if row is None else (row[0],)

    def close(self) -> None:
        """Close the Arrow connection (the caller owns ``conn``)."""
        if self._arrow is not None:
            self._arrow[1].close()
            self._arrow[0].close()
            self._arrow = None
