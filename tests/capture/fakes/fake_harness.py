"""Fake harness: answers like profiler_core.capture.harness, with the real H200 artifacts."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tarfile
import time

from common import JOINABLE, log

p = argparse.ArgumentParser()
for name in (
    "--workload",
    "--phase",
    "--compile-mode",
    "--warmup",
    "--iters",
    "--out",
    "--device",
    "--seed",
    "--probe-seconds",
):
    p.add_argument(name)
p.add_argument("--provenance", action="store_true")
args = p.parse_args()
log("harness", phase=args.phase)
if os.environ.get("FAKE_HARNESS_FAIL") in (args.phase, "all"):
    sys.stderr.write("some torch noise\n")
    sys.stderr.write(f"oprof-workload-error: {args.workload}: raised ValueError in step(): bad shape\n")
    sys.exit(3)
if os.environ.get("FAKE_HARNESS_SLEEP") == args.phase:
    time.sleep(60)
result = {
    "oprof_harness": 1,
    "phase": args.phase,
    "measured_ms": 1.5,
    "device_info": {"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"},
    "versions": {"torch": "2.11.0+cu130", "cuda": "13.0", "python": "3.12.3"},
}
if args.phase == "kineto":
    shutil.copy(JOINABLE / "kineto.json", args.out)
    if os.environ.get("TORCH_TRACE"):
        with tarfile.open(JOINABLE / "torch_trace.tgz") as tar:
            tar.extractall(os.environ["TORCH_TRACE"], filter="data")
    if os.environ.get("TORCH_LOGS_OUT"):
        shutil.copy(JOINABLE / "output_code.log", os.environ["TORCH_LOGS_OUT"])
    result["kernels"] = int(os.environ.get("FAKE_KERNELS", "44"))
elif args.phase == "probe":
    start = time.time()
    time.sleep(0.6)
    result.update(load_start_unix=start, load_end_unix=time.time())
print("workload chatter on stdout")
print(json.dumps(result))
