"""Ingest speed and memory: the Kineto, nsys and ncu readers on large inputs, beside their floors.

The inputs are built by replicating the real H200 artifacts in ``tests/data/h200_joinable``
into a temporary directory, each copy shifted in time and in its ids, so the readers see
realistic rows at scale (benchmark inputs, not captures):

* a Kineto trace of ``--kineto-mb`` MB (Kineto's own pretty-printed layout),
* an nsys SQLite export per ``--sizes`` entry (kernel, runtime and NVTX rows replicated;
  ``--no-nsys-nvtx`` leaves the 44 NVTX ranges alone),
* an ncu raw-page CSV per ``--sizes`` entry (data rows replicated, IDs renumbered).

Each case runs in a fresh subprocess so its peak RSS (``ru_maxrss``) is its own, and prints
wall time, CPU time (user + sys) and peak RSS; the figures are printed, never asserted. The
cases, in one table per input:

* ``floor``: the bare library on the same input: the ADBC SQLite driver reading the columns
  the nsys reader selects into Arrow (``floor-sqlite3``: the stdlib ``sqlite3`` rows turned into
  Arrow arrays), and ``pyarrow.csv.read_csv`` of the whole ncu file;
* ``columns``: ``read_nsys_columns`` / ``read_ncu_columns``, the readers' columnar output; for
  Kineto, ``read_kineto`` with no record read (its tables, what the attribution engine reads);
* ``records``: ``read_nsys`` / ``read_ncu`` / ``read_kineto``, and every frozen record built from those columns
  (they are built when a caller first reads one; the attribution engine reads the columns);
* ``baseline``: ``read_nsys`` / ``read_ncu`` of ``--baseline REV``'s ``profiler_core``
  (extracted with ``git archive``), when given.

Targets: Kineto 100 MB in under 5 s and 1.5 GB; the columnar nsys and ncu readers within
1.5x of their floor in time and memory. Wall time depends on what else the machine runs, so
the load average is printed too.

    python benchmarks/bench_ingest.py [--sizes 100k] [--only nsys --only ncu] [--repeat 1]
                                      [--baseline REV] [--kineto-mb 100] [--workdir DIR]
    python benchmarks/bench_ingest.py --sizes 100k,1M --only nsys --only ncu --baseline REV
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
JOINABLE = REPO / "tests" / "data" / "h200_joinable"
_ID_SHIFT = 1_000_000  # per replica, for External id / correlation / flow ids


def build_kineto(dest: Path, target_mb: float) -> None:
    """Replicate the joinable trace's events, shifting ts by the trace span and ids by _ID_SHIFT."""
    text = (JOINABLE / "kineto.json").read_text()
    doc = json.loads(text)
    events = doc["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), int | float)]
    span_us = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed) + 100.0
    head = text[: text.index('"traceEvents": [') + len('"traceEvents": [')]
    one_copy = sum(len(_event_text(e)) + 2 for e in events)
    copies = max(1, round(target_mb * 1e6 / one_copy))
    with dest.open("w") as out:
        out.write(head + "\n")
        first = True
        for replica in range(copies):
            for event in events:
                shifted = dict(event)
                if isinstance(shifted.get("ts"), int | float):
                    shifted["ts"] = round(shifted["ts"] + replica * span_us, 3)
                if shifted.get("cat") == "ac2g":
                    shifted["id"] = shifted["id"] + replica * _ID_SHIFT
                args = shifted.get("args")
                if isinstance(args, dict):
                    args = shifted["args"] = dict(args)
                    for key in ("External id", "correlation"):
                        if isinstance(args.get(key), int):
                            args[key] += replica * _ID_SHIFT
                out.write(("" if first else ",\n") + _event_text(shifted))
                first = False
        out.write('\n  ],\n  "traceName": "bench"\n}\n')


def _event_text(event: dict) -> str:
    """One event per block, its braces indented by two spaces: Kineto's own layout."""
    return "  " + json.dumps(event, indent=2).replace("\n", "\n  ")


