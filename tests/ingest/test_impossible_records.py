"""Records no GPU can produce, made by editing copies of real H200 artifacts: each is refused by name.

The untouched copies are read first, so every refusal below is caused by the one edit.
"""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest import read_kineto, read_ncu, read_nsys

DATA = Path(__file__).resolve().parents[1] / "data"
KINETO = DATA / "h200_pair" / "base_kineto.json"
NCU = DATA / "h200_pair" / "base_ncu_raw.csv"
NSYS = DATA / "h200_joinable" / "nsys.sqlite"


def _first_kernel(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(e for e in events if e.get("cat") == "kernel")


def _set(key: str, value: Any) -> Callable[[list[dict[str, Any]]], None]:
    return lambda events: _first_kernel(events).__setitem__(key, value)


KINETO_EDITS = {
    "negative-dur": (_set("dur", -3.5), "ends before it starts"),
    "zero-dur": (_set("dur", 0), "lasts 0 ns"),
    "absurd-ts": (_set("ts", 1e300), "outside any clock"),
    "absurd-dur": (_set("dur", 1e13), "not a measurement"),
    "negative-ts": (_set("ts", -1e15), "outside any clock"),
    "duplicated-kernel": (lambda ev: ev.append(dict(_first_kernel(ev))), "appears twice"),
}


def test_the_real_trace_is_read() -> None:
    assert read_kineto(KINETO).kernels


@pytest.mark.parametrize("edit", list(KINETO_EDITS), ids=list(KINETO_EDITS))
def test_impossible_kineto_times(tmp_path: Path, edit: str) -> None:
    mutate, match = KINETO_EDITS[edit]
    doc = json.loads(KINETO.read_text())
    mutate(doc["traceEvents"])
    bad = tmp_path / "kineto.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(ArtifactFormatError, match=match) as info:
        read_kineto(bad)
    assert str(bad) in str(info.value)


def test_nsys_end_before_start(tmp_path: Path) -> None:
    assert read_nsys(NSYS).kernels
    bad = tmp_path / "nsys.sqlite"
    shutil.copy(NSYS, bad)
    with sqlite3.connect(bad) as conn:
        conn.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start - 10 '
                     "WHERE rowid = (SELECT MIN(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)")
    with pytest.raises(ArtifactFormatError, match="ends before it starts"):
        read_nsys(bad)


def _edit_ncu(tmp_path: Path, column: str, *, unit: str | None = None,
              value: Callable[[str], str] | None = None) -> Path:
    with NCU.open(newline="") as fh:
        rows = list(csv.reader(fh))
    header = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
    col = rows[header].index(column)
    if unit is not None:
        rows[header + 1][col] = unit
    if value is not None:
        for row in rows[header + 2:]:
            if row[col]:
                row[col] = value(row[col])
    bad = tmp_path / "counters.csv"
    with bad.open("w", newline="") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerows(rows)
    return bad


def _scaled(factor: float) -> Callable[[str], str]:
    return lambda cell: repr(float(cell.replace(",", "")) * factor)


NCU_EDITS = {
    "negative-duration": ("gpu__time_duration.sum", None, lambda c: "-" + c, "below zero"),
    "percent-bytes": ("dram__bytes_read.sum", "%", None, "its name says 'byte'"),
    "blank-unit-bytes": ("dram__bytes_write.sum", "", None, "its name says 'byte'"),
    "bytes-in-a-percentage": ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "byte", None,
                              "its name says '%'"),
    "dram-bytes-x1e12": ("dram__bytes_read.sum", None, _scaled(1e12), "more than 100 TB/s"),
    "negative-bytes": ("dram__bytes_read.sum", None, lambda c: "-" + c if c.strip("0.") else "-1", "below zero"),
}


def test_the_real_counters_are_read() -> None:
    assert read_ncu(NCU).rows


@pytest.mark.parametrize("edit", list(NCU_EDITS), ids=list(NCU_EDITS))
def test_impossible_ncu_values(tmp_path: Path, edit: str) -> None:
    column, unit, value, match = NCU_EDITS[edit]
    bad = _edit_ncu(tmp_path, column, unit=unit, value=value)
    with pytest.raises(ArtifactFormatError, match=match):
        read_ncu(bad)
