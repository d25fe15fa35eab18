"""Fake ncu: --version, --query-metrics (real chip lists), profile (runs the app), --import (real CSVs)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

from common import JOINABLE, METRICS, log, split_app

argv = sys.argv[1:]
if "--version" in argv:
    print(
        "NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2025 NVIDIA Corporation\n"
        "Version 2025.3.1.0 (build 36398880) (public-release)"
    )
    sys.exit(0)
log("ncu")
if "--query-metrics" in argv:
    chip = argv[argv.index("--chip") + 1]
    path = METRICS / f"metrics_{chip}.txt.gz"
    if not path.exists():
        print(f"==ERROR== Invalid chip '{chip}'", file=sys.stderr)
        sys.exit(1)
    sys.stdout.write(gzip.decompress(path.read_bytes()).decode())
    sys.exit(0)
if "--import" in argv:
    info = json.loads(Path(argv[argv.index("--import") + 1]).read_text())
    source = JOINABLE / ("ncu_per_config_raw.csv" if info["per_config"] else "ncu_full_raw.csv")
    lines = source.read_text().splitlines(keepends=True)
    if info["launch_count"] and not info["per_config"]:
        lines = lines[: 2 + int(info["launch_count"])]
    sys.stdout.write("".join(lines))
    sys.exit(0)
opts, app = split_app(
    argv,
    {
        "--profile-from-start",
        "--target-processes",
        "--replay-mode",
        "--clock-control",
        "--metrics",
        "--launch-count",
        "--filter-mode",
        "-o",
    },
)
if os.environ.get("FAKE_NCU_FAIL_REPLAY") == opts.get("--replay-mode"):
    print(f"==ERROR== Failed to profile kernel in {opts['--replay-mode']} replay", file=sys.stderr)
    sys.exit(1)
print("==PROF== Connected to process")
sys.stdout.flush()
rc = subprocess.call(app)
if rc != 0:
    print(f"==ERROR== The application returned an error code ({rc}).")
    sys.exit(rc)
print("==PROF== Disconnected from process")
Path(opts["-o"] + ".ncu-rep").write_text(
    json.dumps(
        {
            "per_config": opts.get("--filter-mode") == "per-launch-config",
            "launch_count": opts.get("--launch-count"),
        }
    )
)