def build_nsys(dest: Path, kernels: int, nvtx: bool = True) -> None:
    """Copy nsys.sqlite and replicate its kernel, runtime (and NVTX) rows with shifted times and ids."""
    shutil.copyfile(JOINABLE / "nsys.sqlite", dest)
    conn = sqlite3.connect(dest)
    base = conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    replicas = -(-kernels // base)
    lo, hi = conn.execute(
        "SELECT min(start), max(end) FROM (SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "UNION ALL SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME "
        "UNION ALL SELECT start, end FROM NVTX_EVENTS)"
    ).fetchone()
    span_ns = hi - lo + 1000
    shifted = {"start": f"start + i * {span_ns}", "end": f"end + i * {span_ns}",
               "correlationId": f"correlationId + i * {_ID_SHIFT}"}
    tables = ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"] + ["NVTX_EVENTS"] * nvtx
    for table in tables:
        columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        select = ", ".join(shifted.get(c, c) for c in columns)
        conn.execute(
            f"WITH RECURSIVE rep(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM rep WHERE i < {replicas - 1}) "
            f"INSERT INTO {table} ({', '.join(columns)}) SELECT {select} FROM {table}, rep"
        )  # SQLite reads the source rows before inserting into the same table
    conn.commit()
    conn.close()


def build_ncu_csv(dest: Path, rows: int) -> None:
    """Replicate the data rows of ncu_full_raw.csv (2 header rows), renumbering the ID column."""
    with (JOINABLE / "ncu_full_raw.csv").open(newline="") as f:
        table = list(csv.reader(f))
    header, data = table[:2], table[2:]
    with dest.open("w", newline="") as out:
        writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerows(header)
        for n in range(rows):
            row = list(data[n % len(data)])
            row[0] = str(n)
            writer.writerow(row)


_CHILD = r"""
import json, resource, sys, time
kind, case, path, root = sys.argv[1:5]
sys.path.insert(0, root)
NSYS_QUERIES = {queries!r}


def floor_nsys_adbc(path):
    import adbc_driver_manager, adbc_driver_sqlite, pyarrow as pa
    database = adbc_driver_sqlite.connect(f"file:{{path}}?mode=ro")
    conn = adbc_driver_manager.AdbcConnection(database)
    tables = []  # all three held at the end, as the reader's result holds them
    for sql in NSYS_QUERIES:
        statement = adbc_driver_manager.AdbcStatement(conn)
        statement.set_options(**{{"adbc.sqlite.query.batch_rows": str(1 << 22)}})
        statement.set_sql_query(sql)
        handle, _ = statement.execute_query()
        tables.append(pa.RecordBatchReader._import_from_c(handle.address).read_all())
        statement.close()
    return {{"rows": sum(t.num_rows for t in tables)}}


def floor_nsys_sqlite3(path):
    import sqlite3, pyarrow as pa
    conn = sqlite3.connect(f"file:{{path}}?mode=ro", uri=True)
    tables = []
    for sql in NSYS_QUERIES:
        cursor = conn.execute(sql)
        names = [d[0] for d in cursor.description]
        columns = list(zip(*cursor.fetchall())) or [()] * len(names)
        tables.append(pa.table({{n: pa.array(c) for n, c in zip(names, columns)}}))
    return {{"rows": sum(t.num_rows for t in tables)}}


def floor_ncu(path):
    import pyarrow.csv as pacsv
    table = pacsv.read_csv(path, read_options=pacsv.ReadOptions(skip_rows_after_names=1))
    return {{"rows": table.num_rows}}


def counts(result):
    # list(): every record built (read_nsys / read_ncu build them when first read)
    return {{name: len(list(getattr(result, name)))
             for name in ("kernels", "cpu_ops", "runtime_calls", "nvtx_ranges", "rows") if hasattr(result, name)}}


def run():
    if case == "floor":
        return {{"nsys": floor_nsys_adbc, "ncu": floor_ncu}}[kind](path)
    if case == "floor-sqlite3":
        return floor_nsys_sqlite3(path)
    if kind == "kineto":
        from profiler_core.ingest.kineto import read_kineto
        trace = read_kineto(path)
        if case == "columns":  # what the attribution engine reads: the tables, no record built
            return {{name: len(getattr(trace, name)) for name in ("kernels", "cpu_ops", "runtime_calls")}}
        return counts(trace)
    if case == "columns":
        if kind == "nsys":
            from profiler_core.ingest.nsys import read_nsys_columns
            c = read_nsys_columns(path)
            return {{"kernels": c.kernels.num_rows, "runtime_calls": c.runtime_calls.num_rows,
                    "nvtx_ranges": c.nvtx_ranges.num_rows}}
        from profiler_core.ingest.ncu import read_ncu_columns
        c = read_ncu_columns(path)
        return {{"rows": c.launches.num_rows, "metrics": c.metrics.num_columns}}
    if kind == "nsys":
        from profiler_core.ingest.nsys import read_nsys
        return counts(read_nsys(path))
    from profiler_core.ingest.ncu import read_ncu
    return counts(read_ncu(path))


before = resource.getrusage(resource.RUSAGE_SELF)
start = time.perf_counter()
try:
    result = run()
except ImportError as err:  # a baseline older than a columnar reader, or no pyarrow/ADBC
    print(json.dumps({{"skipped": str(err)}}))
    raise SystemExit(0)
wall_s = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_SELF)
cpu_s = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
print(json.dumps({{"wall_s": wall_s, "cpu_s": cpu_s, "peak_kb": after.ru_maxrss, "counts": result}}))
"""
# The columns read_nsys_columns selects, read by the floor as they are.
NSYS_FLOOR_QUERIES = (
    "SELECT start, end, streamId, deviceId, correlationId, gridX, gridY, gridZ, blockX, blockY, blockZ, "
    "registersPerThread, staticSharedMemory, dynamicSharedMemory, graphNodeId, demangledName, shortName "
    "FROM CUPTI_ACTIVITY_KIND_KERNEL",
    "SELECT start, end, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME",
    "SELECT start, end, eventType, globalTid, text, textId, domainId FROM NVTX_EVENTS "
    "WHERE eventType IN (34, 59, 60, 75)",
)


def measure(kind: str, case: str, path: Path, root: Path) -> dict[str, object]:
    """Run one case on ``path`` in a fresh interpreter (``root`` first on sys.path) and return its figures."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD.format(queries=NSYS_FLOOR_QUERIES), kind, case, str(path), str(root)],
        capture_output=True, text=True, check=False, cwd=root,
    )
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def report(kind: str, path: Path, cases: list[tuple[str, Path]], repeat: int) -> None:
    """One table per input: each case's best wall and CPU time of ``repeat`` runs, peak RSS, ratio to the floor."""
    size_mb = path.stat().st_size / 1e6
    print(f"\n{kind} {path.name}: {size_mb:.1f} MB")
    print(f"  {'case':14s} {'wall s':>7s} {'cpu s':>7s} {'peak MB':>8s} {'cpu/floor':>9s} {'peak/floor':>10s}  rows")
    floor: dict[str, float] = {}
    for case, root in cases:
        runs = [measure(kind, case, path, root) for _ in range(repeat)]
        failed = next((r for r in runs if "error" in r or "skipped" in r), None)
        if failed is not None:
            print(f"  {case:14s} {'skipped' if 'skipped' in failed else 'FAILED'}: "
                  f"{failed.get('skipped') or failed.get('error')}")
            continue
        wall = min(float(r["wall_s"]) for r in runs)  # type: ignore[arg-type]
        cpu = min(float(r["cpu_s"]) for r in runs)  # type: ignore[arg-type]
        peak = max(int(r["peak_kb"]) for r in runs) / 1024  # type: ignore[call-overload]
        if case == "floor":
            floor = {"cpu": cpu, "peak": peak}
        ratios = (f"{cpu / floor['cpu']:9.2f} {peak / floor['peak']:10.2f}" if floor and case != "floor"
                  else f"{'':9s} {'':10s}")
        print(f"  {case:14s} {wall:7.2f} {cpu:7.2f} {peak:8.0f} {ratios}  {runs[0]['counts']}")


def _size(text: str) -> int:
    """``100k`` -> 100000, ``1M`` -> 1000000, ``5000`` -> 5000."""
    text = text.strip()
    scale = {"k": 1_000, "K": 1_000, "m": 1_000_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def extract_baseline(rev: str, into: Path) -> Path:
    """``profiler_core`` of git revision ``rev``, unpacked under ``into`` (the old readers, for comparison)."""
    archive = subprocess.run(["git", "archive", "--format=tar", rev, "profiler_core"], cwd=REPO,
                             capture_output=True, check=True).stdout
    target = into / f"baseline_{rev.replace('/', '_')}"
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100k",
                        help="comma-separated nsys kernel / ncu row counts, e.g. 100k,1M (default 100k)")
    parser.add_argument("--kineto-mb", type=float, default=100.0)
    parser.add_argument("--no-nsys-nvtx", action="store_true",
                        help="replicate only the kernel and runtime tables of the nsys export")
    parser.add_argument("--repeat", type=int, default=1, help="runs per case (the best is shown)")
    parser.add_argument("--baseline", metavar="REV", help="also time the readers of this git revision")
    parser.add_argument("--no-sqlite3-floor", action="store_true",
                        help="skip the stdlib sqlite3 -> Arrow floor (about 6x slower than ADBC)")
    parser.add_argument("--workdir", type=Path, help="build inputs here and keep them (default: a temp dir)")
    parser.add_argument("--only", choices=("kineto", "nsys", "ncu"), action="append",
                        help="measure only these readers (repeatable)")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_ingest_"))
    work.mkdir(parents=True, exist_ok=True)
    sizes = [_size(s) for s in args.sizes.split(",") if s.strip()]
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", file=sys.stderr)
    try:
        baseline = [("baseline", extract_baseline(args.baseline, work))] if args.baseline else []
        inputs: list[tuple[str, Path, object]] = [
            ("kineto", work / "kineto.json", lambda p: build_kineto(p, args.kineto_mb))]
        for n in sizes:
            nvtx = "_no_nvtx" * args.no_nsys_nvtx
            inputs.append(("nsys", work / f"nsys_{n}{nvtx}.sqlite",
                           lambda p, n=n: build_nsys(p, n, nvtx=not args.no_nsys_nvtx)))
            inputs.append(("ncu", work / f"ncu_raw_{n}.csv", lambda p, n=n: build_ncu_csv(p, n)))
        for kind, path, build in inputs:
            if args.only and kind not in args.only:
                continue
            if not path.exists():
                start = time.perf_counter()
                build(path)  # type: ignore[operator]
                print(f"built {path.name}: {path.stat().st_size / 1e6:.1f} MB in "
                      f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
            if kind == "kineto":
                cases = [("columns", REPO), ("records", REPO), *baseline]
            else:
                floors = [("floor", REPO)] + [("floor-sqlite3", REPO)] * (kind == "nsys" and not args.no_sqlite3_floor)
                cases = [*floors, ("columns", REPO), ("records", REPO), *baseline]
            report(kind, path, cases, args.repeat)
        print(f"load average after: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
