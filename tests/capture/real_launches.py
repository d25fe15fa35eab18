"""Kernel records built straight from the real H200 artifacts (test scaffolding, not the ingest readers).

Just enough parsing to hand the determinism check the real names, order and sizes:
Kineto ``kernel`` events, nsys ``CUPTI_ACTIVITY_KIND_KERNEL`` rows, ncu raw-page CSV rows.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

from profiler_core.records import CounterRow, TimelineKernel


def kineto_kernels(path: Path) -> list[TimelineKernel]:
    events = json.loads(path.read_text())["traceEvents"]
    out = []
    for ev in events:
        if ev.get("cat") != "kernel":
            continue
        args = ev["args"]
        start = int(float(ev["ts"]) * 1000)
        out.append(
            TimelineKernel(
                name=ev["name"],
                start_ns=start,
                end_ns=start + int(float(ev["dur"]) * 1000),
                stream=args["stream"],
                device=args["device"],
                correlation_id=args["correlation"],
                grid=tuple(args["grid"]),
                block=tuple(args["block"]),
            )
        )
    return out


def nsys_kernels(path: Path) -> list[TimelineKernel]:
    db = sqlite3.connect(path)
    try:
        rows = db.execute(
            "SELECT s.value, k.start, k.end, k.streamId, k.deviceId, k.correlationId, "
            "k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ "
            "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
            "ON s.id = k.demangledName"
        ).fetchall()
    finally:
        db.close()
    return [
        TimelineKernel(
            name=r[0],
            start_ns=r[1],
            end_ns=r[2],
            stream=r[3],
            device=r[4],
            correlation_id=r[5],
            grid=(r[6], r[7], r[8]),
            block=(r[9], r[10], r[11]),
        )
        for r in rows
    ]


def _dim(text: str) -> tuple[int, int, int]:
    x, y, z = (int(v) for v in text.strip("()").split(","))
    return (x, y, z)


def ncu_rows(path: Path) -> list[CounterRow]:
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))[1:]  # second line: units
    out = []
    for row in rows:
        metrics = {
            k: (float(v.replace(",", "")) if v not in ("", "n/a") else None)
            for k, v in row.items()
            if "__" in k
        }
        out.append(
            CounterRow(
                ncu_id=int(row["ID"]),
                name=row["Kernel Name"],
                grid=_dim(row["Grid Size"]),
                block=_dim(row["Block Size"]),
                stream=int(row["Stream"]),
                device=int(row["Device"]),
                metrics=metrics,
            )
        )
    return out
