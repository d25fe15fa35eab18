"""A kernel table read from Parquet decodes a column when something first reads it.

``read_profile`` checks every column's presence and type and works out the strings' codes; the
rest becomes numpy on first read (``KernelTable.deferred``). What a reader sees must not depend on
what was read first, and a damaged column must still be refused when the profile is read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from profiler_core.attribution.kernel_table import KernelTable
from profiler_core.errors import SchemaError
from profiler_core.profile_io import read_profile
from tests.attribution.columnar_copy import write_columnar
from tests.attribution.test_columnar_golden import _rewritten
from tests.conftest import REPO

RUN = REPO / "examples" / "captures" / "h200" / "gpt2" / "baseline"
# read by the checks of read_profile, or given at once; every other field waits for its first reader
READ_AT_ONCE = {"strings", "fused", "operator_keys", "counter_fields", "have_counters", "operator", "start_ns",
                "end_ns", "inherited_from", "counter_row"}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_columnar(RUN, tmp_path_factory.mktemp("deferred"))


def _fields() -> list[str]:
    from dataclasses import fields

    return [f.name for f in fields(KernelTable)]


def _values(table: KernelTable, order: list[str]) -> dict[str, Any]:
    """Every field of ``table`` read in ``order``, as plain values (arrays as lists)."""
    out: dict[str, Any] = {}
    for name in order:
        value = getattr(table, name)
        if name == "evidence":
            value = [[c.has.tolist(), c.operator.tolist(), c.op_id.tolist(), c.detail.tolist()] for c in value]
        elif name == "strings":
            value = list(value.values)
        elif isinstance(value, np.ndarray):
            value = value.tolist()
        elif not isinstance(value, bool):
            value = list(value)
        out[name] = value
    return out


def test_reading_the_profile_decodes_only_what_its_checks_read(written: Path) -> None:
    table = read_profile(written).kernels
    assert isinstance(table, KernelTable)
    decoded = {f for f in _fields() if f in table.__dict__}
    assert decoded == READ_AT_ONCE
    # a counter column is read alone while the counter matrix is not built
    fields = table.counter_fields
    alone = [table.counter_column(c) for c in range(len(fields))]
    assert "counter_values" not in table.__dict__
    matrix = table.counter_values
    assert matrix.shape == (len(table), len(fields))
    for c in range(len(fields)):
        assert alone[c].tobytes() == matrix[:, c].tobytes() == table.counter_column(c).tobytes(), fields[c]
    assert not table.__dict__["_pending"].get("counter_values")


def test_what_is_read_does_not_depend_on_the_order_it_is_read_in(written: Path) -> None:
    # every string column shares one dictionary whose codes are given in first-seen order: read
    # first, read last, each column holds the same codes
    names = _fields()
    first = _values(read_profile(written).kernels, names)
    for order in (names[::-1], sorted(names, key=lambda n: (n not in ("evidence", "grid"), n))):
        assert _values(read_profile(written).kernels, order) == first
    # and they are the models' values: kernel j's model from the table as read
    table = read_profile(written).kernels
    for j in (0, len(table) // 2, len(table) - 1):
        model = table.model(j)
        grid = first["grid"][j]
        assert model.name == first["strings"][first["name"][j]]
        assert model.grid == (None if grid < 0 else tuple(first["dims"][grid]))


@pytest.mark.parametrize(("column", "change", "match"), [
    ("grid_x", "text", r"column 'grid_x' holds string, not integers"),
    ("evidence.cupti_correlation.detail", "numbers",
     r"column 'evidence.cupti_correlation.detail' holds int64, not dictionary-encoded"),
    ("counters.dram_bytes_read", "text", r"column 'counters.dram_bytes_read' holds string, not floats"),
    ("tiers_agree", "dropped", r"no column 'tiers_agree'"),
], ids=["launch", "evidence", "counter", "missing"])
def test_a_damaged_column_is_refused_when_the_profile_is_read(written: Path, tmp_path: Path, column: str,
                                                             change: str, match: str) -> None:
    import shutil

    import pyarrow as pa

    for f in written.parent.iterdir():
        shutil.copy(f, tmp_path / f.name)
    profile = tmp_path / "profile.json"

    def damaged(t: Any) -> Any:
        i = t.column_names.index(column)
        if change == "dropped":
            return t.remove_column(i)
        if change == "text":
            return t.set_column(i, column, pa.array(["x"] * t.num_rows))
        return t.set_column(i, column, pa.array(np.arange(t.num_rows)))

    _rewritten(profile, "kernels", damaged)
    assert json.loads(profile.read_text())["kernel_table"]["kernel_count"] > 0
    with pytest.raises(SchemaError, match=rf"not an oprof kernel table \(ValueError: {match}"):
        read_profile(profile)


# the kernel table's columns whose dictionaries are interned when the profile is read (a fixed order of
# codes), and the columns read_profile's checks read: every other column stays in the file's bytes
# (the DRAM check reads its two counters)
DECODED_AT_ONCE = {"operator_key", "fused_with", "name", "short_name", "kind", "reason", "library", "module_path",
                   "counter_source", "tier", "start_ns", "end_ns", "inherited_from", "counters.dram_bytes_read",
                   "counters.dram_bytes_written"}


def test_a_column_is_decoded_from_the_files_bytes_when_first_read(written: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading the profile decodes the columns it interns or checks; a column read later is decoded
    then, once, from the bytes read (and checked) with the profile: the file is not opened again."""
    from profiler_core import columnar_profile

    decoded: list[str] = []
    read = columnar_profile._ParquetColumns.read

    def logged(self: Any, name: str) -> Any:
        decoded.append(name)
        return read(self, name)

    monkeypatch.setattr(columnar_profile._ParquetColumns, "read", logged)
    table = read_profile(written).kernels
    assert isinstance(table, KernelTable)
    at_once = set(decoded)
    evidence = {n for n in at_once if n.startswith("evidence.")}
    assert at_once - evidence == DECODED_AT_ONCE and all(n.endswith((".operator", ".detail")) for n in evidence)
    kernel_parquet = next(written.parent.glob("profile.kernels.*.parquet"))
    kernel_parquet.rename(kernel_parquet.with_suffix(".gone"))  # later reads come from the bytes read
    try:
        decoded.clear()
        assert len(table.stream) == len(table) and decoded == ["stream"]
        field = next(f for f in table.counter_fields if not f.startswith("dram_"))
        table.counter_column(table.counter_fields.index(field))
        assert decoded == ["stream", f"counters.{field}"]
        grid = table.grid
        assert decoded[2:] == [f"{label}_{a}" for label in ("grid", "block") for a in "xyz"]
        assert table.grid is grid and len(decoded) == 8  # kept: not decoded twice
        models = [table.model(j) for j in (0, len(table) - 1)]
        assert all(m.grid is not None for m in models)
    finally:
        kernel_parquet.with_suffix(".gone").rename(kernel_parquet)


