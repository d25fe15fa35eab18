"""The columnar readers (read_nsys_columns, read_ncu_columns) on every shipped capture.

The tables are checked against the exports themselves (SQL over the nsys file, the csv module
over the ncu file), and the records built from them against the tables, row for row.
"""

from __future__ import annotations

import csv
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from profiler_core.ingest import read_ncu, read_ncu_columns, read_nsys, read_nsys_columns

REPO = Path(__file__).resolve().parents[2]
NSYS_EXPORTS = sorted([*REPO.glob("tests/data/h200_*/*.sqlite"), *REPO.glob("examples/captures/**/*.sqlite")])
NCU_CSVS = sorted([*REPO.glob("tests/data/h200_*/*.csv"), *REPO.glob("examples/captures/**/counters.csv")])


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(REPO)) for p in paths]


@pytest.mark.parametrize("path", NSYS_EXPORTS, ids=_ids(NSYS_EXPORTS))
def test_nsys_columns_hold_the_exported_kernels(path: Path) -> None:
    columns = read_nsys_columns(path)
    kernels = columns.kernels
    assert all(c.num_chunks == 1 for c in kernels.columns)
    names = kernels.column("name").chunk(0)
    assert len(set(names.dictionary.to_pylist())) == len(names.dictionary)  # each distinct name once
    starts = kernels.column("start_ns").to_pylist()
    assert starts == sorted(starts)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        exported = conn.execute(
            "SELECT coalesce(nullif(d.value, ''), s.value), k.start, k.end, k.streamId, k.correlationId "
            "FROM CUPTI_ACTIVITY_KIND_KERNEL AS k LEFT JOIN StringIds AS d ON d.id = k.demangledName "
            "LEFT JOIN StringIds AS s ON s.id = k.shortName ORDER BY k.start, k.rowid"
        ).fetchall()
        calls = conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    conn.close()
    read = [(r["name"], r["start_ns"], r["end_ns"], r["stream"], r["correlation_id"])
            for r in kernels.to_pylist() if r["kind"] == "kernel"]
    assert read == [tuple(row) for row in exported]
    assert columns.runtime_calls.num_rows == calls


@pytest.mark.parametrize("path", NSYS_EXPORTS[:2], ids=_ids(NSYS_EXPORTS[:2]))
def test_nsys_records_are_the_rows_of_the_columns(path: Path) -> None:
    columns = read_nsys_columns(path)
    timeline = read_nsys(path)
    for kernel, row in zip(timeline.kernels, columns.kernels.to_pylist(), strict=True):
        assert (kernel.name, kernel.start_ns, kernel.kind, kernel.short_name, kernel.smem_bytes) == (
            row["name"], row["start_ns"], row["kind"], row["short_name"], row["smem_bytes"])
        assert kernel.grid == (None if row["grid_x"] is None else (row["grid_x"], row["grid_y"], row["grid_z"]))
    assert [(r.text, r.start_ns, r.domain) for r in timeline.nvtx_ranges] == [
        (r["text"], r["start_ns"], r["domain"]) for r in columns.nvtx_ranges.to_pylist()]
    assert [(c.name, c.correlation_id) for c in timeline.runtime_calls] == [
        (r["name"], r["correlation_id"]) for r in columns.runtime_calls.to_pylist()]


@pytest.mark.parametrize("path", NCU_CSVS, ids=_ids(NCU_CSVS))
def test_ncu_columns_hold_the_exported_values(path: Path) -> None:
    columns = read_ncu_columns(path)
    report = read_ncu(path)
    assert columns.launches.column("ncu_id").to_pylist() == [r.ncu_id for r in report.rows]
    assert columns.launches.column("name").to_pylist() == [r.name for r in report.rows]
    assert [tuple(s) for s in columns.launches.column("nvtx_stack").to_pylist()] == [r.nvtx_stack for r in report.rows]
    for name in columns.metrics.column_names:
        assert columns.metrics.column(name).to_pylist() == [r.metrics[name] for r in report.rows]
    assert set(columns.metrics.column_names) == set(report.rows[0].metrics)
    assert (columns.metrics_returned, columns.units) == (report.metrics_returned, report.units)


def test_ncu_columns_match_the_csv_text(joinable: Path) -> None:
    """Values in base units straight from the cells (the shipped raw page is in base units)."""
    path = joinable / "ncu_full_raw.csv"
    with path.open(newline="") as fh:
        header, _units, *data = list(csv.reader(fh))
    metrics = read_ncu_columns(path).metrics
    for name in metrics.column_names:
        cells = [row[header.index(name)] for row in data]
        assert metrics.column(name).to_pylist() == [float(c.replace(",", "")) for c in cells]


def test_readers_and_the_columnar_write_never_import_pandas(joinable: Path, tmp_path: Path) -> None:
    probe = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from profiler_core.attribution import attribute\n"
        "from profiler_core.ingest import read_kineto, read_ncu, read_ncu_columns, read_nsys\n"
        "from profiler_core.profile_io import write_profile\n"
        f"nsys = read_nsys({str(joinable / 'nsys.sqlite')!r})\n"
        f"ncu = read_ncu({str(joinable / 'ncu_full_raw.csv')!r})\n"
        f"read_ncu_columns({str(joinable / 'ncu_full_raw.csv')!r})\n"
        f"kineto = read_kineto({str(joinable / 'kineto.json')!r})\n"
        "list(kineto.cpu_ops)\n"  # every record built from the tables
        "profile = attribute(kineto=kineto, nsys=nsys, ncu=ncu, columnar_above=0)\n"
        f"write_profile(Path({str(tmp_path / 'profile.json')!r}), profile)\n"  # profile.json + Parquet tables
        "print(json.dumps(sorted(m for m in ('pandas', 'torch') if m in sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_ncu_column_types_that_change_after_the_first_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """Types are inferred from the first block; a later value they cannot hold makes the reader read again.

    With 32 KB blocks the BERT capture's counters change type mid-file (``998`` rows, then ``1,024``).
    """
    import pyarrow.csv as pacsv

    from profiler_core.ingest import ncu_raw

    path = REPO / "examples" / "captures" / "h200" / "hf_bert_train" / "baseline" / "counters.csv"
    whole = read_ncu(path).rows
    opened = []
    real_open = pacsv.open_csv
    monkeypatch.setattr(pacsv, "open_csv", lambda *a, **k: opened.append(1) or real_open(*a, **k))
    monkeypatch.setattr(ncu_raw, "_BLOCK_BYTES", 1 << 15)
    assert read_ncu(path).rows == whole
    assert len(opened) == 2  # the second read took the numeric columns as text
