"""How fast read_ncu parses a large raw-page ncu CSV (target: 500k launches in a few seconds).

Builds the CSV by repeating the real H200 export's 44 rows with fresh IDs, then times
``read_ncu`` on it. Usage: ``python benchmarks/ncu_csv_read.py [ROWS]`` (default 500000).
"""

from __future__ import annotations

import csv
import sys
import tempfile
import time
from pathlib import Path

from bench_ingest import build_ncu_csv

from profiler_core.ingest.ncu import read_ncu


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big_raw.csv"
        build_ncu_csv(path, rows)
        size_mb = path.stat().st_size / 1e6
        wall, cpu = time.perf_counter(), time.process_time()
        with path.open(newline="") as fh:
            for _ in csv.reader(fh):
                pass
        floor = (time.perf_counter() - wall, time.process_time() - cpu)
        wall, cpu = time.perf_counter(), time.process_time()
        report = read_ncu(path)
        spent = (time.perf_counter() - wall, time.process_time() - cpu)
    print(f"csv module alone (the floor): {floor[0]:.2f} s wall, {floor[1]:.2f} s CPU for {size_mb:.0f} MB")
    print(f"read_ncu: {len(report.rows)} rows x {len(report.metrics_returned)} metrics in "
          f"{spent[0]:.2f} s wall, {spent[1]:.2f} s CPU "
          f"({len(report.rows) / spent[1]:,.0f} rows per CPU second)")


if __name__ == "__main__":
    main()
