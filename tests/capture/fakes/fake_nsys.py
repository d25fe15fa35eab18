"""Fake nsys: --version, profile (runs the app, writes a report), export (the real H200 SQLite)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from common import JOINABLE, log, split_app

argv = sys.argv[1:]
if "--version" in argv:
    print("NVIDIA Nsight Systems version 2025.3.1.90-253135822126v0")
    sys.exit(0)
log("nsys")
verb, rest = argv[0], argv[1:]
if os.environ.get("FAKE_NSYS_FAIL") == verb:
    print(f"nsys {verb}: QdstrmImporter: error while loading shared libraries: libdw.so.1", file=sys.stderr)
    sys.exit(1)
opts, app = split_app(rest, {"-t", "-s", "--cpuctxsw", "--force-overwrite", "-o", "--type"})
if verb == "profile" and os.environ.get("FAKE_NSYS_FAIL") == "import":
    # what the nsys inside Nsight Compute does without libdw: it records, the import fails, exit 0
    rc = subprocess.call(app)
    Path(opts["-o"] + ".qdstrm").write_text("stream")
    print("Generating '/tmp/nsys-report-a1b2.qdstrm'\n/opt/nvidia/nsight-compute/2025.3.1/host/"
          "linux-desktop-glibc_2_11_3-x64/QdstrmImporter: error while loading shared libraries: libdw.so.1: "
          "cannot open shared object file: No such file or directory")
    sys.exit(rc)
if verb == "profile":
    rc = subprocess.call(app)
    Path(opts["-o"] + ".nsys-rep").write_text("report")
    sys.exit(rc)
if verb == "export":
    shutil.copy(JOINABLE / "nsys.sqlite", opts["-o"])
    sys.exit(0)
sys.exit(2)
