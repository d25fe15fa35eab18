"""Attribution at scale: synthetic captures of 10k, 100k and 1M kernels built from a real one.

The real H200 capture in tests/data/h200_joinable (44 kernels: Kineto, nsys, ncu, Inductor)
is replicated with shifted times and ids, so every tier has real-looking work to do. Each
size runs in a fresh process; the figure is the attribution itself (all tiers, aggregation,
layer dedup, profile.json written), plus the process's peak RSS.

    python benchmarks/bench_attribute.py [--sizes 10000 100000 1000000]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "h200_joinable"
sys.path.insert(0, str(REPO))  # run from a checkout without installing


def _replicate(copies: int):
    from profiler_core.ingest import read_inductor, read_kineto, read_ncu, read_nsys
    from profiler_core.records import KinetoTrace, NcuReport, NsysTimeline

    kin = read_kineto(DATA / "kineto.json")
    nsy = read_nsys(DATA / "nsys.sqlite")
    ncu = read_ncu(DATA / "ncu_full_raw.csv")
    ind = read_inductor(DATA / "torch_trace.tgz")

    def span(items, attr_s="start_ns", attr_e="end_ns"):
        return max(getattr(i, attr_e) for i in items) - min(getattr(i, attr_s) for i in items) + 1_000

    k_period = span(kin.kernels + kin.cpu_ops)
    n_period = span(nsy.kernels + nsy.nvtx_ranges + nsy.runtime_calls)
    ext_step = max(o.external_id or 0 for o in kin.cpu_ops) + 1
    corr_step = max(max(k.correlation_id or 0 for k in kin.kernels),
                    max(r.correlation_id or 0 for r in kin.runtime_calls)) + 1
    ncorr_step = max(max(k.correlation_id or 0 for k in nsy.kernels),
                     max(r.correlation_id or 0 for r in nsy.runtime_calls)) + 1

    def shift(rec, c, period, cstep=None, estep=None):
        changes = {"start_ns": rec.start_ns + c * period, "end_ns": rec.end_ns + c * period}
        if cstep is not None and getattr(rec, "correlation_id", None) is not None:
            changes["correlation_id"] = rec.correlation_id + c * cstep
        if estep is not None and getattr(rec, "external_id", None) is not None:
            changes["external_id"] = rec.external_id + c * estep
        return replace(rec, **changes)

    kin2 = KinetoTrace(
        path=kin.path, metadata=kin.metadata,
        kernels=[shift(k, c, k_period, corr_step, ext_step) for c in range(copies) for k in kin.kernels],
        cpu_ops=[shift(o, c, k_period, None, ext_step) for c in range(copies) for o in kin.cpu_ops],
        runtime_calls=[shift(r, c, k_period, corr_step, ext_step) for c in range(copies) for r in kin.runtime_calls],
    )
    nsy2 = NsysTimeline(
        path=nsy.path, gpus=nsy.gpus,
        kernels=[shift(k, c, n_period, ncorr_step) for c in range(copies) for k in nsy.kernels],
        runtime_calls=[shift(r, c, n_period, ncorr_step) for c in range(copies) for r in nsy.runtime_calls],
        nvtx_ranges=[shift(r, c, n_period) for c in range(copies) for r in nsy.nvtx_ranges],
    )
    rows = [replace(r, ncu_id=r.ncu_id + c * len(ncu.rows)) for c in range(copies) for r in ncu.rows]
    ncu2 = NcuReport(path=ncu.path, rows=rows, metrics_returned=ncu.metrics_returned, source=ncu.source,
                     units=ncu.units)
    return kin2, nsy2, ncu2, ind


def _child(size: int) -> None:
    from profiler_core.attribution import attribute
    from profiler_core.schema import write_profile

    copies = max(1, size // 44)
    kin, nsy, ncu, ind = _replicate(copies)
    t0 = time.perf_counter()
    profile = attribute(kineto=kin, nsys=nsy, ncu=ncu, inductor=ind)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        write_profile(Path(tmp) / "profile.json", profile)
    t2 = time.perf_counter()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"kernels": len(profile.kernels), "operators": len(profile.operators),
                      "attribute_s": t1 - t0, "write_s": t2 - t1, "total_s": t2 - t0, "peak_rss_mb": rss_mb,
                      "attributed_pct": profile.coverage.attributed_time_pct}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child)
        return
    results = []
    print(f"{'kernels':>9} {'operators':>9} {'attribute s':>11} {'write s':>8} {'total s':>8} {'peak RSS MB':>11}")
    for size in args.sizes:
        out = subprocess.run([sys.executable, __file__, "--child", str(size)], capture_output=True, text=True,
                             cwd=REPO, check=False)
        if out.returncode != 0:
            print(f"{size}: failed\n{out.stderr[-2000:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        results.append(r)
        print(f"{r['kernels']:>9} {r['operators']:>9} {r['attribute_s']:>11.2f} {r['write_s']:>8.2f} "
              f"{r['total_s']:>8.2f} {r['peak_rss_mb']:>11.0f}")
    if len(results) >= 2:
        a, b = results[0], results[-1]
        exponent = math.log(b["total_s"] / a["total_s"]) / math.log(b["kernels"] / a["kernels"])
        print(f"growth exponent (total time, {a['kernels']} -> {b['kernels']} kernels): {exponent:.2f}")


if __name__ == "__main__":
    main()
