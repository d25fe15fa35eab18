"""Regenerate the broken artifacts in this folder from the real H200 captures.

    python tests/data/broken/make_broken.py

Each file breaks one thing a reader must refuse with an ArtifactFormatError naming the file.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

HERE = Path(__file__).parent
DATA = HERE.parent
KINETO = DATA / "h200_tiny" / "kineto_compiled_mlp.json"
NSYS = DATA / "h200_joinable" / "nsys.sqlite"
# The tables an nsys reader looks at; the others are dropped to keep the broken exports small.
_NSYS_KEEP = ("StringIds", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS",
              "TARGET_INFO_GPU", "META_DATA_EXPORT")


def kineto_files() -> None:
    text = KINETO.read_text()
    (HERE / "kineto_truncated.json").write_text(text[: len(text) // 2])
    (HERE / "kineto_not_a_trace.json").write_text(json.dumps({"model": "mlp", "layers": [128, 256, 128]}))
    (HERE / "kineto_empty.json").write_text(json.dumps({"schemaVersion": 1, "traceEvents": []}))
    doc = json.loads(text)
    doc.pop("deviceProperties")
    gpu = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "ac2g"}
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in gpu and e.get("pid") != 0]
    (HERE / "kineto_cpu_only.json").write_text(json.dumps(doc, indent=1))
    doc = json.loads(text)
    kernel = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "kernel")
    del doc["traceEvents"][kernel]["dur"]
    (HERE / "kineto_kernel_without_dur.json").write_text(json.dumps(doc, indent=1))


def _nsys_copy(name: str) -> sqlite3.Connection:
    dest = HERE / name
    dest.unlink(missing_ok=True)
    shutil.copyfile(NSYS, dest)
    conn = sqlite3.connect(dest)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        if table not in _NSYS_KEEP:
            conn.execute(f"DROP TABLE {table}")
    return conn


def _close(conn: sqlite3.Connection) -> None:
    conn.commit()
    conn.execute("VACUUM")
    conn.close()


def nsys_files() -> None:
    (HERE / "nsys_text.sqlite").write_text("Generated 2026-11-29: see report.nsys-rep\n")
    dest = HERE / "nsys_not_nsys.sqlite"
    dest.unlink(missing_ok=True)
    conn = sqlite3.connect(dest)
    conn.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, model TEXT, latency_ms REAL)")
    conn.execute("INSERT INTO runs (model, latency_ms) VALUES ('mlp', 1.25)")
    _close(conn)
    conn = _nsys_copy("nsys_no_kernel_table.sqlite")
    conn.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    _close(conn)
    conn = _nsys_copy("nsys_no_kernels.sqlite")
    conn.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    _close(conn)
    conn = _nsys_copy("nsys_no_stream_column.sqlite")
    conn.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN streamId")
    _close(conn)
    conn = _nsys_copy("nsys_no_runtime_table.sqlite")
    conn.execute("DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME")
    _close(conn)
    conn = _nsys_copy("nsys_text_in_start.sqlite")
    conn.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'n/a' WHERE rowid = 3")
    _close(conn)
    data = NSYS.read_bytes()
    (HERE / "nsys_truncated.sqlite").write_bytes(data[: len(data) // 3])


if __name__ == "__main__":
    kineto_files()
    nsys_files()