def test_a_damaged_page_read_later_is_one_clear_error(written: Path, tmp_path: Path) -> None:
    """A profile.json without the table's digest (hand-edited) and a damaged page of a column read
    after the profile: the read of that column names the file and the fix, and the command says it
    in one line, with no traceback."""
    import shutil
    import subprocess
    import sys

    import pyarrow.parquet as pq

    for f in written.parent.iterdir():
        shutil.copy(f, tmp_path / f.name)
    profile = tmp_path / "profile.json"
    doc = json.loads(profile.read_text())
    del doc["kernel_table"]["sha256"]
    profile.write_text(json.dumps(doc))
    parquet = tmp_path / doc["kernel_table"]["path"]
    meta = pq.ParquetFile(parquet).metadata
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    chunk = meta.row_group(0).column(names.index("stream"))
    data = bytearray(parquet.read_bytes())
    data[chunk.data_page_offset:chunk.data_page_offset + 16] = b"\xff" * 16  # the page header
    parquet.write_bytes(bytes(data))
    table = read_profile(profile).kernels  # the damaged column is not read yet
    with pytest.raises(SchemaError, match=r"profile\.kernels\.\w+\.parquet: not a readable Parquet kernel table "
                                          r".*re-run 'oprof attribute'"):
        table.stream  # noqa: B018
    run = subprocess.run([sys.executable, "-m", "profiler_core", "diagnose", str(profile)], capture_output=True,
                         text=True, cwd=tmp_path)
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr
    assert "not a readable Parquet kernel table" in run.stderr
