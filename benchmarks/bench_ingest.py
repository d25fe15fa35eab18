"""Ingest speed and memory: the Kineto, nsys and ncu readers on large inputs.

The inputs are built by replicating the real H200 artifacts in ``tests/data/h200_joinable``
into a temporary directory, each copy shifted in time and in its ids, so the readers see
realistic events at scale:

* a ~100 MB Kineto trace (Kineto's own pretty-printed layout),
* an nsys SQLite export with 500k kernels (kernel, runtime and NVTX rows replicated;
  ``--no-nsys-nvtx`` leaves the 44 NVTX ranges alone),
* an ncu raw CSV with 500k data rows (read by ``profiler_core.ingest.ncu.read_ncu`` when present).

Each reader runs in a fresh subprocess so its peak RSS (``ru_maxrss``) is its own; the
figures are printed, never asserted. Wall time depends on what else the machine runs, so
CPU time (user + sys of the reader) and the load average are printed too.
Targets: 100 MB of Kineto in under 5 s and 1.5 GB.

    python benchmarks/bench_ingest.py [--kineto-mb 100] [--nsys-kernels 500000]
                                      [--ncu-rows 500000] [--repeat 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
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


_CHILD = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
kind, path = sys.argv[1], sys.argv[2]
try:
    if kind == "kineto":
        from profiler_core.ingest.kineto import read_kineto as read
    elif kind == "nsys":
        from profiler_core.ingest.nsys import read_nsys as read
    else:
        from profiler_core.ingest.ncu import read_ncu as read
except ImportError as err:
    print(json.dumps({{"skipped": str(err)}}))
    raise SystemExit(0)
if len(sys.argv) > 3:  # availability check only
    raise SystemExit(0)
before = resource.getrusage(resource.RUSAGE_SELF)
start = time.perf_counter()
result = read(path)
wall_s = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_SELF)
cpu_s = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
counts = {{name: len(getattr(result, name)) for name in
          ("kernels", "cpu_ops", "runtime_calls", "nvtx_ranges", "rows") if hasattr(result, name)}}
print(json.dumps({{"wall_s": wall_s, "cpu_s": cpu_s, "peak_kb": after.ru_maxrss,
                  "baseline_kb": before.ru_maxrss, "counts": counts}}))
"""


def measure(kind: str, path: Path, check_only: bool = False) -> dict[str, object]:
    """Run one reader on ``path`` in a fresh interpreter and return its figures."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD.format(repo=str(REPO)), kind, str(path), *(["check"] * check_only)],
        capture_output=True, text=True, check=False,
    )
    if check_only and done.returncode == 0 and not done.stdout.strip():
        return {}
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(kind: str, path: Path, repeat: int) -> None:
    """Print input size, wall time (best and median of ``repeat`` runs), MB/s and peak RSS."""
    size_mb = path.stat().st_size / 1e6
    runs = [measure(kind, path) for _ in range(repeat)]
    if any("error" in r for r in runs):
        print(f"{kind:7s} {size_mb:8.1f} MB  FAILED: {next(r['error'] for r in runs if 'error' in r)}")
        return
    walls = [float(r["wall_s"]) for r in runs]  # type: ignore[arg-type]
    cpus = [float(r["cpu_s"]) for r in runs]  # type: ignore[arg-type]
    peak_mb = max(int(r["peak_kb"]) for r in runs) / 1024  # type: ignore[call-overload]
    base_mb = min(int(r["baseline_kb"]) for r in runs) / 1024  # type: ignore[call-overload]
    best, median = min(walls), statistics.median(walls)
    print(f"{kind:7s} {size_mb:7.1f} MB  wall best {best:5.2f} s (median {median:5.2f})  "
          f"{size_mb / best:6.1f} MB/s  cpu best {min(cpus):5.2f} s  peak RSS {peak_mb:5.0f} MB "
          f"(of which interpreter + imports {base_mb:.0f} MB)  {runs[0]['counts']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kineto-mb", type=float, default=100.0)
    parser.add_argument("--nsys-kernels", type=int, default=500_000)
    parser.add_argument("--ncu-rows", type=int, default=500_000)
    parser.add_argument("--no-nsys-nvtx", action="store_true",
                        help="replicate only the kernel and runtime tables of the nsys export")
    parser.add_argument("--repeat", type=int, default=3, help="runs per reader (best and median shown)")
    parser.add_argument("--workdir", type=Path, help="build inputs here and keep them (default: a temp dir)")
    parser.add_argument("--only", choices=("kineto", "nsys", "ncu"), action="append",
                        help="measure only these readers (repeatable)")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_ingest_"))
    work.mkdir(parents=True, exist_ok=True)
    inputs = {
        "kineto": (work / "kineto.json", lambda p: build_kineto(p, args.kineto_mb)),
        "nsys": (work / f"nsys{'_no_nvtx' * args.no_nsys_nvtx}.sqlite",
                 lambda p: build_nsys(p, args.nsys_kernels, nvtx=not args.no_nsys_nvtx)),
        "ncu": (work / "ncu_raw.csv", lambda p: build_ncu_csv(p, args.ncu_rows)),
    }
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", file=sys.stderr)
    try:
        for kind, (path, build) in inputs.items():
            if args.only and kind not in args.only:
                continue
            available = measure(kind, JOINABLE / "kineto.json", check_only=True)
            if "skipped" in available:
                print(f"{kind:7s} skipped: {kind} reader not available ({available['skipped']})")
                continue
            if not path.exists():
                start = time.perf_counter()
                build(path)
                print(f"built {path.name}: {path.stat().st_size / 1e6:.1f} MB in "
                      f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
            report(kind, path, args.repeat)
        print(f"load average after: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
